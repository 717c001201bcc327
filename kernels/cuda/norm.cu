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
// With b, the row normalized is s = x + b, written to s (add_rmsnorm_forward), and x16 is s's copy.
__global__ void rmsnorm_forward_kernel(float* s, float* y, uint16_t* y16, uint16_t* x16, float* rstd, const float* x,
                                       const float* b, const float* w, int64_t rows, int64_t Dg, int64_t G,
                                       float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* xr = x + row * Dg;
  const float* br = b ? b + row * Dg : nullptr;
  const float* wr = w + (row % G) * Dg;
  float ss = 0;
  for (int64_t j = lane; j < Dg; j += 32) {
    const float xj = br ? xr[j] + br[j] : xr[j];
    if (br) s[row * Dg + j] = xj;
    ss += xj * xj;
  }
  const float r = 1.0f / sqrtf(warp_sum(ss) / float(Dg) + eps);
  if (lane == 0) rstd[row] = r;
  float* yr = y + row * Dg;
  for (int64_t j = lane; j < Dg; j += 32) {
    const float xj = br ? xr[j] + br[j] : xr[j];  // the same sum again, from the inputs in cache
    const float yj = xj * r * wr[j];
    yr[j] = yj;
    if (y16) y16[row * Dg + j] = bf16_bits_from_float(yj);
    if (x16) x16[row * Dg + j] = bf16_bits_from_float(xj);
  }
}

// The backward in one launch of 32 x kLanes threads per block (rmsnorm_backward_plans): the first
// `dw_blocks` blocks sum dw's columns, the others take dx, a row per warp.
constexpr int kLanes = kColumnLanes;

// The end of a dw block of a norm's backward (32 columns of one chunk of rows): its kLanes row lanes'
// sums acc, added in lane order by lane 0 into the chunk's partial sums, which the launch's last dw
// block adds into dw (column_sums.cuh).
__device__ void finish_dw_block(float* dw, float acc, int64_t chunk, int64_t j, int64_t D, int64_t dw_tiles,
                                int64_t dw_blocks) {
  __shared__ float partial[kLanes][33];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    float sum = 0;
    for (int k = 0; k < kLanes; ++k) sum += partial[k][threadIdx.x];
    column_partials[chunk * D + j] = sum;
  }
  finish_column_sums(dw, D, nullptr, 0, dw_blocks / dw_tiles, unsigned(dw_blocks));
}

// forward: xhat = x r, y = xhat w, r = (mean(x^2) + eps)^-1/2
//   =>  dx = prior + r (dy w - xhat mean(dy w xhat))  (prior: dx itself, null or another gradient);
// dx16: dx's bf16 copy, or null
__device__ void rmsnorm_dx_row(float* dx, uint16_t* dx16, Floats x, const float* w, const float* rstd,
                               const float* dy, const float* prior, int64_t row, int64_t Dg, int64_t G) {
  const int lane = threadIdx.x;
  const Floats xr = x + row * Dg;
  const float* dyr = dy + row * Dg;
  const float* wr = w + (row % G) * Dg;
  const float r = rstd[row];
  float dot = 0;
  for (int64_t j = lane; j < Dg; j += 32) dot += dyr[j] * wr[j] * xr[j] * r;
  const float mean = warp_sum(dot) / float(Dg);
  float* dxr = dx + row * Dg;
  const float* before = prior ? prior + row * Dg : nullptr;  // may be dxr: each element read, then written
  for (int64_t j = lane; j < Dg; j += 32) {
    const float d = (before ? before[j] : 0.0f) + r * (dyr[j] * wr[j] - xr[j] * r * mean);
    dxr[j] = d;
    if (dx16) dx16[row * Dg + j] = bf16_bits_from_float(d);
  }
}

// forward: y = xhat w  =>  dw += sum over rows of dy xhat. A dw block takes 32 columns of one chunk
// of rows, its kLanes row lanes split the rows, and lane 0 adds the lanes in order into the chunk's
// partial sums, which the last dw block adds into dw (column_sums.cuh). Rows are whole rows of D
// here; column j is in group j / Dg, whose rstd is rstd[i G + j / Dg].
__global__ void rmsnorm_backward_kernel(float* dx, uint16_t* dx16, float* dw, Floats x, const float* w,
                                        const float* rstd, const float* dy, const float* prior, int64_t N, int64_t D,
                                        int64_t G, int64_t rows_per_chunk, int64_t dw_tiles, int64_t dw_blocks) {
  if (int64_t(blockIdx.x) >= dw_blocks) {
    const int64_t row = (int64_t(blockIdx.x) - dw_blocks) * kLanes + threadIdx.y;
    if (row < N * G) rmsnorm_dx_row(dx, dx16, x, w, rstd, dy, prior, row, D / G, G);  // a whole warp or none
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
  finish_dw_block(dw, acc, chunk, j, D, dw_tiles, dw_blocks);
}

__device__ inline float sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }

// h = silu(gate) * rmsnorm(x) (fla's FusedRMSNormSwishGate), a warp per row; rstd written, or read
// (rstd_given: the backward's recomputation of h); h null: rstd only; x16: x's bf16 copy, or null.
__global__ void rmsnorm_gate_forward_kernel(FloatsOut h, uint16_t* x16, float* rstd, Floats x, Floats gate,
                                            const float* w, int64_t R, int64_t D, float eps, bool rstd_given) {
  const int64_t row = warp_row();
  if (row >= R) return;
  const int lane = threadIdx.x % 32;
  const Floats xr = x + row * D, gr = gate + row * D;
  float r;
  if (rstd_given) {
    r = rstd[row];
  } else {
    float ss = 0;
    for (int64_t j = lane; j < D; j += 32) ss += xr[j] * xr[j];
    r = 1.0f / sqrtf(warp_sum(ss) / float(D) + eps);
    if (lane == 0) rstd[row] = r;
  }
  if (x16)
    for (int64_t j = lane; j < D; j += 32) x16[row * D + j] = bf16_bits_from_float(xr[j]);
  if (!h.data) return;
  for (int64_t j = lane; j < D; j += 32) {
    const float g = gr[j], up = xr[j] * r * w[j];
    h.set(row * D + j, g * sigmoid_of(g) * up);
  }
}

// forward: xhat = x r, u = xhat w, h = silu(g) u  =>  du = dh silu(g), dg += dh u s (1 + g (1 - s)),
// dx += r (du w - xhat mean(du w xhat)) (s = sigmoid(g); with write, dx and dg are written)
__device__ void rmsnorm_gate_dx_row(float* dx, float* dgate, Floats x, Floats gate, const float* w, const float* rstd,
                                    const float* dh, int64_t row, int64_t D, bool write) {
  const int lane = threadIdx.x;
  const Floats xr = x + row * D, gr = gate + row * D;
  const float* dhr = dh + row * D;
  const float r = rstd[row];
  float dot = 0;
  for (int64_t j = lane; j < D; j += 32) {
    const float g = gr[j], du = dhr[j] * (g * sigmoid_of(g));
    dot += du * w[j] * xr[j] * r;
  }
  const float mean = warp_sum(dot) / float(D);
  for (int64_t j = lane; j < D; j += 32) {
    const float g = gr[j], s = sigmoid_of(g), xhat = xr[j] * r, du = dhr[j] * (g * s);
    const float dxj = r * (du * w[j] - xhat * mean), dgj = dhr[j] * (xhat * w[j]) * s * (1.0f + g * (1.0f - s));
    const int64_t i = row * D + j;
    dx[i] = write ? dxj : dx[i] + dxj;
    dgate[i] = write ? dgj : dgate[i] + dgj;
  }
}

// The backward in one launch, as rmsnorm's: dw blocks (32 columns of a chunk of rows: dw += sum of
// du xhat), then dx blocks (a row per warp).
__global__ void rmsnorm_gate_backward_kernel(float* dx, float* dgate, float* dw, Floats x, Floats gate, const float* w,
                                             const float* rstd, const float* dh, int64_t R, int64_t D, bool write,
                                             int64_t rows_per_chunk, int64_t dw_tiles, int64_t dw_blocks) {
  if (int64_t(blockIdx.x) >= dw_blocks) {
    const int64_t row = (int64_t(blockIdx.x) - dw_blocks) * kLanes + threadIdx.y;
    if (row < R) rmsnorm_gate_dx_row(dx, dgate, x, gate, w, rstd, dh, row, D, write);  // a whole warp or none
    return;
  }
  const int64_t tile = int64_t(blockIdx.x) % dw_tiles, chunk = int64_t(blockIdx.x) / dw_tiles;
  const int64_t j = tile * 32 + threadIdx.x;
  const int64_t begin = chunk * rows_per_chunk, end = begin + rows_per_chunk < R ? begin + rows_per_chunk : R;
  float acc = 0;
  if (j < D)
    for (int64_t i = begin + threadIdx.y; i < end; i += kLanes) {
      const float g = gate[i * D + j];
      acc += dh[i * D + j] * (g * sigmoid_of(g)) * (x[i * D + j] * rstd[i]);
    }
  finish_dw_block(dw, acc, chunk, j, D, dw_tiles, dw_blocks);
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
  LINATTN_LAUNCH_PLAN(plans[0], stream(), rmsnorm_forward_kernel)(nullptr, y, y16, x16, rstd, x, nullptr, w, N * G,
                                                                   D / G, G, eps);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void add_rmsnorm_forward(float* s, float* y, uint16_t* y16, uint16_t* s16, float* rstd, const float* a,
                         const float* b, const float* w, int64_t N, int64_t D, float eps) {
  if (N == 0) return;
  const LaunchPlans plans = rmsnorm_forward_plans(N, D);
  LINATTN_LAUNCH_PLAN(plans[0], stream(), rmsnorm_forward_kernel)(s, y, y16, s16, rstd, a, b, w, N, D, 1, eps);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(float* dx, float* dw, Floats x, const float* w, const float* rstd, const float* dy,
                      const float* prior, int64_t N, int64_t D, int64_t G, uint16_t* dx16) {
  if (N == 0 || D == 0) return;
  const RowChunks chunks = row_chunks(N, (D + 31) / 32, D);
  const int64_t tiles = (D + 31) / 32, dw_blocks = dw ? tiles * chunks.count : 0;
  LINATTN_LAUNCH_PLAN(rmsnorm_backward_plans(N, D, dw != nullptr, G)[0], stream(), rmsnorm_backward_kernel)(
      dx, dx16, dw, x, w, rstd, dy, prior, N, D, G, chunks.rows, tiles, dw_blocks);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_gate_forward(FloatsOut h, uint16_t* x16, float* rstd, Floats x, Floats gate, const float* w, int64_t R,
                          int64_t D, float eps, bool rstd_given) {
  if (R == 0) return;
  LINATTN_LAUNCH_PLAN(rmsnorm_gate_forward_plans(R, D)[0], stream(), rmsnorm_gate_forward_kernel)(
      h, x16, rstd, x, gate, w, R, D, eps, rstd_given);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_gate_backward(float* dx, float* dgate, float* dw, Floats x, Floats gate, const float* w,
                           const float* rstd, const float* dh, int64_t R, int64_t D, bool write) {
  if (R == 0 || D == 0) return;
  const RowChunks chunks = row_chunks(R, (D + 31) / 32, D);
  const int64_t tiles = (D + 31) / 32, dw_blocks = dw ? tiles * chunks.count : 0;
  LINATTN_LAUNCH_PLAN(rmsnorm_gate_backward_plans(R, D, dw != nullptr)[0], stream(), rmsnorm_gate_backward_kernel)(
      dx, dgate, dw, x, gate, w, rstd, dh, R, D, write, chunks.rows, tiles, dw_blocks);
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
