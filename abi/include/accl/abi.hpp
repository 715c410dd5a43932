// SPDX-License-Identifier: Apache-2.0
//
// The CCLO device ABI: everything the host driver, the firmware and the
// emulator must agree on. This header is freestanding (only <stdint.h>) so the
// firmware can include it without a C++ runtime.
//
// Layout follows public ACCL (exchange memory map, 15-word call, 64-byte
// message header). Our extensions live in places public hardware ignores and
// are marked "extension"; docs/architecture.md lists every one of them.
//
// The topics live in accl/abi/: memory_map.hpp, call_words.hpp,
// packet_header.hpp, return_codes.hpp, capabilities.hpp, arith.hpp. The ABI
// is a room of its own (abi/ at the top of the tree) so the firmware can use
// it without knowing the driver.
#pragma once

#include <accl/abi/arith.hpp>
#include <accl/abi/call_words.hpp>
#include <accl/abi/capabilities.hpp>
#include <accl/abi/memory_map.hpp>
#include <accl/abi/packet_header.hpp>
#include <accl/abi/return_codes.hpp>
