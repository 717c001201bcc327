#include "kernels/cuda/bias.h"

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__global__ void bias_forward_kernel(float* y, const float* bias, int64_t n, int64_t out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % out];
}

// One thread per column; neighbouring threads read neighbouring columns of each row.
__global__ void bias_backward_kernel(float* dbias, const float* dy, int64_t N, int64_t out) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= out) return;
  float sum = 0;
  for (int64_t r = 0; r < N; ++r) sum += dy[r * out + j];
  dbias[j] += sum;
}

}  // namespace

void bias_forward(float* y, const float* bias, int64_t N, int64_t out) {
  if (N * out == 0) return;
  bias_forward_kernel<<<blocks_for(N * out), kThreads, 0, stream()>>>(y, bias, N * out, out);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void bias_backward(float* dbias, const float* dy, int64_t N, int64_t out) {
  if (out == 0) return;
  bias_backward_kernel<<<blocks_for(out), kThreads, 0, stream()>>>(dbias, dy, N, out);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
