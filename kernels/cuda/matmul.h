// Matrix products on the GPU through cuBLAS: one handle per device, bound to the compute stream.
// Row-major like cpu::gemm; compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cuda {

// C [M, N] = alpha op(A) op(B) + beta C, row-major, leading dimensions in elements, float32 data
// with float32 accumulation. precision tf32: the inputs rounded to TF32 for the tensor cores
// (CUBLAS_COMPUTE_32F_FAST_TF32, about 10 bits of mantissa); otherwise float32 (bf16 products take
// bf16 operands: gemm_bf16; nothing is converted here).
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, MatmulPrecision precision);

// The same on bfloat16 A and B (bit patterns, as stored: nothing is rounded here) into the float32
// C, with float32 accumulation on the tensor cores (CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The same into a bf16 C (beta = 0, CUDA_R_16BF result): the float32 sums rounded as they are written.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, uint16_t* C, int64_t ldc);

}  // namespace linattn::cuda
