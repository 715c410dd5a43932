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

#include <cstddef>
#include <string>
#include <vector>

namespace accl::pmpi::settings {

// The <CALL> words of the per-call thresholds, upper case (ALLREDUCE, ...),
// in calls.def order.
std::vector<std::string> call_words();

// The calls, in calls.def order, that the list item `name` selects: a call
// (send, allreduce or MPI_Allreduce) or a group (p2p, coll, icoll, all);
// empty when it names none.
std::vector<bool> calls_named(const std::string& name);
// Whether call `call` (calls.def index) is point-to-point; how many calls.
bool is_p2p(size_t call);
size_t call_count();

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
