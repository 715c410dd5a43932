// SPDX-License-Identifier: Apache-2.0
#include "fp16.hpp"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace accl::emu::fp16 {
namespace {

inline uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Branch-free formulations (after F. Giesen's public-domain half.c) so the
// portable loops still vectorize.
inline float half_to_float(uint16_t h) {
  const uint32_t shifted_exp = 0x7C00u << 13;
  uint32_t o = (static_cast<uint32_t>(h) & 0x7FFFu) << 13;
  uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;  // Inf/NaN
    if (o & 0x007FFFFFu) o |= 0x00400000u;  // NaN: quiet it, as F16C does
  } else if (exp == 0) {
    o += 1u << 23;  // zero/subnormal: renormalize through an exact float subtraction
    o = bits(from_bits(o) - from_bits(113u << 23));
  }
  return from_bits(o | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

inline uint16_t float_to_half(float value) {
  const uint32_t f32_infty = 255u << 23;
  const uint32_t f16_max = (127u + 16u) << 23;
  const uint32_t denorm_magic_bits = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t f = bits(value);
  uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint32_t o;
  if (f >= f16_max) {
    // Inf stays Inf, overflow becomes Inf, NaN keeps its top payload bits (quieted).
    o = f > f32_infty ? (0x7E00u | ((f >> 13) & 0x3FFu)) : 0x7C00u;
  } else if (f < (113u << 23)) {
    // Result is subnormal (or zero): let the FPU round by adding a magic
    // number that aligns the mantissa to the fp16 subnormal grid.
    o = bits(from_bits(f) + from_bits(denorm_magic_bits)) - denorm_magic_bits;
  } else {
    uint32_t mant_odd = (f >> 13) & 1u;  // round to nearest even
    f += ((15u - 127u) << 23) + 0xFFFu;
    f += mant_odd;
    o = f >> 13;
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void to_float_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("avx,f16c"))) void from_float_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// CPUID + XGETBV rather than __builtin_cpu_supports("f16c"), which clang
// before 15 does not know (the fuzz build compiles this file with clang 14).
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned needed = bit_AVX | bit_F16C | bit_OSXSAVE;
  if ((ecx & needed) != needed) return false;
  // AVX instructions fault unless the OS saves the SSE and AVX state (XCR0
  // bits 1 and 2).
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  return (xcr0_low & 0x6u) == 0x6u;
}
#else
bool cpu_has_f16c() { return false; }
#endif

using ToFloatFn = void (*)(const uint16_t*, float*, size_t);
using FromFloatFn = void (*)(const float*, uint16_t*, size_t);

// Chosen once; function-local statics are thread-safe to initialize.
struct Dispatch {
  ToFloatFn to;
  FromFloatFn from;
  bool hw;
};
const Dispatch& dispatch() {
  static const Dispatch d = [] {
#if defined(__x86_64__)
    if (cpu_has_f16c()) return Dispatch{&to_float_f16c, &from_float_f16c, true};
#endif
    return Dispatch{&to_float_portable, &from_float_portable, false};
  }();
  return d;
}

}  // namespace

float to_float(uint16_t h) { return half_to_float(h); }
uint16_t from_float(float f) { return float_to_half(f); }

void to_float_portable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}
void from_float_portable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

void to_float(const uint16_t* in, float* out, size_t n) { dispatch().to(in, out, n); }
void from_float(const float* in, uint16_t* out, size_t n) { dispatch().from(in, out, n); }
bool hardware_conversion() { return dispatch().hw; }

}  // namespace accl::emu::fp16
