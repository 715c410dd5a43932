// SPDX-License-Identifier: Apache-2.0
//
// The PMPI layer's own settings check, free of MPI so accl-info and the
// settings test run the same code as MPI_Init. The values are checked
// against the settings table (core/src/config_table.cpp); this adds what
// only this layer knows: the MPI call names of ACCL_OFFLOAD_CALLS and of the
// per-call thresholds ACCL_<CALL>_MIN_BYTES / _MAX_BYTES, and settings that
// do not fit an MPI job (ACCL_EMU_TRANSPORT=inproc with several ranks, which
// the device factory judges: devices::check_job).
#pragma once

#include <string>
#include <vector>

namespace accl::pmpi::settings {

// The <CALL> words of the per-call thresholds, upper case (ALLREDUCE, ...),
// in calls.def order.
std::vector<std::string> call_words();

// Which calls, in calls.def order, ACCL_OFFLOAD_CALLS=`text` enables (empty:
// all). Throws config::SettingError for a name that is no call or group, or
// a list that names none.
std::vector<bool> offload_calls(const std::string& text);

// Checks the pmpi rows of the settings table and the rules above for a job
// of `world_size` ranks; throws config::SettingError for the first bad one.
void validate(int world_size);

// One line per ACCL_ variable no layer knows (a typo), naming the closest
// known setting.
std::vector<std::string> unknown_setting_warnings();

}  // namespace accl::pmpi::settings
