#include "kernels/cuda/bias.h"

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/column_sums.cuh"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__global__ void bias_forward_kernel(float* y, const float* bias, int64_t n, int64_t out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % out];
}

// dbias [out] += the column sums of element(e) over the [N, out] elements e = i out + j: a block
// takes 32 columns of one chunk of rows, its kLanes row lanes split the rows, and lane 0 adds the
// lanes in order into the chunk's partial sums, which the last block adds into dbias
// (column_sums.cuh).
constexpr int kLanes = kColumnLanes;
template <class Element>
__device__ void add_column_sums(float* dbias, int64_t N, int64_t out, int64_t rows_per_chunk, const Element& element) {
  __shared__ float partial[kLanes][33];
  const int64_t j = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float acc = 0;
  if (j < out)
    for (int64_t i = begin + threadIdx.y; i < end; i += kLanes) acc += element(i * out + j);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < out) {
    float sum = 0;
    for (int k = 0; k < kLanes; ++k) sum += partial[k][threadIdx.x];
    column_partials[int64_t(blockIdx.y) * out + j] = sum;
  }
  finish_column_sums(dbias, out, nullptr, 0, gridDim.y, gridDim.x * gridDim.y);
}

__global__ void bias_backward_kernel(float* dbias, const float* dy, int64_t N, int64_t out, int64_t rows_per_chunk) {
  add_column_sums(dbias, N, out, rows_per_chunk, [dy](int64_t e) { return dy[e]; });
}

template <Activation F>
__global__ void bias_activation_forward_kernel(float* y, uint16_t* z16, float* z, const float* bias, int64_t n,
                                               int64_t out, float c) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = z[i] + bias[i % out];
  y[i] = c * act::value<F>(v);
  if (z16) z16[i] = bf16_bits_from_float(v);
  else z[i] = v;
}

// bias_backward_kernel's blocks, each element's dz = (c dy) f'(z) written as it is summed.
template <Activation F>
__global__ void bias_activation_backward_kernel(FloatsOut dz, float* dbias, Floats z, const float* dy, int64_t N,
                                                int64_t out, int64_t rows_per_chunk, float c) {
  add_column_sums(dbias, N, out, rows_per_chunk, [&](int64_t e) {
    const float g = act::gradient<F>(z[e], c * dy[e]);
    dz.set(e, g);
    return g;
  });
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

// The kernel for the activation chosen at run time, launched with `plan`.
#define LINATTN_ACTIVATION_CASE(F, kernel, ...)                                \
  case F:                                                                      \
    LINATTN_LAUNCH_PLAN(plan, stream(), kernel<F>)(__VA_ARGS__);               \
    break;
#define LINATTN_ACTIVATION_CASES(kernel, ...)                                  \
  LINATTN_ACTIVATION_CASE(Activation::silu, kernel, __VA_ARGS__)               \
  LINATTN_ACTIVATION_CASE(Activation::sigmoid, kernel, __VA_ARGS__)            \
  LINATTN_ACTIVATION_CASE(Activation::logsigmoid, kernel, __VA_ARGS__)         \
  LINATTN_ACTIVATION_CASE(Activation::elu1, kernel, __VA_ARGS__)               \
  LINATTN_ACTIVATION_CASE(Activation::relu, kernel, __VA_ARGS__)               \
  default: LINATTN_FAIL("unknown activation ", int(f));

void bias_activation_forward(Activation f, float* y, uint16_t* z16, float* z, const float* bias, int64_t N,
                             int64_t out, float c) {
  if (N * out == 0) return;
  const LaunchPlan plan = bias_activation_forward_plans(f, N, out)[0];
  switch (f) { LINATTN_ACTIVATION_CASES(bias_activation_forward_kernel, y, z16, z, bias, N * out, out, c) }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void bias_activation_backward(Activation f, FloatsOut dz, float* dbias, Floats z, const float* dy, int64_t N,
                              int64_t out, float c) {
  if (out == 0) return;
  const RowChunks chunks = row_chunks(N, (out + 31) / 32, out);
  const LaunchPlan plan = bias_activation_backward_plans(f, N, out)[0];
  switch (f) { LINATTN_ACTIVATION_CASES(bias_activation_backward_kernel, dz, dbias, z, dy, N, out, chunks.rows, c) }
  LINATTN_CUDA_CHECK_LAUNCH();
}

#undef LINATTN_ACTIVATION_CASES
#undef LINATTN_ACTIVATION_CASE

}  // namespace linattn::cuda
