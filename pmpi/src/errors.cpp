// SPDX-License-Identifier: Apache-2.0
//
// Errors of offloaded calls go through the communicator's MPI error handler,
// like any MPI error: MPI_ERRORS_ARE_FATAL aborts (after a message naming the
// call, the rank and the cause), MPI_ERRORS_RETURN returns one of three error
// classes this layer registers at MPI_Init. MPI_Error_string of the returned
// code reads the text of the most recent failure of that class.
#include "errors.hpp"

#include "state.hpp"

#include <accl/log.hpp>

#include <cstdio>

namespace accl::pmpi {

namespace {
int add_class(const char* text) {
  int cls = MPI_ERR_OTHER;
  int code = MPI_ERR_OTHER;
  if (PMPI_Add_error_class(&cls) != MPI_SUCCESS) return MPI_ERR_OTHER;
  PMPI_Add_error_string(cls, const_cast<char*>(text));
  if (PMPI_Add_error_code(cls, &code) != MPI_SUCCESS) return cls;
  PMPI_Add_error_string(code, const_cast<char*>(text));
  return code;
}
}  // namespace

void errors_init() {
  State& st = state();
  // Collective in spirit: every rank registers the same classes in the same
  // order, so the numbers agree across ranks.
  st.err_device = add_class("ACCL device error in an offloaded MPI call");
  st.err_timeout = add_class("ACCL timeout in an offloaded MPI call");
  st.err_argument = add_class("ACCL rejected the arguments of an offloaded MPI call");
}

int error_code_from_current_exception(Call, std::string* text) {
  State& st = state();
  try {
    throw;
  } catch (const TimeoutError& e) {
    *text = std::string("timeout: ") + e.what();
    return st.err_timeout;
  } catch (const DeviceError& e) {
    *text = std::string("device error: ") + e.what();
    return st.err_device;
  } catch (const ArgumentError& e) {
    *text = std::string("invalid arguments: ") + e.what();
    return st.err_argument;
  } catch (const std::exception& e) {
    *text = std::string("internal error: ") + e.what();
    return st.err_device;
  } catch (...) {
    *text = "unknown internal error";
    return st.err_device;
  }
}

int raise_error(MPI_Comm comm, Call call, int code, const std::string& text) {
  State& st = state();
  std::string msg = std::string(call_name(call)) + " on rank " + std::to_string(st.world_rank) +
                    " failed in ACCL (offloaded): " + text;
  if (msg.size() >= MPI_MAX_ERROR_STRING) msg.resize(MPI_MAX_ERROR_STRING - 1);
  // Latest failure text for MPI_Error_string (Open MPI replaces the string).
  PMPI_Add_error_string(code, const_cast<char*>(msg.c_str()));
  ACCL_LOG_INFO("{}", msg);
  return raise_class(comm, code, msg.c_str());
}

int raise_class(MPI_Comm comm, int mpi_class, const char* message) {
  if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(comm, &eh);
  const bool fatal = eh == MPI_ERRORS_ARE_FATAL;
  if (eh != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&eh);
  if (fatal) {
    std::fprintf(stderr, "[accl-pmpi rank %d] fatal: %s\n", state().world_rank, message);
    std::fflush(stderr);
  }
  PMPI_Comm_call_errhandler(comm, mpi_class);
  return mpi_class;
}

}  // namespace accl::pmpi
