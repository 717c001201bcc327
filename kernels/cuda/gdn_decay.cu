#include "kernels/cuda/gdn_decay.h"

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__device__ inline float sigmoid(float s) { return 1.0f / (1.0f + expf(-s)); }
// softplus(s) = log(1 + e^s), written so that neither branch overflows.
__device__ inline float softplus(float s) { return fmaxf(s, 0.0f) + log1pf(expf(-fabsf(s))); }

__global__ void gdn_decay_forward_kernel(float* a, const float* x, const float* A_log, const float* dt_bias,
                                         int64_t n, int64_t H) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t h = i % H;
  a[i] = -expf(A_log[h]) * softplus(x[i] + dt_bias[h]);
}

// One pass over da: each thread writes its elements' dx and sums their contributions to dA_log and
// ddt_bias. A block takes 32 heads of one chunk of rows, its kLanes row lanes split the rows, and
// lane 0 adds the lanes in order into the chunk's partial sums (column_partials, column_sums.cuh:
// H columns for dA_log, then H for ddt_bias), which the last block adds into the two.
constexpr int kLanes = kColumnLanes;
__global__ void gdn_decay_backward_kernel(float* dx, float* dA_log, float* ddt_bias, const float* x,
                                          const float* A_log, const float* dt_bias, const float* da, int64_t rows,
                                          int64_t H, int64_t rows_per_chunk) {
  __shared__ float partial[2][kLanes][33];
  const int64_t h = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sum_dA = 0, sum_ddt = 0;
  if (h < H) {
    const float e = expf(A_log[h]), bias = dt_bias[h];
    for (int64_t r = begin + threadIdx.y; r < end; r += kLanes) {
      const float s = x[r * H + h] + bias, g = da[r * H + h];
      const float ds = -g * e * sigmoid(s);  // d/ds of -e sp(s) is -e sigmoid(s)
      if (dx) dx[r * H + h] += ds;
      sum_ddt += ds;
      sum_dA += g * (-e * softplus(s));  // d/dA_log of -exp(A_log) sp(s) is the value itself
    }
  }
  partial[0][threadIdx.y][threadIdx.x] = sum_dA;
  partial[1][threadIdx.y][threadIdx.x] = sum_ddt;
  __syncthreads();
  if (threadIdx.y == 0 && h < H) {
    float dA = 0, ddt = 0;
    for (int k = 0; k < kLanes; ++k) {
      dA += partial[0][k][threadIdx.x];
      ddt += partial[1][k][threadIdx.x];
    }
    float* out = column_partials + int64_t(blockIdx.y) * 2 * H;
    out[h] = dA;
    out[H + h] = ddt;
  }
  if (dA_log || ddt_bias) finish_column_sums(dA_log, H, ddt_bias, H, gridDim.y, gridDim.x * gridDim.y);
}

}  // namespace

void gdn_decay_forward(float* a, const float* x, const float* A_log, const float* dt_bias, int64_t rows, int64_t H) {
  if (rows * H == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan("gdn_decay_forward_kernel", rows * H), stream(), gdn_decay_forward_kernel)(
      a, x, A_log, dt_bias, rows * H, H);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void gdn_decay_backward(float* dx, float* dA_log, float* ddt_bias, const float* x, const float* A_log,
                        const float* dt_bias, const float* da, int64_t rows, int64_t H) {
  if (H == 0) return;
  const RowChunks chunks = row_chunks(rows, (H + 31) / 32, 2 * H);
  LINATTN_LAUNCH_PLAN(gdn_decay_backward_plans(rows, H)[0], stream(), gdn_decay_backward_kernel)(
      dx, dA_log, ddt_bias, x, A_log, dt_bias, da, rows, H, chunks.rows);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
