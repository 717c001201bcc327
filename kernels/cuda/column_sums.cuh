// Deterministic column sums over many rows, for the weight gradients of per-channel parameters
// (RMSNorm's weight, the short convolution's taps and bias). Included only by kernels/cuda/*.cu.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

// Two passes, no atomics: a kernel over a grid of (32-column tiles) x (row chunks) writes each
// chunk's sums to column_partials[chunk][column]; add_column_partials then adds the chunks in order
// into the outputs. The chunking (row_chunks, launch_plan.h) depends on the sizes only, so the bits
// do not change from run to run. Each .cu file that includes this has its own buffer (1 MiB); the
// compute stream orders its users.
namespace {

__device__ float column_partials[kColumnPartials];

// out1[j] += sum over chunks of column_partials[chunk][j] for j < n1, out2[j - n1] for the n2 after
// (out1 or out2 may be null: those columns are dropped).
__global__ void add_column_partials_kernel(float* out1, int64_t n1, float* out2, int64_t n2, int64_t chunks) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n1 + n2) return;
  float sum = 0;
  for (int64_t r = 0; r < chunks; ++r) sum += column_partials[r * (n1 + n2) + j];
  if (j < n1) {
    if (out1) out1[j] += sum;
  } else if (out2)
    out2[j - n1] += sum;
}

inline void add_column_partials(float* out1, int64_t n1, float* out2, int64_t n2, int64_t chunks) {
  if (n1 + n2 == 0) return;
  LINATTN_LAUNCH_PLAN(add_column_partials_plan(n1 + n2), stream(), add_column_partials_kernel)(out1, n1, out2, n2,
                                                                                               chunks);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace

}  // namespace linattn::cuda
