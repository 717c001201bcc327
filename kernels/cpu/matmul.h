// Dense matrix products on the CPU, row-major.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

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

// The same product on bfloat16 A and B (as stored: no rounding happens here) with float32
// accumulation into the float32 C. Each product of two bf16 values is exact in float32, so the
// result is float32's sum of exact products. Where the CPU multiplies bf16 in hardware
// (bf16_products_unavailable().empty()): oneDNN's matmul primitive on AVX512-BF16 or AMX, one
// primitive per shape, created on first use and kept. Elsewhere gemm_bf16_widened: slower, never refused.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
               int64_t lda, const bfloat16* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The same into a bf16 C (beta = 0): the float32 sums rounded to nearest even as they are written
// (oneDNN's bf16 destination; the fallback rounds gemm_bf16_widened's float32 result).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
               int64_t lda, const bfloat16* B, int64_t ldb, bfloat16* C, int64_t ldc);

// The fallback: A and B widened to float32 (exact) into per-thread scratch, then gemm<float>.
void gemm_bf16_widened(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
                       int64_t lda, const bfloat16* B, int64_t ldb, float beta, float* C, int64_t ldc);

// y [n] = bf16(x [n]) (round to nearest even: core/dtype.h's from_float), and y [n] = float(x [n]) (exact).
void to_bf16(bfloat16* y, const float* x, int64_t n);
void from_bf16(float* y, const bfloat16* x, int64_t n);

// "" when this CPU multiplies bfloat16 in hardware (oneDNN's effective ISA has AVX512-BF16 or AMX),
// else why not, naming the ISA oneDNN found.
std::string bf16_products_unavailable();

}  // namespace linattn::cpu
