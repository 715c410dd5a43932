// SPDX-License-Identifier: Apache-2.0
//
// IEEE 754 binary16 <-> binary32 conversion: the emulated compression lanes
// (public ACCL hp_compression: fp32 -> fp16 lane 0, fp16 -> fp32 lane 1) and
// the fp16 arithmetic of the reduce unit. Round to nearest even, NaN payloads
// kept (quieted), subnormals exact: the same results as x86 F16C, which the
// bulk functions use when the CPU has it (runtime dispatch), so results do
// not depend on the machine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace accl::emu::fp16 {

// Bulk conversion (in/out must not overlap).
void to_float(const uint16_t* in, float* out, size_t n);
void from_float(const float* in, uint16_t* out, size_t n);

// Portable implementations (also the fallback of the bulk functions).
float to_float(uint16_t h);
uint16_t from_float(float f);
void to_float_portable(const uint16_t* in, float* out, size_t n);
void from_float_portable(const float* in, uint16_t* out, size_t n);

// True when the bulk functions use F16C instructions.
bool hardware_conversion();

}  // namespace accl::emu::fp16
