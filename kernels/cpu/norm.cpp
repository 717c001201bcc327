#include "kernels/cpu/norm.h"

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <vector>

namespace linattn::cpu {

template <class T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int64_t N, int64_t D, T eps) {
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    const T* xi = x + i * D;
    T* yi = y + i * D;
    T ss = 0;
    for (int64_t j = 0; j < D; ++j) ss += xi[j] * xi[j];
    T r = T(1) / std::sqrt(ss / T(D) + eps);
    rstd[i] = r;
    for (int64_t j = 0; j < D; ++j) yi[j] = xi[j] * r * w[j];
  }
}

template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* x, const T* w, const T* rstd, const T* dy, int64_t N, int64_t D) {
  // forward: xhat = x r, y = xhat w, r = (mean(x^2) + eps)^-1/2
  //   =>  dw += sum_rows dy xhat,  dx += r (dy w - xhat mean(dy w xhat))
  const bool parallel = N * D > (1 << 15);
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<T> dw_partial(dw ? std::size_t(threads) * D : 0, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* my_dw = dw ? dw_partial.data() + std::size_t(omp_get_thread_num()) * D : nullptr;
#pragma omp for
    for (int64_t i = 0; i < N; ++i) {
      const T* xi = x + i * D;
      const T* dyi = dy + i * D;
      T r = rstd[i];
      T dot = 0;
      for (int64_t j = 0; j < D; ++j) dot += dyi[j] * w[j] * xi[j] * r;
      T mean = dot / T(D);
      T* dxi = dx + i * D;
      for (int64_t j = 0; j < D; ++j) {
        T xhat = xi[j] * r;
        dxi[j] += r * (dyi[j] * w[j] - xhat * mean);
        if (my_dw) my_dw[j] += dyi[j] * xhat;
      }
    }
  }
  if (dw)
    for (int t = 0; t < threads; ++t)
      for (int64_t j = 0; j < D; ++j) dw[j] += dw_partial[std::size_t(t) * D + j];
}

template <class T>
void l2norm_forward(T* y, T* r, const T* x, int64_t N, int64_t D, T eps) {
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    const T* xi = x + i * D;
    T ss = 0;
    for (int64_t j = 0; j < D; ++j) ss += xi[j] * xi[j];
    T ri = T(1) / std::sqrt(ss + eps);
    r[i] = ri;
    for (int64_t j = 0; j < D; ++j) y[i * D + j] = xi[j] * ri;
  }
}

template <class T>
void l2norm_backward(T* dx, const T* y, const T* r, const T* dy, int64_t N, int64_t D) {
  // forward: y = x r, r = (x.x + eps)^-1/2, dr/dx = -r^3 x  =>  dx += r (dy - y (y . dy))
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    const T* yi = y + i * D;
    const T* dyi = dy + i * D;
    T dot = 0;
    for (int64_t j = 0; j < D; ++j) dot += yi[j] * dyi[j];
    for (int64_t j = 0; j < D; ++j) dx[i * D + j] += r[i] * (dyi[j] - yi[j] * dot);
  }
}

#define INSTANTIATE(T)                                                                                      \
  template void rmsnorm_forward<T>(T*, T*, const T*, const T*, int64_t, int64_t, T);                        \
  template void rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);      \
  template void l2norm_forward<T>(T*, T*, const T*, int64_t, int64_t, T);                                   \
  template void l2norm_backward<T>(T*, const T*, const T*, const T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

}  // namespace linattn::cpu
