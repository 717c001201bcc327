// Matrix products on the GPU through cuBLAS: one handle per device, bound to the compute stream.
// Row-major like cpu::gemm; compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <cstdint>

namespace linattn::cuda {

// C [M, N] = alpha op(A) op(B) + beta C, row-major, leading dimensions in elements, float32 data
// with float32 accumulation; with tf32, the inputs are rounded to TF32 for the tensor cores
// (CUBLAS_COMPUTE_32F_FAST_TF32, about 10 bits of mantissa).
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, bool tf32);

}  // namespace linattn::cuda
