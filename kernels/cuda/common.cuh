// What the CUDA kernel files share: the launch macros (launch.cuh), the stream and grid of a launch,
// and warp/block reductions. Included only by kernels/cuda/*.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "kernels/cuda/launch.cuh"

namespace linattn::cuda {

inline cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }

// Pointwise kernels: one thread per element, 256 threads a block (pointwise_plan, launch_plan.h).
constexpr int kThreads = kPointwiseThreads;
inline unsigned blocks_for(int64_t n, int threads = kThreads) { return unsigned((n + threads - 1) / threads); }

// The sum over the 32 lanes of a warp, the same value in every lane. The butterfly order is fixed,
// so the result is deterministic.
template <class T>
__device__ inline T warp_sum(T x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

template <class T>
__device__ inline T warp_max(T x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmax(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// The sum (or max) over a block whose size is a multiple of 32 (at most 1024), returned to every
// thread. Every thread of the block must call it; it synchronizes, so it may be called repeatedly.
template <class T, bool Max = false>
__device__ inline T block_reduce(T x) {
  __shared__ T partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = Max ? warp_max(x) : warp_sum(x);
  __syncthreads();  // a previous call may still be reading partial
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  T y = lane < warps ? partial[lane] : (Max ? partial[0] : T(0));
  return Max ? warp_max(y) : warp_sum(y);
}

template <class T>
__device__ inline T block_sum(T x) {
  return block_reduce<T, false>(x);
}
template <class T>
__device__ inline T block_max(T x) {
  return block_reduce<T, true>(x);
}

}  // namespace linattn::cuda
