// SPDX-License-Identifier: Apache-2.0
//
// Errors of offloaded calls (errors.cpp): the layer's error classes and the
// communicator's error handler.
#pragma once

#include "calls.hpp"

#include <string>

namespace accl::pmpi {

void errors_init();
// Maps the exception being handled to an MPI error code of our classes and
// remembers its text; `call` names the MPI call for messages.
int error_code_from_current_exception(Call call, std::string* text);
// Runs the communicator's error handler (fatal handlers abort with a message
// naming call, rank and cause) and returns the code for ERRORS_RETURN.
int raise_error(MPI_Comm comm, Call call, int code, const std::string& text);
// Runs the communicator's error handler with an MPI error class (predefined
// classes carry no text of ours: Open MPI refuses new strings for them), and
// prints `message` first when the handler is fatal. Returns `mpi_class`.
int raise_class(MPI_Comm comm, int mpi_class, const char* message);

}  // namespace accl::pmpi
