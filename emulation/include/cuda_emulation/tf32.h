// TF32, the tensor cores' input format for float32 data: float32's sign and 8 exponent bits with 10
// of its 23 mantissa bits. Shared by the emulated WMMA fragments and cuBLAS's TF32 compute type.
#pragma once

#include <bit>
#include <cstdint>

namespace cuda_emu {

// x rounded to the nearest TF32 value, ties away from zero: the conversion CUDA's own TF32 path
// documents (wmma::__float_to_tf32 is PTX's cvt.rna.tf32.f32, "rna" = round to nearest, ties away).
// cuBLAS does not document how CUBLAS_COMPUTE_32F_FAST_TF32 converts, so it uses the same. The
// result is still a float whose low 13 mantissa bits are zero. A value past the largest finite TF32
// rounds to infinity; infinities and NaNs are returned unchanged.
inline float round_to_tf32(float x) {
  constexpr uint32_t kExponentBits = 0x7F800000u;
  constexpr uint32_t kDroppedBits = (1u << 13) - 1;  // the 13 mantissa bits TF32 does not keep
  constexpr uint32_t kHalfUlp = 1u << 12;
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & kExponentBits) == kExponentBits) return x;
  // Adding half a TF32 ulp to the magnitude carries into the kept bits exactly when the dropped
  // part is at least half an ulp (a carry out of the mantissa bumps the exponent, as it should).
  return std::bit_cast<float>((bits + kHalfUlp) & ~kDroppedBits);
}

}  // namespace cuda_emu
