#include "kernels/cuda/elementwise.h"

#include <cuda_runtime.h>

#include "core/error.h"

namespace linattn::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void add_kernel(float* y, const float* a, const float* b, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

__global__ void add_inplace_kernel(float* y, const float* x, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

void check_launch(const char* what) {
  cudaError_t err = cudaGetLastError();
  LINATTN_CHECK(err == cudaSuccess, what, ": CUDA launch failed: ", cudaGetErrorString(err));
}

unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

}  // namespace

void add_forward(float* y, const float* a, const float* b, int64_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads>>>(y, a, b, n);
  check_launch("cuda::add_forward");
}

void add_inplace(float* y, const float* x, int64_t n) {
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads>>>(y, x, n);
  check_launch("cuda::add_inplace");
}

}  // namespace linattn::cuda
