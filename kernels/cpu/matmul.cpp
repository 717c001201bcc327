#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"

namespace linattn::cpu {

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                    beta, C, ldc);
  LINATTN_CHECK(status == dnnl_success, "dnnl_sgemm failed (status ", int(status), ") for M=", M, " N=", N,
                " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  const bool parallel = !omp_in_parallel() && M * N * K > (1 << 18);
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    double* c = C + i * ldc;
    if (beta == 0.0) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
    } else if (beta != 1.0) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    for (int64_t k = 0; k < K; ++k) {
      double a = alpha * (trans_a ? A[k * lda + i] : A[i * lda + k]);
      if (trans_b) {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      } else {
        const double* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  }
}

}  // namespace linattn::cpu
