#include "kernels/cuda/bias.h"

#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__global__ void bias_forward_kernel(float* y, const float* bias, int64_t n, int64_t out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % out];
}

// A block takes 32 columns of one chunk of rows, its kLanes row lanes split the rows, and lane 0
// adds the lanes in order into the chunk's partial sums, which the last block adds into dbias
// (column_sums.cuh).
constexpr int kLanes = kColumnLanes;
__global__ void bias_backward_kernel(float* dbias, const float* dy, int64_t N, int64_t out, int64_t rows_per_chunk) {
  __shared__ float partial[kLanes][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float acc = 0;
  if (j < out)
    for (int64_t i = begin + threadIdx.y; i < end; i += kLanes) acc += dy[i * out + j];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < out) {
    float sum = 0;
    for (int k = 0; k < kLanes; ++k) sum += partial[k][threadIdx.x];
    column_partials[int64_t(blockIdx.y) * out + j] = sum;
  }
  finish_column_sums(dbias, out, nullptr, 0, gridDim.y, gridDim.x * gridDim.y);
}

}  // namespace

void bias_forward(float* y, const float* bias, int64_t N, int64_t out) {
  if (N * out == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan("bias_forward_kernel", N * out), stream(), bias_forward_kernel)(y, bias, N * out,
                                                                                                      out);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void bias_backward(float* dbias, const float* dy, int64_t N, int64_t out) {
  if (out == 0) return;
  const RowChunks chunks = row_chunks(N, (out + 31) / 32, out);
  LINATTN_LAUNCH_PLAN(bias_backward_plans(N, out)[0], stream(), bias_backward_kernel)(dbias, dy, N, out, chunks.rows);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
