#include "kernels/cuda/rope.h"

#include "kernels/cuda/common.cuh"
#include "kernels/sequences.h"

namespace linattn::cuda {

namespace {

// One thread per pair (row, i), row = (b, t, h), i < d/2: y = R(sign a) x (or y += it), the angle
// that of t's position within its sequence, plus pos_offset when the sequence starts its row (as
// the CPU kernel). The thread reads both entries of its pair before writing them, so y == x is safe.
template <bool Accumulate>
__global__ void rope_kernel(float* y, const float* x, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                            double theta, float sign, int64_t pairs, Sequences seqs) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= pairs) return;
  const int64_t half = d / 2;
  const int64_t row = k / half, i = k - row * half;
  const int64_t p = row / H;  // the flat position b * T + t
  const int64_t start = sequence(seqs, sequence_of(seqs, p, T_), T_).start;
  const int64_t t = p - start + (start % T_ == 0 ? pos_offset : 0);
  const double angle = double(t) * pow(theta, -2.0 * double(i) / double(d));
  double sin_a, cos_a;
  sincos(angle, &sin_a, &cos_a);
  const float c = float(cos_a), s = sign * float(sin_a);
  const float* xr = x + row * d;
  float* yr = y + row * d;
  const float x1 = xr[i], x2 = xr[i + half];
  const float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
  if constexpr (Accumulate) {
    yr[i] += y1;
    yr[i + half] += y2;
  } else {
    yr[i] = y1;
    yr[i + half] = y2;
  }
}

template <bool Accumulate>
void rotate(float* y, const float* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset, double theta,
            float sign, Sequences seqs) {
  LINATTN_CHECK(d % 2 == 0, "rope: head dim ", d, " is odd; rotary embedding needs an even head dim");
  const int64_t pairs = B * T_ * H * (d / 2);
  if (pairs == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan(Accumulate ? "rope_kernel<true>" : "rope_kernel<false>", pairs), stream(),
                      rope_kernel<Accumulate>)(
      y, x, T_, H, d, pos_offset, theta, sign, pairs, seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_forward(float* y, const float* x, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                  double theta, Sequences seqs) {
  rotate<false>(y, x, B, T_, H, d, pos_offset, theta, 1.0f, seqs);
}

void rope_backward(float* dx, const float* dy, int64_t B, int64_t T_, int64_t H, int64_t d, int64_t pos_offset,
                   double theta, Sequences seqs) {
  // forward: y = R(a) x  =>  dx += R(a)^T dy = R(-a) dy
  rotate<true>(dx, dy, B, T_, H, d, pos_offset, theta, -1.0f, seqs);
}

}  // namespace linattn::cuda
