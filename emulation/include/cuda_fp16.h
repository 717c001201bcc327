// linattn's stand-in for the CUDA toolkit's cuda_fp16.h in the emulation build: __half (IEEE
// binary16: 5 exponent bits, 10 fraction bits) and __half2 with CUDA's names, conversions and
// operators, written from the documented API. Conversions from float and double round to nearest,
// ties to even; the rounding and the operators are cuda_emulation/half_float.h's.
//
// As in CUDA, the type converts implicitly from float and double and to float, so mixing it with
// float in one expression (`h + 1.0f`) is ambiguous: convert explicitly.
#pragma once

#include <cuda_runtime.h>
#include <cuda_emulation/half_float.h>

#include <bit>
#include <cstdint>

struct __half {
  __half() = default;
  __half(float x) : bits_(cuda_emu::HalfFormat::from_float(x)) {}
  __half(double x) : bits_(cuda_emu::HalfFormat::from_double(x)) {}
  operator float() const { return cuda_emu::HalfFormat::to_float(bits_); }

 private:
  uint16_t bits_;
};

struct __half2 {
  __half x, y;
};

inline unsigned short __half_as_ushort(__half h) { return std::bit_cast<uint16_t>(h); }
inline __half __ushort_as_half(unsigned short bits) { return std::bit_cast<__half>(uint16_t(bits)); }

inline __half __float2half(float x) { return __half(x); }
inline __half __float2half_rn(float x) { return __half(x); }
inline __half __double2half(double x) { return __half(x); }
inline float __half2float(__half h) { return float(h); }
inline __half2 __floats2half2_rn(float x, float y) { return {__half(x), __half(y)}; }
inline __half2 __float2half2_rn(float x) { return {__half(x), __half(x)}; }
inline float2 __half22float2(__half2 h) { return {float(h.x), float(h.y)}; }

CUDA_EMU_HALF_FLOAT_OPERATORS(__half)
