// Deterministic column sums over many rows, for the weight gradients of per-channel parameters
// (RMSNorm's weight, a bias, the short convolution's taps and bias, GDN's decay parameters).
// Included only by kernels/cuda/*.cu.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

// One launch, no float atomics: a kernel over a grid of (32-column tiles) x (row chunks) writes each
// chunk's sums to column_partials[chunk][column], then calls finish_column_sums, whose last block to
// finish adds the chunks in order into the outputs. The chunking (row_chunks, launch_plan.h) depends
// on the sizes only, so the bits do not change from run to run, nor with the order the blocks run
// in. Each .cu file that includes this has its own buffer (1 MiB) and counter; the compute stream
// orders their users.
namespace {

__device__ float column_partials[kColumnPartials];
__device__ unsigned int column_blocks_done;  // 0 between launches: the last block resets it

// Called by every thread of each of the `blocks` blocks that write partials, after their writes:
// out1[j] += sum over chunks of column_partials[chunk][j] for j < n1, out2[j - n1] for the n2 after
// (out1 or out2 may be null: those columns are dropped). Blocks of the launch that write no partials
// do not call it.
__device__ inline void finish_column_sums(float* out1, int64_t n1, float* out2, int64_t n2, int64_t chunks,
                                          unsigned int blocks) {
  __shared__ bool last;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
  __threadfence();  // this thread's partials reach the device before the block is counted
  __syncthreads();
  if (tid == 0) last = atomicAdd(&column_blocks_done, 1u) == blocks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const volatile float* partials = column_partials;  // written by other blocks: not from a stale cache
  for (int64_t j = tid; j < n1 + n2; j += threads) {
    float sum = 0;
    for (int64_t r = 0; r < chunks; ++r) sum += partials[r * (n1 + n2) + j];
    if (j < n1) {
      if (out1) out1[j] += sum;
    } else if (out2)
      out2[j - n1] += sum;
  }
  if (tid == 0) column_blocks_done = 0;  // for the next launch, and a CUDA graph's next replay
}

}  // namespace

}  // namespace linattn::cuda
