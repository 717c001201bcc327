// Helpers shared by the chunkwise token-mixer kernels (linear attention, GLA, DeltaNet).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/exp.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu {

// Zero the strictly upper triangle of the n x n block P (leading dimension ld): the causal mask M.
template <class T>
void mask_upper(T* P, int64_t n, int64_t ld) {
  for (int64_t i = 0; i < n; ++i) std::fill(P + i * ld + i + 1, P + i * ld + n, T(0));
}

// The products with the causal n x n block P = M ⊙ (...) of a chunk. Each runs as two halves of
// rows (h = n / 2) so that the upper-right quarter, all zeros, is never multiplied: 3/4 of the
// dense work.
inline int64_t causal_half(int64_t n) { return n >= 16 ? n / 2 : n; }

// P = M ⊙ (A B^T), A and B [n, K].
template <class T>
void causal_scores(int64_t n, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb, T* P,
                   int64_t ldp) {
  const int64_t h = causal_half(n);
  gemm<T>(false, true, h, h, K, alpha, A, lda, B, ldb, T(0), P, ldp);
  gemm<T>(false, true, n - h, n, K, alpha, A + h * lda, lda, B, ldb, T(0), P + h * ldp, ldp);
  mask_upper(P, n, ldp);  // also zeroes the quarter not computed
}

// Y = alpha P X + beta Y, X [n, N].
template <class T>
void causal_times(int64_t n, int64_t N, T alpha, const T* P, int64_t ldp, const T* X, int64_t ldx, T beta, T* Y,
                  int64_t ldy) {
  const int64_t h = causal_half(n);
  gemm<T>(false, false, h, N, h, alpha, P, ldp, X, ldx, beta, Y, ldy);
  gemm<T>(false, false, n - h, N, n, alpha, P + h * ldp, ldp, X, ldx, beta, Y + h * ldy, ldy);
}

// Y = alpha P^T X + beta Y, X [n, N]: row j < h sums over every row of P, row j >= h over rows >= h.
template <class T>
void causal_transposed_times(int64_t n, int64_t N, T alpha, const T* P, int64_t ldp, const T* X, int64_t ldx,
                             T beta, T* Y, int64_t ldy) {
  const int64_t h = causal_half(n);
  gemm<T>(true, false, h, N, n, alpha, P, ldp, X, ldx, beta, Y, ldy);
  gemm<T>(true, false, n - h, N, n - h, alpha, P + h * ldp + h, ldp, X + h * ldx, ldx, beta, Y + h * ldy, ldy);
}

}  // namespace linattn::cpu
