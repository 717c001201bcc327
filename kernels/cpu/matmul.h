// Dense matrix products on the CPU, row-major.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace linattn::cpu {

// C = alpha * op(A) op(B) + beta * C, all row-major.
// op(A) is [M, K]: A is stored [M, K] (lda >= K), or [K, M] when trans_a (lda >= M).
// op(B) is [K, N]: B is stored [K, N] (ldb >= N), or [N, K] when trans_b (ldb >= K).
// C is [M, N] (ldc >= N). With beta == 0, C is overwritten and its old contents are ignored.
// float runs on oneDNN (multithreaded outside an OpenMP parallel region, single-threaded inside
// one, which is what the chunkwise kernels want); double is a plain loop used by the float64 checks.
template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// The same product with A and B rounded to bfloat16 (to nearest, ties to even) and float32
// accumulation into the float32 C: oneDNN's matmul primitive on AVX512-BF16 or AMX, one primitive
// per shape, created on first use and kept. Needs bf16_products_unavailable().empty().
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// "" when this CPU multiplies bfloat16 in hardware (oneDNN's effective ISA has AVX512-BF16 or AMX),
// else why not, naming the ISA oneDNN found.
std::string bf16_products_unavailable();

// The bfloat16 nearest to x (ties to even) as its 16 bits: float32's top half, rounded. A NaN stays
// a (quiet) NaN; a float beyond bf16's largest finite value rounds to infinity, as in IEEE.
inline uint16_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The float32 with those bfloat16 bits (exact: bf16 is float32 with the low 16 mantissa bits zero).
inline float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace linattn::cpu
