#include "kernels/cuda/elementwise.h"

#include "core/cuda/check.h"
#include "core/cuda/stream.h"

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

unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }
cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }

}  // namespace

void add_forward(float* y, const float* a, const float* b, int64_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, a, b, n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void add_inplace(float* y, const float* x, int64_t n) {
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(y, x, n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
