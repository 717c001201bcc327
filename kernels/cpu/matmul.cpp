#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

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

double measure_sgemm_gflops(int64_t n, int reps) {
  std::vector<float> a(size_t(n * n), 0.5f), b(size_t(n * n), 0.25f), c(size_t(n * n));
  double best = 1e300;
  for (int r = 0; r <= reps; ++r) {  // the first run warms up
    auto t0 = std::chrono::steady_clock::now();
    gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, s);
  }
  return 2.0 * double(n) * double(n) * double(n) / best * 1e-9;
}

}  // namespace linattn::cpu
