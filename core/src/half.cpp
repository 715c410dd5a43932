// SPDX-License-Identifier: Apache-2.0
//
// IEEE 754 binary32 <-> binary16 conversion for float16 buffers. Rounding is
// to nearest, ties to even (what hardware converters and the emulator's
// compression lane do), so host-side reference values match device results.
#include <accl/buffer.hpp>

#include <cstring>

namespace accl {

float half_to_float(float16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1Fu;
  uint32_t mantissa = h.bits & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf / NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // 112 = 127 - 15
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise into a float32 normal number.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mantissa & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xFFu;
  const uint32_t mantissa = bits & 0x7FFFFFu;

  if (exponent == 0xFF) {  // inf / NaN; keep NaNs quiet and non-zero
    const uint16_t nan_bits = mantissa != 0 ? static_cast<uint16_t>(0x200u | (mantissa >> 13)) : 0;
    return {static_cast<uint16_t>(sign | 0x7C00u | nan_bits)};
  }
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 0x1F) return {static_cast<uint16_t>(sign | 0x7C00u)};  // overflow -> inf

  uint32_t significand;  // with the implicit bit, 24 bits
  int shift;             // right shift that lands the half mantissa
  if (half_exponent <= 0) {
    if (half_exponent < -10) return {sign};  // below half the smallest subnormal -> 0
    significand = mantissa | 0x800000u;
    shift = 14 - half_exponent;  // subnormal result
  } else {
    significand = mantissa;
    shift = 13;
  }
  uint32_t result = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;  // may carry into exponent: fine
  if (half_exponent > 0) result += static_cast<uint32_t>(half_exponent) << 10;
  return {static_cast<uint16_t>(sign | result)};
}

}  // namespace accl
