// The rounding behind the emulation's 16-bit float types (cuda_fp16.h: __half, 5 exponent bits and
// 10 fraction bits; cuda_bf16.h: __nv_bfloat16, 8 and 7), written once for both formats.
//
// Narrowing rounds to nearest, ties to even, as __float2half / __float2bfloat16 and the GPU's
// cvt.rn do: results below the format's smallest normal become its subnormals, results beyond its
// largest finite value become infinities, and every NaN becomes CUDA's canonical NaN 0x7FFF.
// Widening is exact (every value of both formats is a float).
//
// Arithmetic is done in float and rounded once, which gives the correctly rounded result the GPU's
// 16-bit instructions give: float's 24 bits are at least the 2p + 2 (p = 8 or 11) that make the
// double rounding harmless for + - * /.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace cuda_emu {

template <int kExponentBits, int kFractionBits>
struct HalfFloatFormat {
  static_assert(kExponentBits + kFractionBits == 15, "a 16-bit float: sign, exponent, fraction");
  static constexpr int bias = (1 << (kExponentBits - 1)) - 1;
  static constexpr uint16_t infinity = uint16_t(((1u << kExponentBits) - 1) << kFractionBits);
  static constexpr uint16_t canonical_nan = 0x7FFF;

  // `x` rounded to the nearest value of the format, ties to even.
  static uint16_t from_float(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    const uint32_t magnitude = u & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return canonical_nan;
    // x = significand * 2^(float_exponent - 150), significand with its implicit bit (24 bits).
    int float_exponent = int(magnitude >> 23);
    uint32_t significand = magnitude & 0x7FFFFFu;
    if (float_exponent == 0)
      float_exponent = 1;  // a float subnormal: the smallest exponent, no implicit bit
    else
      significand |= 0x800000u;
    // The target's biased exponent; below 1 the target is subnormal and drops that many more bits.
    const int exponent = float_exponent - 127 + bias;
    int dropped = 23 - kFractionBits + (exponent < 1 ? 1 - exponent : 0);
    if (dropped > 31) dropped = 31;  // the significand (< 2^24) rounds to 0 all the same
    uint32_t kept = significand >> dropped;
    const uint32_t rest = significand & ((1u << dropped) - 1), half = 1u << (dropped - 1);
    if (rest > half || (rest == half && (kept & 1u))) ++kept;
    // A normal result's implicit bit (2^kFractionBits in `kept`) adds 1 to the exponent field, and a
    // significand that rounded up to the next power of two carries into it: both by the addition.
    const uint32_t bits = (exponent < 1 ? 0u : uint32_t(exponent - 1) << kFractionBits) + kept;
    return uint16_t(sign | (bits >= infinity ? infinity : bits));
  }

  // `x` rounded to the nearest value of the format, ties to even, in one rounding: first to float
  // rounding to odd (truncate, then set the last bit if anything was dropped), which float's 16 or
  // more spare bits make harmless to the second rounding, as two round-to-nearest steps are not.
  static uint16_t from_double(double x) {
    if (std::isnan(x)) return canonical_nan;
    float f = float(x);
    if (double(f) != x) {
      if (std::fabs(double(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      u |= 1u;
      std::memcpy(&f, &u, 4);
    }
    return from_float(f);
  }

  static float to_float(uint16_t h) {
    if constexpr (kExponentBits == 8) {
      return std::bit_cast<float>(uint32_t(h) << 16);  // bfloat16 is float's top half, in every case
    } else {
      const uint32_t sign = uint32_t(h & 0x8000u) << 16;
      const uint32_t exponent = (h >> kFractionBits) & ((1u << kExponentBits) - 1);
      const uint32_t fraction = h & ((1u << kFractionBits) - 1);
      // 2^(1 - bias - kFractionBits), the spacing of the subnormals: a normal float for __half.
      constexpr float kSubnormalUnit = std::bit_cast<float>(uint32_t(127 + 1 - bias - kFractionBits) << 23);
      if (exponent == 0)  // zero or subnormal: fraction * 2^(1 - bias - kFractionBits), exact in float
        return std::bit_cast<float>(std::bit_cast<uint32_t>(float(fraction) * kSubnormalUnit) | sign);
      if (exponent == (1u << kExponentBits) - 1)  // infinity or NaN, the payload kept
        return std::bit_cast<float>(sign | 0x7F800000u | (fraction << (23 - kFractionBits)));
      return std::bit_cast<float>(sign | ((exponent - bias + 127) << 23) | (fraction << (23 - kFractionBits)));
    }
  }
};

using HalfFormat = HalfFloatFormat<5, 10>;
using BFloat16Format = HalfFloatFormat<8, 7>;

}  // namespace cuda_emu

// CUDA's arithmetic and comparison operators and intrinsics on a 16-bit float type T (the same set
// for __half and __nv_bfloat16), each through float. Comparisons are IEEE's: NaN is unordered, so
// only != holds for it.
#define CUDA_EMU_HALF_FLOAT_OPERATORS(T)                                                     \
  inline T __hadd(T a, T b) { return T(float(a) + float(b)); }                               \
  inline T __hsub(T a, T b) { return T(float(a) - float(b)); }                               \
  inline T __hmul(T a, T b) { return T(float(a) * float(b)); }                               \
  inline T __hdiv(T a, T b) { return T(float(a) / float(b)); }                               \
  inline T __hneg(T a) { return std::bit_cast<T>(uint16_t(std::bit_cast<uint16_t>(a) ^ 0x8000u)); } \
  inline T operator+(T a, T b) { return __hadd(a, b); }                                      \
  inline T operator-(T a, T b) { return __hsub(a, b); }                                      \
  inline T operator*(T a, T b) { return __hmul(a, b); }                                      \
  inline T operator/(T a, T b) { return __hdiv(a, b); }                                      \
  inline T operator+(T a) { return a; }                                                      \
  inline T operator-(T a) { return __hneg(a); }                                              \
  inline T& operator+=(T& a, T b) { return a = a + b; }                                      \
  inline T& operator-=(T& a, T b) { return a = a - b; }                                      \
  inline T& operator*=(T& a, T b) { return a = a * b; }                                      \
  inline T& operator/=(T& a, T b) { return a = a / b; }                                      \
  inline bool operator==(T a, T b) { return float(a) == float(b); }                          \
  inline bool operator!=(T a, T b) { return float(a) != float(b); }                          \
  inline bool operator<(T a, T b) { return float(a) < float(b); }                            \
  inline bool operator<=(T a, T b) { return float(a) <= float(b); }                          \
  inline bool operator>(T a, T b) { return float(a) > float(b); }                            \
  inline bool operator>=(T a, T b) { return float(a) >= float(b); }
