// Dense matrix products on the CPU, row-major.
#pragma once

#include <cstdint>

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

}  // namespace linattn::cpu
