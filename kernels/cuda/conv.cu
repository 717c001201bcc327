#include "kernels/cuda/conv.h"

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/sequences.h"

namespace linattn::cuda {

namespace {

// One thread per output (b, t, c), c fastest; the taps in the CPU kernel's order, none before the
// first position of t's sequence.
__global__ void short_conv_forward_kernel(float* y, const float* x, const float* w, const float* bias, int64_t T_,
                                          int64_t C, int64_t W, int64_t n, Sequences seqs) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const int64_t c = k % C, t = k / C;  // t: the flat position b * T + t
  const int64_t first = sequence(seqs, sequence_of(seqs, t, T_), T_).start;
  float acc = bias ? bias[c] : 0.0f;
  for (int64_t i = 0; i < W; ++i) {
    const int64_t s = t - (W - 1) + i;
    if (s >= first) acc += w[c * W + i] * x[s * C + c];
  }
  y[k] = acc;
}

// forward: y[t] += w[i] x[t - (W-1) + i]  =>  dx[s] += sum_i w[i] dy[s + (W-1) - i]
__global__ void short_conv_dx_kernel(float* dx, const float* w, const float* dy, int64_t T_, int64_t C, int64_t W,
                                     int64_t n, Sequences seqs) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n) return;
  const int64_t c = k % C, s = k / C;  // s: the flat position
  const Span seq = sequence(seqs, sequence_of(seqs, s, T_), T_);
  float acc = 0;
  for (int64_t i = 0; i < W; ++i) {
    const int64_t t = s + (W - 1) - i;  // the output that read x[s] through tap i
    if (t < seq.start + seq.len) acc += w[c * W + i] * dy[t * C + c];
  }
  dx[k] += acc;
}

// dw[c, i] += sum_{b, t} dy[b, t, c] x[b, t - (W-1) + i, c], dbias[c] += sum_{b, t} dy[b, t, c].
// A block takes 32 channels of one chunk of the B*T positions, its kLanes row lanes split the
// positions, and lane 0 adds the lanes in order into the chunk's partial sums (column_partials,
// column_sums.cuh: C*W tap columns, then C bias columns), which the last block adds into dw and dbias.
constexpr int kLanes = kColumnLanes;
__global__ void short_conv_dw_kernel(float* dw, float* dbias, const float* x, const float* dy, int64_t B, int64_t T_,
                                     int64_t C, int64_t W, int64_t rows_per_chunk, Sequences seqs) {
  __shared__ float partial[kLanes][kMaxConvWidth + 1][32];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < B * T_ ? begin + rows_per_chunk : B * T_;
  float acc[kMaxConvWidth + 1] = {};  // taps, then the bias
  if (c < C)
    for (int64_t r = begin + threadIdx.y; r < end; r += kLanes) {
      const int64_t first = sequence(seqs, sequence_of(seqs, r, T_), T_).start;  // no tap reads before it
      const float g = dy[r * C + c];
      acc[kMaxConvWidth] += g;
#pragma unroll
      for (int i = 0; i < kMaxConvWidth; ++i) {
        const int64_t s = r - (W - 1) + i;
        if (i < W && s >= first) acc[i] += g * x[s * C + c];
      }
    }
#pragma unroll
  for (int i = 0; i <= kMaxConvWidth; ++i) partial[threadIdx.y][i][threadIdx.x] = acc[i];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float* out = column_partials + int64_t(blockIdx.y) * C * (W + 1);
    for (int i = 0; i <= W; ++i) {
      const int slot = i < W ? i : kMaxConvWidth;  // the bias after the taps
      float sum = 0;
      for (int l = 0; l < kLanes; ++l) sum += partial[l][slot][threadIdx.x];
      out[i < W ? c * W + i : C * W + c] = sum;
    }
  }
  finish_column_sums(dw, C * W, dbias, C, gridDim.y, gridDim.x * gridDim.y);
}

void check_width(int64_t W, const char* where) {
  LINATTN_CHECK(W >= 1 && W <= kMaxConvWidth, where, ": convolution width ", W, " is outside [1, ", kMaxConvWidth,
                "] (set model.conv_size within it)");
}

}  // namespace

void short_conv_forward(float* y, const float* x, const float* w, const float* bias, int64_t B, int64_t T_, int64_t C,
                        int64_t W, Sequences seqs) {
  check_width(W, "cuda::short_conv_forward");
  const int64_t n = B * T_ * C;
  if (n == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan("short_conv_forward_kernel", n), stream(), short_conv_forward_kernel)(
      y, x, w, bias, T_, C, W, n, seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void short_conv_backward(float* dx, float* dw, float* dbias, const float* x, const float* w, const float* dy,
                         int64_t B, int64_t T_, int64_t C, int64_t W, Sequences seqs) {
  check_width(W, "cuda::short_conv_backward");
  const int64_t n = B * T_ * C;
  if (n == 0) return;
  const LaunchPlans plans = short_conv_backward_plans(B, T_, C, W);
  LINATTN_LAUNCH_PLAN(plans[0], stream(), short_conv_dx_kernel)(dx, w, dy, T_, C, W, n, seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
  const RowChunks chunks = row_chunks(B * T_, (C + 31) / 32, C * (W + 1));
  LINATTN_LAUNCH_PLAN(plans[1], stream(), short_conv_dw_kernel)(dw, dbias, x, dy, B, T_, C, W, chunks.rows, seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
