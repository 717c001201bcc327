#include "kernels/cuda/columns.h"

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

// Which block column c of the whole falls in, and its column there.
__device__ inline int block_of(const ColumnBlocks& b, int64_t& c) {
  int i = 0;
  while (i + 1 < b.count && c >= b.width[i]) c -= b.width[i++];
  return i;
}

// One thread per element of the whole [N, C].
__global__ void split_columns_kernel(ColumnBlocks b, Floats x, int64_t N, int64_t C) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= N * C) return;
  const int64_t r = e / C;
  int64_t c = e % C;
  const int i = block_of(b, c);
  const float v = x[e];
  b.part[i][r * b.width[i] + c] = v;
  if (b.copy[i]) b.copy[i][r * b.width[i] + c] = bf16_bits_from_float(v);
}

__global__ void join_columns_kernel(FloatsOut y, ColumnBlocks b, int64_t N, int64_t C) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= N * C) return;
  const int64_t r = e / C;
  int64_t c = e % C;
  const int i = block_of(b, c);
  y.set(e, b.part[i][r * b.width[i] + c]);
}

int64_t columns(const ColumnBlocks& b) {
  int64_t C = 0;
  for (int i = 0; i < b.count; ++i) C += b.width[i];
  return C;
}

}  // namespace

void split_columns(const ColumnBlocks& blocks, Floats x, int64_t N) {
  const int64_t C = columns(blocks);
  if (N * C == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan("split_columns_kernel", N * C), stream(), split_columns_kernel)(blocks, x, N, C);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void join_columns(FloatsOut y, const ColumnBlocks& blocks, int64_t N) {
  const int64_t C = columns(blocks);
  if (N * C == 0) return;
  LINATTN_LAUNCH_PLAN(pointwise_plan("join_columns_kernel", N * C), stream(), join_columns_kernel)(y, blocks, N, C);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
