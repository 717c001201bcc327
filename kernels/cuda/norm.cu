#include "kernels/cuda/norm.h"

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

// One warp per row, kRows rows per block: rows are short (a hidden size or a head dim), and a warp
// reduction needs no shared memory and no block barrier.
constexpr int kRows = kNormRows;

// The row of the calling warp (>= N past the end: the whole warp returns, so shuffles stay full).
__device__ inline int64_t warp_row() { return int64_t(blockIdx.x) * kRows + threadIdx.x / 32; }

// The rmsnorm kernels take a row's G groups of Dg = D / G values as rows of their own: group row
// r = i G + g starts at x + r Dg and takes its weights from w + g Dg (G = 1: the plain row norm).
__global__ void rmsnorm_forward_kernel(float* y, uint16_t* y16, uint16_t* x16, float* rstd, const float* x,
                                       const float* w, int64_t rows, int64_t Dg, int64_t G, float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * Dg;
  const float* wr = w + (row % G) * Dg;
  float ss = 0;
  for (int64_t j = lane; j < Dg; j += 32) ss += xr[j] * xr[j];
  const float r = 1.0f / sqrtf(warp_sum(ss) / float(Dg) + eps);
  if (lane == 0) rstd[row] = r;
  float* yr = y + row * Dg;
  for (int64_t j = lane; j < Dg; j += 32) {
    const float yj = xr[j] * r * wr[j];
    yr[j] = yj;
    if (y16) y16[row * Dg + j] = bf16_bits_from_float(yj);
    if (x16) x16[row * Dg + j] = bf16_bits_from_float(xr[j]);
  }
}

// The backward in one launch of 32 x kLanes threads per block (rmsnorm_backward_plans): the first
// `dw_blocks` blocks sum dw's columns, the others take dx, a row per warp.
constexpr int kLanes = kColumnLanes;

// forward: xhat = x r, y = xhat w, r = (mean(x^2) + eps)^-1/2  =>  dx += r (dy w - xhat mean(dy w xhat))
__device__ void rmsnorm_dx_row(float* dx, Floats x, const float* w, const float* rstd, const float* dy, int64_t row,
                               int64_t Dg, int64_t G) {
  const int lane = threadIdx.x;
  const Floats xr = x + row * Dg;
  const float* dyr = dy + row * Dg;
  const float* wr = w + (row % G) * Dg;
  const float r = rstd[row];
  float dot = 0;
  for (int64_t j = lane; j < Dg; j += 32) dot += dyr[j] * wr[j] * xr[j] * r;
  const float mean = warp_sum(dot) / float(Dg);
  float* dxr = dx + row * Dg;
  for (int64_t j = lane; j < Dg; j += 32) dxr[j] += r * (dyr[j] * wr[j] - xr[j] * r * mean);
}

// forward: y = xhat w  =>  dw += sum over rows of dy xhat. A dw block takes 32 columns of one chunk
// of rows, its kLanes row lanes split the rows, and lane 0 adds the lanes in order into the chunk's
// partial sums, which the last dw block adds into dw (column_sums.cuh). Rows are whole rows of D
// here; column j is in group j / Dg, whose rstd is rstd[i G + j / Dg].
__global__ void rmsnorm_backward_kernel(float* dx, float* dw, Floats x, const float* w, const float* rstd,
                                        const float* dy, int64_t N, int64_t D, int64_t G, int64_t rows_per_chunk,
                                        int64_t dw_tiles, int64_t dw_blocks) {
  __shared__ float partial[kLanes][33];
  if (int64_t(blockIdx.x) >= dw_blocks) {
    const int64_t row = (int64_t(blockIdx.x) - dw_blocks) * kLanes + threadIdx.y;
    if (row < N * G) rmsnorm_dx_row(dx, x, w, rstd, dy, row, D / G, G);  // a whole warp or none
    return;
  }
  const int64_t tile = int64_t(blockIdx.x) % dw_tiles, chunk = int64_t(blockIdx.x) / dw_tiles;
  const int64_t j = tile * 32 + threadIdx.x;
  const int64_t begin = chunk * rows_per_chunk, end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  const int64_t g = j < D ? j / (D / G) : 0;
  float acc = 0;
  if (j < D)
    for (int64_t i = begin + threadIdx.y; i < end; i += kLanes)
      acc += dy[i * D + j] * (x[i * D + j] * rstd[i * G + g]);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    float sum = 0;
    for (int k = 0; k < kLanes; ++k) sum += partial[k][threadIdx.x];
    column_partials[chunk * D + j] = sum;
  }
  finish_column_sums(dw, D, nullptr, 0, dw_blocks / dw_tiles, unsigned(dw_blocks));
}

__global__ void l2norm_forward_kernel(float* y, float* r, const float* x, int64_t N, int64_t D, float eps) {
  const int64_t row = warp_row();
  if (row >= N) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * D;
  float ss = 0;
  for (int64_t j = lane; j < D; j += 32) ss += xr[j] * xr[j];
  const float ri = 1.0f / sqrtf(warp_sum(ss) + eps);
  if (lane == 0) r[row] = ri;
  float* yr = y + row * D;
  for (int64_t j = lane; j < D; j += 32) yr[j] = xr[j] * ri;
}

// forward: y = x r, r = (x.x + eps)^-1/2, dr/dx = -r^3 x  =>  dx += r (dy - y (y . dy))
__global__ void l2norm_backward_kernel(float* dx, Floats y, const float* r, const float* dy, int64_t N,
                                       int64_t D) {
  const int64_t row = warp_row();
  if (row >= N) return;
  const int lane = threadIdx.x % 32;
  const Floats yr = y + row * D;
  const float* dyr = dy + row * D;
  float dot = 0;
  for (int64_t j = lane; j < D; j += 32) dot += yr[j] * dyr[j];
  dot = warp_sum(dot);
  const float ri = r[row];
  float* dxr = dx + row * D;
  for (int64_t j = lane; j < D; j += 32) dxr[j] += ri * (dyr[j] - yr[j] * dot);
}

}  // namespace

void rmsnorm_forward(float* y, uint16_t* y16, uint16_t* x16, float* rstd, const float* x, const float* w, int64_t N,
                     int64_t D, float eps, int64_t G) {
  if (N == 0) return;
  const LaunchPlans plans = rmsnorm_forward_plans(N, D, G);
  LINATTN_LAUNCH_PLAN(plans[0], stream(), rmsnorm_forward_kernel)(y, y16, x16, rstd, x, w, N * G, D / G, G, eps);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(float* dx, float* dw, Floats x, const float* w, const float* rstd, const float* dy,
                      int64_t N, int64_t D, int64_t G) {
  if (N == 0 || D == 0) return;
  const RowChunks chunks = row_chunks(N, (D + 31) / 32, D);
  const int64_t tiles = (D + 31) / 32, dw_blocks = dw ? tiles * chunks.count : 0;
  LINATTN_LAUNCH_PLAN(rmsnorm_backward_plans(N, D, dw != nullptr, G)[0], stream(), rmsnorm_backward_kernel)(
      dx, dw, x, w, rstd, dy, N, D, G, chunks.rows, tiles, dw_blocks);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void l2norm_forward(float* y, float* r, const float* x, int64_t N, int64_t D, float eps) {
  if (N == 0) return;
  LINATTN_LAUNCH_PLAN(l2norm_forward_plans(N, D)[0], stream(), l2norm_forward_kernel)(y, r, x, N, D, eps);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void l2norm_backward(float* dx, Floats y, const float* r, const float* dy, int64_t N, int64_t D) {
  if (N == 0) return;
  LINATTN_LAUNCH_PLAN(l2norm_backward_plans(N, D)[0], stream(), l2norm_backward_kernel)(dx, y, r, dy, N, D);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
