// Matrix products on the GPU through cuBLAS: one handle per device, bound to the compute stream.
// Row-major like cpu::gemm; compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cuda {

// C [M, N] = alpha op(A) op(B) + beta C, row-major, leading dimensions in elements, float32 data
// with float32 accumulation. The precision is that of the inputs: f32; tf32, rounded to TF32 for the
// tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32, about 10 bits of mantissa); or bf16, A and B rounded
// to bfloat16 in scratch memory (8 bits of mantissa) and multiplied on the tensor cores.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, MatmulPrecision precision);

}  // namespace linattn::cuda
