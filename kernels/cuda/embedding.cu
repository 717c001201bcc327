#include "kernels/cuda/embedding.h"

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__global__ void embedding_forward_kernel(float* y, const int32_t* ids, const float* table, int64_t N, int64_t D) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= N * D) return;
  const int64_t i = k / D, j = k - i * D;
  y[k] = table[int64_t(ids[i]) * D + j];
}

// Block b owns the table rows [b rows, (b + 1) rows): it reads the ids kThreads at a time, lists in
// shared memory, in token order, the positions whose id it owns (a warp ballot and a prefix count
// over the warps), then adds those rows of dy, thread j taking columns j, j + kThreads, ... So every
// entry of dtable has one writer, which adds its tokens in order.
__global__ void embedding_backward_kernel(float* dtable, const int32_t* ids, const float* dy, int64_t N, int64_t V,
                                          int64_t D, int64_t rows) {
  constexpr int kWarps = kThreads / 32;
  __shared__ int matched[kThreads];
  __shared__ int warp_count[kWarps];
  const int64_t lo = int64_t(blockIdx.x) * rows, hi = lo + rows < V ? lo + rows : V;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t base = 0; base < N; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const bool hit = i < N && ids[i] >= lo && ids[i] < hi;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_count[warp] = __popc(mask);
    __syncthreads();
    int offset = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      offset += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (hit) matched[offset + __popc(mask & ((1u << lane) - 1u))] = int(threadIdx.x);
    __syncthreads();
    for (int m = 0; m < total; ++m) {
      const int64_t tok = base + matched[m];
      float* row = dtable + int64_t(ids[tok]) * D;
      const float* g = dy + tok * D;
      for (int64_t j = threadIdx.x; j < D; j += kThreads) row[j] += g[j];
    }
    __syncthreads();  // matched and warp_count are rewritten next round
  }
}

}  // namespace

void embedding_forward(float* y, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t D) {
  (void)V;
  if (N * D == 0) return;
  LINATTN_LAUNCH_PLAN(embedding_forward_plans(N, D)[0], stream(), embedding_forward_kernel)(y, ids, table, N, D);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void embedding_backward(float* dtable, const int32_t* ids, const float* dy, int64_t N, int64_t V, int64_t D) {
  if (N == 0 || V == 0 || D == 0) return;
  const int64_t rows = embedding_backward_rows_per_block(V);
  LINATTN_LAUNCH_PLAN(embedding_backward_plan(V), stream(), embedding_backward_kernel)(dtable, ids, dy, N, V, D, rows);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
