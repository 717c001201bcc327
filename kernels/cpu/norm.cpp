#include "kernels/cpu/norm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/cpu/exp.h"
#include "kernels/cpu/stored.h"

namespace linattn::cpu {

namespace {

// A row's G groups of Dg = D / G values are rows of their own here: group row r = i G + g starts at
// x + r Dg and takes its weights from w + g Dg, so G = 1 is the plain row norm. With b, the row
// normalized is s = x + b, written to s (add_rmsnorm_forward).
template <class T>
void norm_rows(T* s, T* y, bfloat16* y16, bfloat16* x16, T* rstd, const T* x, const T* b, const T* w, int64_t N,
               int64_t D, T eps, int64_t G) {
  const int64_t Dg = D / G;
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t r = 0; r < N * G; ++r) {
    const T* xi = x + r * Dg;
    if (b) {
      T* si = s + r * Dg;
      for (int64_t j = 0; j < Dg; ++j) si[j] = xi[j] + b[r * Dg + j];
      xi = si;
    }
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

// Runs row(r, my_dw) for rows r in [0, rows) and adds the rows' contributions to dw [D] (may be null:
// my_dw is then null), deterministically: each OpenMP thread adds its rows into a partial of its
// own, and the partials go into dw in thread order.
template <class T, class Row>
void rows_with_weight_sums(T* dw, int64_t rows, int64_t D, bool parallel, Row&& row) {
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<T> dw_partial(dw ? std::size_t(threads) * D : 0, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* my_dw = dw ? dw_partial.data() + std::size_t(omp_get_thread_num()) * D : nullptr;
#pragma omp for
    for (int64_t r = 0; r < rows; ++r) row(r, my_dw);
  }
  if (dw)
    for (int t = 0; t < threads; ++t)
      for (int64_t j = 0; j < D; ++j) dw[j] += dw_partial[std::size_t(t) * D + j];
}

}  // namespace

template <class T>
void rmsnorm_forward(T* y, bfloat16* y16, bfloat16* x16, T* rstd, const T* x, const T* w, int64_t N, int64_t D,
                     T eps, int64_t G) {
  norm_rows<T>(nullptr, y, y16, x16, rstd, x, nullptr, w, N, D, eps, G);
}

template <class T>
void add_rmsnorm_forward(T* s, T* y, bfloat16* y16, bfloat16* s16, T* rstd, const T* a, const T* b, const T* w,
                         int64_t N, int64_t D, T eps) {
  norm_rows<T>(s, y, y16, s16, rstd, a, b, w, N, D, eps, 1);
}

template <class T, class X>
void rmsnorm_backward(T* dx, bfloat16* dx16, T* dw, const X* x, const T* w, const T* rstd, const T* dy,
                      const T* prior, int64_t N, int64_t D, int64_t G) {
  // forward, per group row: xhat = x r, y = xhat w, r = (mean(x^2) + eps)^-1/2 (the mean over the group)
  //   =>  dw += sum_rows dy xhat,  dx = prior + r (dy w - xhat mean(dy w xhat))
  const int64_t Dg = D / G;
  rows_with_weight_sums(dw, N * G, D, N * D > (1 << 15), [&](int64_t r, T* my_dw) {
    const X* xi = x + r * Dg;
    const T* dyi = dy + r * Dg;
    const T* wi = w + (r % G) * Dg;
    T rs = rstd[r];
    T dot = 0;
    for (int64_t j = 0; j < Dg; ++j) dot += dyi[j] * wi[j] * load(xi[j]) * rs;
    T mean = dot / T(Dg);
    T* dxi = dx + r * Dg;
    // the row's prior first (it is in cache), so the sums below are one loop for every case
    if (prior != dx)
      for (int64_t j = 0; j < Dg; ++j) dxi[j] = prior ? prior[r * Dg + j] : T(0);
    T* dwi = my_dw ? my_dw + (r % G) * Dg : nullptr;
    for (int64_t j = 0; j < Dg; ++j) {
      const T xhat = load(xi[j]) * rs;
      dxi[j] += rs * (dyi[j] * wi[j] - xhat * mean);
      if (dwi) dwi[j] += dyi[j] * xhat;
    }
    if (dx16)
      for (int64_t j = 0; j < Dg; ++j) dx16[r * Dg + j] = from_float(float(dxi[j]));
  });
}

template <class Y, class X, class T>
void rmsnorm_gate_forward(Y* h, bfloat16* x16, T* rstd, const X* x, const X* gate, const T* w, int64_t R, int64_t D,
                          T eps, bool rstd_given) {
#pragma omp parallel for if (R * D > (1 << 15))
  for (int64_t r = 0; r < R; ++r) {
    const X* xi = x + r * D;
    const X* gi = gate + r * D;
    T rs;
    if (rstd_given) {
      rs = rstd[r];
    } else {
      T ss = 0;
      for (int64_t j = 0; j < D; ++j) ss += load(xi[j]) * load(xi[j]);
      rs = T(1) / std::sqrt(ss / T(D) + eps);
      rstd[r] = rs;
    }
    if (x16)
      for (int64_t j = 0; j < D; ++j) x16[r * D + j] = from_float(float(load(xi[j])));
    if (!h) continue;  // rstd only
#pragma omp simd
    for (int64_t j = 0; j < D; ++j) {
      const T g = load(gi[j]), up = load(xi[j]) * rs * w[j];
      store(h[r * D + j], g * sigmoid(g) * up);
    }
  }
}

template <class T, class X>
void rmsnorm_gate_backward(T* dx, T* dgate, T* dw, const X* x, const X* gate, const T* w, const T* rstd, const T* dh,
                           int64_t R, int64_t D, bool write) {
  // forward: xhat = x r, u = xhat w, h = silu(g) u, r = (mean(x^2) + eps)^-1/2
  //   =>  du = dh silu(g), dg += dh u s (1 + g (1 - s)) (s = sigmoid(g)), dw += sum_rows du xhat,
  //       dx += r (du w - xhat mean(du w xhat))
  rows_with_weight_sums(dw, R, D, R * D > (1 << 15), [&](int64_t r, T* my_dw) {
    const X* xi = x + r * D;
    const X* gi = gate + r * D;
    const T* dhi = dh + r * D;
    const T rs = rstd[r];
    T dot = 0;
    for (int64_t j = 0; j < D; ++j) {
      const T g = load(gi[j]), du = dhi[j] * (g * sigmoid(g));
      dot += du * w[j] * load(xi[j]) * rs;
    }
    const T mean = dot / T(D);
    // Column j's dx and dgate added to dxi, dgi (zeroed first when `write`); returns its du xhat. The
    // loops below take no branch, so that GCC vectorizes them.
    T *dxi = dx + r * D, *dgi = dgate + r * D;
    auto add_column = [&](int64_t j) {
      const T g = load(gi[j]), s = sigmoid(g), xhat = load(xi[j]) * rs;
      const T du = dhi[j] * (g * s);
      dxi[j] += rs * (du * w[j] - xhat * mean);
      dgi[j] += dhi[j] * (xhat * w[j]) * s * (T(1) + g * (T(1) - s));
      return du * xhat;
    };
    if (write) std::fill_n(dxi, D, T(0)), std::fill_n(dgi, D, T(0));
    if (my_dw) {
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) my_dw[j] += add_column(j);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < D; ++j) add_column(j);
    }
  });
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
  template void add_rmsnorm_forward<T>(T*, T*, bfloat16*, bfloat16*, T*, const T*, const T*, const T*, int64_t,       \
                                       int64_t, T);                                                          \
  template void rmsnorm_backward<T, T>(T*, bfloat16*, T*, const T*, const T*, const T*, const T*, const T*, int64_t, \
                                       int64_t, int64_t);                                                    \
  template void l2norm_forward<T>(T*, T*, const T*, int64_t, int64_t, T);                                   \
  template void l2norm_backward<T, T>(T*, const T*, const T*, const T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

#define INSTANTIATE_GATE_FORWARD(Y, X, T)                                                                          \
  template void rmsnorm_gate_forward<Y, X, T>(Y*, bfloat16*, T*, const X*, const X*, const T*, int64_t, int64_t, T, \
                                              bool);
INSTANTIATE_GATE_FORWARD(double, double, double)
INSTANTIATE_GATE_FORWARD(float, float, float)
INSTANTIATE_GATE_FORWARD(bfloat16, float, float)
INSTANTIATE_GATE_FORWARD(float, bfloat16, float)
INSTANTIATE_GATE_FORWARD(bfloat16, bfloat16, float)
template void rmsnorm_gate_backward<double, double>(double*, double*, double*, const double*, const double*,
                                                    const double*, const double*, const double*, int64_t, int64_t,
                                                    bool);
template void rmsnorm_gate_backward<float, float>(float*, float*, float*, const float*, const float*, const float*,
                                                  const float*, const float*, int64_t, int64_t, bool);
template void rmsnorm_gate_backward<float, bfloat16>(float*, float*, float*, const bfloat16*, const bfloat16*,
                                                     const float*, const float*, const float*, int64_t, int64_t, bool);

// float32 backwards reading a bf16 copy (stored.h)
template void rmsnorm_backward<float, bfloat16>(float*, bfloat16*, float*, const bfloat16*, const float*, const float*,
                                                const float*, const float*, int64_t, int64_t, int64_t);
template void l2norm_backward<float, bfloat16>(float*, const bfloat16*, const float*, const float*, int64_t, int64_t);

}  // namespace linattn::cpu
