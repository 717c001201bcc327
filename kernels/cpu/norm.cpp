#include "kernels/cpu/norm.h"

#include <omp.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/stored.h"

namespace linattn::cpu {

// A row's G groups of Dg = D / G values are rows of their own here: group row r = i G + g starts at
// x + r Dg and takes its weights from w + g Dg, so G = 1 is the plain row norm.
template <class T>
void rmsnorm_forward(T* y, bfloat16* y16, bfloat16* x16, T* rstd, const T* x, const T* w, int64_t N, int64_t D,
                     T eps, int64_t G) {
  const int64_t Dg = D / G;
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t r = 0; r < N * G; ++r) {
    const T* xi = x + r * Dg;
    const T* wi = w + (r % G) * Dg;
    T* yi = y + r * Dg;
    T ss = 0;
    for (int64_t j = 0; j < Dg; ++j) ss += xi[j] * xi[j];
    T rs = T(1) / std::sqrt(ss / T(Dg) + eps);
    rstd[r] = rs;
    for (int64_t j = 0; j < Dg; ++j) yi[j] = xi[j] * rs * wi[j];
    if (y16)
      for (int64_t j = 0; j < Dg; ++j) y16[r * Dg + j] = from_float(float(yi[j]));
    if (x16)
      for (int64_t j = 0; j < Dg; ++j) x16[r * Dg + j] = from_float(float(xi[j]));
  }
}

template <class T, class X>
void rmsnorm_backward(T* dx, T* dw, const X* x, const T* w, const T* rstd, const T* dy, int64_t N, int64_t D,
                      int64_t G) {
  // forward, per group row: xhat = x r, y = xhat w, r = (mean(x^2) + eps)^-1/2 (the mean over the group)
  //   =>  dw += sum_rows dy xhat,  dx += r (dy w - xhat mean(dy w xhat))
  const int64_t Dg = D / G;
  const bool parallel = N * D > (1 << 15);
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<T> dw_partial(dw ? std::size_t(threads) * D : 0, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* my_dw = dw ? dw_partial.data() + std::size_t(omp_get_thread_num()) * D : nullptr;
#pragma omp for
    for (int64_t r = 0; r < N * G; ++r) {
      const X* xi = x + r * Dg;
      const T* dyi = dy + r * Dg;
      const T* wi = w + (r % G) * Dg;
      T rs = rstd[r];
      T dot = 0;
      for (int64_t j = 0; j < Dg; ++j) dot += dyi[j] * wi[j] * load(xi[j]) * rs;
      T mean = dot / T(Dg);
      T* dxi = dx + r * Dg;
      T* dwi = my_dw ? my_dw + (r % G) * Dg : nullptr;
      for (int64_t j = 0; j < Dg; ++j) {
        const T xhat = load(xi[j]) * rs;
        dxi[j] += rs * (dyi[j] * wi[j] - xhat * mean);
        if (dwi) dwi[j] += dyi[j] * xhat;
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

template <class T, class Y>
void l2norm_backward(T* dx, const Y* y, const T* r, const T* dy, int64_t N, int64_t D) {
  // forward: y = x r, r = (x.x + eps)^-1/2, dr/dx = -r^3 x  =>  dx += r (dy - y (y . dy))
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    const Y* yi = y + i * D;
    const T* dyi = dy + i * D;
    T dot = 0;
    for (int64_t j = 0; j < D; ++j) dot += load(yi[j]) * dyi[j];
    for (int64_t j = 0; j < D; ++j) dx[i * D + j] += r[i] * (dyi[j] - load(yi[j]) * dot);
  }
}

#define INSTANTIATE(T)                                                                                      \
  template void rmsnorm_forward<T>(T*, bfloat16*, bfloat16*, T*, const T*, const T*, int64_t, int64_t, T, int64_t); \
  template void rmsnorm_backward<T, T>(T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t, int64_t); \
  template void l2norm_forward<T>(T*, T*, const T*, int64_t, int64_t, T);                                   \
  template void l2norm_backward<T, T>(T*, const T*, const T*, const T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

// float32 backwards reading a bf16 copy (stored.h)
template void rmsnorm_backward<float, bfloat16>(float*, float*, const bfloat16*, const float*, const float*,
                                                const float*, int64_t, int64_t, int64_t);
template void l2norm_backward<float, bfloat16>(float*, const bfloat16*, const float*, const float*, int64_t, int64_t);

}  // namespace linattn::cpu
