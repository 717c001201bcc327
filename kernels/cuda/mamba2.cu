#include "kernels/cuda/mamba2.h"

#include "kernels/cuda/chunk_gla.h"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gla.h"

namespace linattn::cuda {

namespace {

__device__ inline float sigmoid(float s) { return 1.0f / (1.0f + expf(-s)); }
// softplus(s) = log(1 + e^s), written so that neither branch overflows.
__device__ inline float softplus(float s) { return fmaxf(s, 0.0f) + log1pf(expf(-fabsf(s))); }

// GLA's per-head inputs, one thread per element of a (row, head)'s N + P values: the log-gates
// g = dt A [rows, H, N] (the same for every key channel), the values v = dt x [rows, H, P], and where
// groups of heads share B and C (q, k not null), each head's copy of its group's C and B [rows, H, N].
__global__ void mamba2_inputs_kernel(float* q, float* k, float* v, float* g, const Mamba2Call c, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t width = c.N + c.P, rh = i / width, j = i % width, h = rh % c.H, r = rh / c.H;
  const float dt = softplus(c.gate[rh]);
  if (j < c.N) {
    g[rh * c.N + j] = -expf(c.A_log[h]) * dt;
    if (q) {
      const int64_t from = (r * c.G + h / (c.H / c.G)) * c.N + j;
      q[rh * c.N + j] = c.Cm[from];
      k[rh * c.N + j] = c.Bm[from];
    }
  } else {
    const int64_t p = rh * c.P + (j - c.N);
    v[p] = dt * c.x[p];
  }
}

// o += D x, per head: o, x [rows, H, P].
__global__ void mamba2_skip_kernel(float* o, Floats x, const float* D, int64_t n, int64_t H, int64_t P) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  o[i] = fmaf(D[(i / P) % H], x[i], o[i]);
}

// From GLA's dv and dg [rows, H, *]: dx, dgate per (row, head), and the column sums of dA_log and
// dD. A block takes 32 heads of one chunk of rows, its kLanes row lanes split the rows; the lanes'
// sums go in order into the chunk's partial sums (H columns for dA_log, then H for dD), which the
// last block adds into the two (finish_column_sums).
constexpr int kLanes = kColumnLanes;
__global__ void mamba2_time_step_backward_kernel(const Mamba2Call c, const float* dv, const float* dg, int64_t rows,
                                                 int64_t rows_per_chunk) {
  __shared__ float partial[2][kLanes][33];
  const int64_t h = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sum_dA_log = 0, sum_dD = 0;
  if (h < c.H) {
    const float A = -expf(c.A_log[h]), D = c.D[h];
    for (int64_t r = begin + threadIdx.y; r < end; r += kLanes) {
      const int64_t rh = r * c.H + h;
      const float s = c.gate[rh], dt = softplus(s);
      float da = 0;
      for (int64_t j = 0; j < c.N; ++j) da += dg[rh * c.N + j];
      float ddt = A * da, dD = 0;  // explicit fmaf below: the same roundings whichever dtype x has
      for (int64_t p = rh * c.P; p < (rh + 1) * c.P; ++p) {
        const float x = c.x[p], dvp = dv[p], dO = c.dO[p];
        ddt = fmaf(x, dvp, ddt);
        dD = fmaf(x, dO, dD);
        const float dx = fmaf(dt, dvp, D * dO);
        if (c.dx) c.dx[p] = c.write ? dx : c.dx[p] + dx;
      }
      const float dgate = ddt * sigmoid(s);
      if (c.dgate) c.dgate[rh] = c.write ? dgate : c.dgate[rh] + dgate;
      sum_dA_log = fmaf(A * dt, da, sum_dA_log);  // d(dt A)/dA_log = dt A
      sum_dD += dD;
    }
  }
  partial[0][threadIdx.y][threadIdx.x] = sum_dA_log;
  partial[1][threadIdx.y][threadIdx.x] = sum_dD;
  __syncthreads();
  if (threadIdx.y == 0 && h < c.H) {
    float dA_log = 0, dD = 0;
    for (int l = 0; l < kLanes; ++l) {
      dA_log += partial[0][l][threadIdx.x];
      dD += partial[1][l][threadIdx.x];
    }
    float* out = column_partials + int64_t(blockIdx.y) * 2 * c.H;
    out[h] = dA_log;
    out[c.H + h] = dD;
  }
  if (c.dA_log || c.dD) finish_column_sums(c.dA_log, c.H, c.dD, c.H, gridDim.y, gridDim.x * gridDim.y);
}

// dB, dC [rows, G, N] from the heads' dk, dq [rows, H, N]: each group's heads summed in order.
__global__ void mamba2_group_sums_kernel(const Mamba2Call c, const float* dk, const float* dq, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t j = i % c.N, rg = i / c.N, g = rg % c.G, r = rg / c.G, heads = c.H / c.G;
  float sum_k = 0, sum_q = 0;
  for (int64_t h = g * heads; h < (g + 1) * heads; ++h) {
    sum_k += dk[(r * c.H + h) * c.N + j];
    sum_q += dq[(r * c.H + h) * c.N + j];
  }
  if (c.dB) c.dB[i] = c.write ? sum_k : c.dB[i] + sum_k;
  if (c.dC) c.dC[i] = c.write ? sum_q : c.dC[i] + sum_q;
}

// GLA's call for the heads: its q, k, v and g (head_inputs) and the states; outputs and gradients
// are set by the caller.
chunk::Mixer<float> gla_call(const Mamba2Call& c) {
  chunk::Mixer<float> m;
  m.B = c.batch, m.len = c.T, m.H = c.H, m.Dk = c.N, m.Dv = c.P;
  m.scale = 1;  // Mamba2 has no 1/sqrt(N)
  m.precision = c.precision;
  m.seqs = c.seqs;
  m.h0 = c.h0;
  return m;
}

// GLA's q, k, v and g from the call's inputs, in scratch (q = C and k = B themselves when every head
// has its own group).
void head_inputs(chunk::Mixer<float>& m, const Mamba2Call& c, chunk::Scratch& scratch) {
  const int64_t heads = c.batch * c.T * c.H;
  const bool shared = c.G < c.H;
  float* q = shared ? scratch.floats(heads * c.N) : nullptr;
  float* k = shared ? scratch.floats(heads * c.N) : nullptr;
  float* v = scratch.floats(heads * c.P);
  float* g = scratch.floats(heads * c.N);
  const int64_t n = heads * (c.N + c.P);
  if (n > 0) {
    LINATTN_LAUNCH_PLAN(pointwise_plan("mamba2_inputs_kernel", n), stream(), mamba2_inputs_kernel)(q, k, v, g, c, n);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  m.q = shared ? Floats(q) : c.Cm;
  m.k = shared ? Floats(k) : c.Bm;
  m.v = v;
  m.g = g;
}

}  // namespace

void mamba2_forward(const Mamba2Call& c) {
  chunk::Scratch scratch;
  chunk::Mixer<float> m = gla_call(c);
  head_inputs(m, c, scratch);
  m.o = c.o, m.ht = c.ht, m.final_state = c.final_state;
  gla_forward(m);
  const int64_t n = c.batch * c.T * c.H * c.P;
  if (n > 0) {
    LINATTN_LAUNCH_PLAN(pointwise_plan("mamba2_skip_kernel", n), stream(), mamba2_skip_kernel)(c.o, c.x, c.D, n, c.H,
                                                                                               c.P);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
}

// GLA's backward writes the heads' gradients into scratch; the two kernels after it take them back
// through dt, A, D and the groups.
void mamba2_backward(const Mamba2Call& c) {
  chunk::Scratch scratch;
  chunk::Mixer<float> m = gla_call(c);
  head_inputs(m, c, scratch);
  const int64_t rows = c.batch * c.T, heads = rows * c.H;
  m.dq = scratch.floats(heads * c.N), m.dk = scratch.floats(heads * c.N);
  m.dv = scratch.floats(heads * c.P), m.dg = scratch.floats(heads * c.N);
  m.write = true;
  m.dh0 = c.dh0, m.dO = c.dO, m.dht = c.dht;
  gla_backward(m);
  if (c.H > 0) {
    const RowChunks chunks = row_chunks(rows, (c.H + 31) / 32, 2 * c.H);
    LINATTN_LAUNCH_PLAN(mamba2_time_step_backward_plan(rows, c.H), stream(), mamba2_time_step_backward_kernel)(
        c, m.dv, m.dg, rows, chunks.rows);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  const int64_t n = rows * c.G * c.N;
  if (n > 0) {
    LINATTN_LAUNCH_PLAN(pointwise_plan("mamba2_group_sums_kernel", n), stream(), mamba2_group_sums_kernel)(
        c, m.dk, m.dq, n);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace linattn::cuda
