// What the CUDA kernels written once for the device and the host share (kernels/cuda/deltanet_block.h,
// kernels/cuda/chunk_layout.h): the __host__ __device__ marker, the exponential, and DeviceBlock,
// the threads of one CUDA block as those block programs see them. The host tests run the same block
// programs with a sequential stand-in for DeviceBlock (tests/cuda/deltanet_test.cpp). This header
// includes no CUDA header.
#pragma once

#include <math.h>

#include <cstdint>

#ifdef __CUDACC__
#define LINATTN_HD __host__ __device__
#else
#define LINATTN_HD
#endif

namespace linattn::cuda {

LINATTN_HD inline float exp_(float x) { return expf(x); }
LINATTN_HD inline double exp_(double x) { return ::exp(x); }

// The threads of one CUDA block: each(n, f) runs f(e) for e in [0, n) spread over the threads, sync()
// is the barrier and one(f) runs f on the first thread (deltanet_block.h).
// Outside device code (the host pass of a .cu file) every call is a no-op.
struct DeviceBlock {
  template <class F>
  LINATTN_HD void each(int64_t n, F&& f) const {
#ifdef __CUDA_ARCH__
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) f(e);
#else
    (void)n, (void)f;
#endif
  }
  LINATTN_HD void sync() const {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
  }
  template <class F>
  LINATTN_HD void one(F&& f) const {
#ifdef __CUDA_ARCH__
    if (threadIdx.x == 0) f();
#else
    (void)f;
#endif
  }
};

}  // namespace linattn::cuda
