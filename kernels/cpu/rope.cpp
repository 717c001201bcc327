#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "kernels/sequences.h"

namespace linattn::cpu {

namespace {

// y = R(sign * a) x (or y += R(sign * a) x) for every row; the angle of a row is that of its
// position within its sequence, plus pos_offset when the sequence starts its row (the first of the
// row continues the tokens already decoded; the later ones start at 0). The cosines and sines are
// taken once per position a row can have, not once per row: positions 0 .. T - 1, and pos_offset ..
// pos_offset + T - 1 where there is an offset. Small tensors (decoding, tests) stay on one thread:
// starting a parallel region costs more than rotating them.
template <class T, bool Accumulate>
void rotate(T* y, const T* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset, double theta,
            T sign, Sequences seqs) {
  const int64_t half = d / 2, positions = (pos_offset ? 2 : 1) * T_;
  std::vector<double> inv_freq(half);  // theta^(-2i/d)
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(theta, -2.0 * double(i) / double(d));
  std::vector<T> cos_a(positions * half), sin_a(positions * half);  // in float64, then rounded
#pragma omp parallel if (B * T_ * H * d > (1 << 15))
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < positions; ++r) {
      const int64_t t = r < T_ ? r : pos_offset + r - T_;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(t) * inv_freq[i];
        cos_a[r * half + i] = T(std::cos(angle));
        sin_a[r * half + i] = T(std::sin(angle));
      }
    }
#pragma omp for schedule(static)
    for (int64_t p = 0; p < B * T_; ++p) {
      const int64_t start = sequence(seqs, sequence_of(seqs, p, T_), T_).start;
      const int64_t r = p - start + (pos_offset && start % T_ == 0 ? T_ : 0);
      const T *cos_r = cos_a.data() + r * half, *sin_r = sin_a.data() + r * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t offset = (p * H + h) * d;
        const T* xr = x + offset;
        T* yr = y + offset;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const T c = cos_r[i], s = sign * sin_r[i];
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
void rope_forward(T* y, const T* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset, double theta,
                  Sequences seqs) {
  rotate<T, false>(y, x, B, T_, H, d, pos_offset, theta, T(1), seqs);
}

template <class T>
void rope_backward(T* dx, const T* dy, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                   double theta, Sequences seqs) {
  // forward: y = R(a) x  =>  dx += R(a)^T dy = R(-a) dy
  rotate<T, true>(dx, dy, B, T_, H, d, pos_offset, theta, T(-1), seqs);
}

template void rope_forward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, double, Sequences);
template void rope_forward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t, double, Sequences);
template void rope_backward<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, double, Sequences);
template void rope_backward<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, int64_t, double, Sequences);

}  // namespace linattn::cpu
