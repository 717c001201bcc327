// linattn's stand-in for the CUDA toolkit's cuda_bf16.h in the emulation build: __nv_bfloat16 (the
// top 16 bits of a float: 8 exponent bits, 7 fraction bits) and __nv_bfloat162 with CUDA's names,
// conversions and operators, written from the documented API. Conversions from float and double
// round to nearest, ties to even; the rounding and the operators are cuda_emulation/half_float.h's.
//
// As in CUDA, the type converts implicitly from float and double and to float, so mixing it with
// float in one expression (`h + 1.0f`) is ambiguous: convert explicitly.
#pragma once

#include <cuda_runtime.h>
#include <cuda_emulation/half_float.h>

#include <bit>
#include <cstdint>

struct __nv_bfloat16 {
  __nv_bfloat16() = default;
  __nv_bfloat16(float x) : bits_(cuda_emu::BFloat16Format::from_float(x)) {}
  __nv_bfloat16(double x) : bits_(cuda_emu::BFloat16Format::from_double(x)) {}
  operator float() const { return cuda_emu::BFloat16Format::to_float(bits_); }

 private:
  uint16_t bits_;
};

struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return std::bit_cast<uint16_t>(h); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return std::bit_cast<__nv_bfloat16>(uint16_t(bits)); }

inline __nv_bfloat16 __float2bfloat16(float x) { return __nv_bfloat16(x); }
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return __nv_bfloat16(x); }
inline __nv_bfloat16 __double2bfloat16(double x) { return __nv_bfloat16(x); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __nv_bfloat162 __floats2bfloat162_rn(float x, float y) { return {__nv_bfloat16(x), __nv_bfloat16(y)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float x) { return {__nv_bfloat16(x), __nv_bfloat16(x)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {float(h.x), float(h.y)}; }

CUDA_EMU_HALF_FLOAT_OPERATORS(__nv_bfloat16)
