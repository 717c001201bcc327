// Helpers for the tests of kernels/cuda/: each CUDA kernel runs on device copies of random float32
// inputs and is compared with the CPU kernel. The reference is the CPU kernel in float64 on the same
// (float32-rounded) inputs unless a test says otherwise, so a tolerance bounds the float32 rounding
// of the CUDA kernel alone. Every test skips with a message where no GPU exists.
#pragma once

#ifdef LINATTN_CUDA
#include <cuda_runtime.h>
#endif

#include <initializer_list>
#include <vector>

#include "testing.h"

namespace linattn::testing {

#ifdef LINATTN_CUDA
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

#define SKIP_WITHOUT_GPU()                                                                              \
  do {                                                                                                  \
    if (!::linattn::cuda_available())                                                                   \
      GTEST_SKIP() << "no CUDA device here (built with CUDA: " << ::linattn::testing::kBuiltWithCuda     \
                   << ")";                                                                              \
  } while (0)

// Waits for the device and throws on any execution error of the kernels launched so far.
inline void device_sync() {
#ifdef LINATTN_CUDA
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) throw std::runtime_error(std::string("CUDA kernel failed: ") + cudaGetErrorString(err));
#endif
}

// Uniform float32 random values on the host.
inline Tensor random_f32(const Shape& shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
  return random_tensor(shape, rng, lo, hi, DType::f32);
}

// A device copy, complete before any kernel runs (a copy from pageable memory may return before its
// DMA ends, and the kernels' stream need not be the one the copy ran on).
inline Tensor on_device(const Tensor& host) {
  Tensor dev = host.to(Device::cuda);
  device_sync();
  return dev;
}
// A host copy of a device tensor, after all kernels launched so far have finished.
inline Tensor on_host(const Tensor& dev) {
  device_sync();
  return dev.to(Device::cpu);
}
inline Tensor f64(const Tensor& t) { return t.to(DType::f64); }

// The devices a test of both backends runs on: the CPU, and CUDA where a GPU or the emulation is.
inline std::vector<Device> cpu_and_cuda() {
  std::vector<Device> d{Device::cpu};
  if (cuda_available()) d.push_back(Device::cuda);
  return d;
}

}  // namespace linattn::testing
