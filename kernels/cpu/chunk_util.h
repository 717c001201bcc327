// Helpers shared by the chunkwise token-mixer kernels (linear attention, GLA, DeltaNet).
#pragma once

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/matmul.h"

namespace linattn::cpu {

inline int64_t num_chunks(int64_t T_, int64_t C) { return (T_ + C - 1) / C; }

// Whether to spread the (batch, head) pairs of a chunkwise kernel over the OpenMP threads.
// float: always, even for little work: inside an active parallel region every cpu::gemm<float> runs
// single-threaded, while from a region of one thread oneDNN forks its own threads for each small
// product (a 64^3 product measured ~30x slower that way).
// double (the float64 checks, plain-loop products): only when the work pays for waking the threads.
template <class T>
bool parallel_over_heads(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv) {
  if constexpr (std::is_same_v<T, float>) return true;
  else return B * H > 1 && B * H * T_ * Dk * Dv >= (1 << 16);
}

// Inside an OpenMP parallel region: this thread's contiguous share of the B * H (batch, head) pairs,
// handed to f(b, h_begin, h_end) one batch at a time. The kernels step all heads of a range through
// the chunks together, so a chunk's rows of those heads, adjacent in the [B, T, H, d] layout, are read
// from memory in order rather than one head's rows 256 bytes out of every H * d * 4.
template <class F>
void for_my_heads(int64_t B, int64_t H, F&& f) {
  const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
  const int64_t begin = B * H * me / threads, end = B * H * (me + 1) / threads;
  for (int64_t bh = begin; bh < end;) {
    const int64_t b = bh / H, h_begin = bh % H, h_end = std::min(H, h_begin + (end - bh));
    f(b, h_begin, h_end);
    bh += h_end - h_begin;
  }
}

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

// e^x for x <= 0: every exponential the chunkwise kernels take (decays, elu).

// float: a branch-free polynomial that the compiler vectorizes inside `#pragma omp simd` loops
// (glibc's expf is a scalar call without -ffast-math, ~10x slower in the chunk loops).
// x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, then e^r by the degree-7 Taylor-like
// minimax polynomial of Cephes' expf; about 1 ulp. Results below e^-87 (float's normal range) are 0.
inline float exp_nonpos(float x) {
  // No clamp of x (a select there stops GCC's vectorizer): below -87 the exponent bits are garbage
  // and the mask at the end zeroes them. NaN stays NaN.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;                                          // ln2 split hi + lo: n * hi is exact
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>((int32_t(n) + 127) << 23);
  const int32_t keep = -int32_t(!(x < -87.0f));  // all ones, or zero where e^x underflows
  return std::bit_cast<float>(std::bit_cast<int32_t>(p * two_n) & keep);
}

// double: the float64 instantiations are the ones the gradient checks use, so take the libm value.
inline double exp_nonpos(double x) { return std::exp(x); }

}  // namespace linattn::cpu
