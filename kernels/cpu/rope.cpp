#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace linattn::cpu {

namespace {

// y = R(sign * a) x (or y += R(sign * a) x) for every row. Small tensors (decoding, tests) stay on
// one thread: starting a parallel region costs more than rotating them.
template <class T, bool Accumulate>
void rotate(T* y, const T* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset, double theta,
            T sign) {
  const int64_t half = d / 2;
  std::vector<double> inv_freq(half);  // theta^(-2i/d)
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(theta, -2.0 * double(i) / double(d));
#pragma omp parallel if (B * T_ * H * d > (1 << 15))
  {
    std::vector<T> cos_a(half), sin_a(half);  // of the angles of one position, in float64 then rounded
#pragma omp for schedule(static)
    for (int64_t t = 0; t < T_; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(t + pos_offset) * inv_freq[i];
        cos_a[i] = T(std::cos(angle));
        sin_a[i] = T(std::sin(angle));
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t offset = ((b * T_ + t) * H + h) * d;
          const T* xr = x + offset;
          T* yr = y + offset;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) {
            const T c = cos_a[i], s = sign * sin_a[i];
            const T x1 = xr[i], x2 = xr[i + half];
            const T y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
            if constexpr (Accumulate) {
              yr[i] += y1;
              yr[i + half] += y2;
            } else {
              yr[i] = y1;
              yr[i + half] = y2;
            }
          }
        }
    }
  }
}

}  // namespace

template <class T>
void rope_forward(T* y, const T* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset, double theta) {
  rotate<T, false>(y, x, B, T_, H, d, pos_offset, theta, T(1));
}

template <class T>
void rope_backward(T* dx, const T* dy, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                   double theta) {
  // forward: y = R(a) x  =>  dx += R(a)^T dy = R(-a) dy
  rotate<T, true>(dx, dy, B, T_, H, d, pos_offset, theta, T(-1));
}

template void rope_forward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_forward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, double);
template void rope_backward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t, double);

}  // namespace linattn::cpu
