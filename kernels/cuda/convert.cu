#include "kernels/cuda/convert.h"

#include <cuda_bf16.h>

#include "core/cuda/runtime.h"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(in[i]);  // round to nearest even
}

__global__ void from_bf16_kernel(float* out, const __nv_bfloat16* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

__global__ void add_from_bf16_kernel(float* out, const __nv_bfloat16* in, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] += __bfloat162float(in[i]);
}

}  // namespace

void to_bf16(uint16_t* out, const float* in, int64_t n) {
  if (n == 0) return;
  LINATTN_LAUNCH(blocks_for(n), kThreads, 0, stream(), to_bf16_kernel)
  (reinterpret_cast<__nv_bfloat16*>(out), in, n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void from_bf16(float* out, const uint16_t* in, int64_t n) {
  if (n == 0) return;
  LINATTN_LAUNCH(blocks_for(n), kThreads, 0, stream(), from_bf16_kernel)
  (out, reinterpret_cast<const __nv_bfloat16*>(in), n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void add_from_bf16(float* out, const uint16_t* in, int64_t n) {
  if (n == 0) return;
  LINATTN_LAUNCH(blocks_for(n), kThreads, 0, stream(), add_from_bf16_kernel)
  (out, reinterpret_cast<const __nv_bfloat16*>(in), n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

Bf16Scratch::Bf16Scratch(int64_t n) : data_(static_cast<uint16_t*>(allocate(size_t(n > 0 ? n : 1) * sizeof(uint16_t)))) {}
Bf16Scratch::~Bf16Scratch() { release(data_); }

}  // namespace linattn::cuda
