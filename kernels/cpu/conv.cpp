#include "kernels/cpu/conv.h"

#include <omp.h>

#include <cstddef>
#include <vector>

namespace linattn::cpu {

template <class T>
void short_conv_forward(T* y, const T* x, const T* w, const T* bias, int64_t B, int64_t T_, int64_t C, int64_t W) {
#pragma omp parallel for collapse(2) if (B * T_ * C * W > (1 << 16))
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t) {
      T* yt = y + (b * T_ + t) * C;
      for (int64_t c = 0; c < C; ++c) yt[c] = bias ? bias[c] : T(0);
      for (int64_t i = 0; i < W; ++i) {
        int64_t s = t - (W - 1) + i;
        if (s < 0) continue;
        const T* xs = x + (b * T_ + s) * C;
        for (int64_t c = 0; c < C; ++c) yt[c] += w[c * W + i] * xs[c];
      }
    }
}

template <class T>
void short_conv_backward(T* dx, T* dw, T* dbias, const T* x, const T* w, const T* dy, int64_t B, int64_t T_,
                         int64_t C, int64_t W) {
  // forward: y[t] += w[i] x[t - (W-1) + i]  =>  dx[s] += w[i] dy[s + (W-1) - i], dw[i] += dy[t] x[t - (W-1) + i]
  const bool parallel = B * T_ * C * W > (1 << 16);
  const int threads = parallel ? omp_get_max_threads() : 1;
  std::vector<T> partial(std::size_t(threads) * C * (W + 1), T(0));  // per thread: dw [C, W] then dbias [C]
#pragma omp parallel num_threads(threads)
  {
    T* my_dw = partial.data() + std::size_t(omp_get_thread_num()) * C * (W + 1);
    T* my_db = my_dw + C * W;
#pragma omp for collapse(2)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < T_; ++s) {
        T* dxs = dx + (b * T_ + s) * C;
        const T* xs = x + (b * T_ + s) * C;
        const T* dys = dy + (b * T_ + s) * C;
        for (int64_t c = 0; c < C; ++c) my_db[c] += dys[c];
        for (int64_t i = 0; i < W; ++i) {
          int64_t t = s + (W - 1) - i;  // the output that read x[s] through tap i
          if (t >= T_) continue;
          const T* dyt = dy + (b * T_ + t) * C;
          for (int64_t c = 0; c < C; ++c) {
            dxs[c] += w[c * W + i] * dyt[c];
            my_dw[c * W + i] += dyt[c] * xs[c];
          }
        }
      }
  }
  for (int th = 0; th < threads; ++th) {
    const T* p = partial.data() + std::size_t(th) * C * (W + 1);
    for (int64_t j = 0; j < C * W; ++j) dw[j] += p[j];
    if (dbias)
      for (int64_t c = 0; c < C; ++c) dbias[c] += p[C * W + c];
  }
}

template void short_conv_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                        int64_t);
template void short_conv_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t, int64_t);
template void short_conv_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                         int64_t, int64_t, int64_t);
template void short_conv_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                          int64_t, int64_t, int64_t, int64_t);

}  // namespace linattn::cpu
