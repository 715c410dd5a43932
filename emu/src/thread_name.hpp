// SPDX-License-Identifier: Apache-2.0
//
// Names the emulator's own threads (firmware, transport readers and control
// loops) so that top -H, perf and gdb show which part of the emulated CCLO
// uses a core: an MPI rank runs several of them next to its host thread.
#pragma once

#include <pthread.h>

namespace accl::emu {

// `name`: at most 15 characters (the kernel's limit); longer names are
// rejected by the kernel and the thread keeps its old name.
inline void name_this_thread(const char* name) { ::pthread_setname_np(::pthread_self(), name); }

}  // namespace accl::emu
