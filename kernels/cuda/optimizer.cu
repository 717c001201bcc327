#include "kernels/cuda/optimizer.h"

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

constexpr int kSumThreads = kSumSquaresThreads;
constexpr int kMaxPartials = kSumSquaresPartials;
// The first pass's per-block sums (one buffer per device; the compute stream orders its users).
__device__ double g_partials[kMaxPartials];

__global__ void sum_squares_partial_kernel(const float* g, int64_t n) {
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double x = g[i];
    acc += x * x;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) g_partials[blockIdx.x] = acc;
}

__global__ void sum_squares_final_kernel(double* sum_sq, int partials) {
  double acc = 0;
  for (int i = threadIdx.x; i < partials; i += blockDim.x) acc += g_partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) *sum_sq = acc;
}

__global__ void adamw_kernel(float* w, float* m, float* v, const float* g, int64_t n, AdamWStep s) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // The __f*_rn intrinsics round each operation and are never contracted into an FMA.
  const float gi = g[i], wi = w[i];
  const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, s.beta1), gi));
  const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), gi), gi));
  const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, s.rbc2)), s.eps);
  m[i] = mi;
  v[i] = vi;
  w[i] = __fsub_rn(wi, __fadd_rn(__fdiv_rn(__fmul_rn(s.step_size, mi), denom), __fmul_rn(s.decay, wi)));
}

}  // namespace

void sum_squares(double* sum_sq, const float* g, int64_t n) {
  const LaunchPlans plans = sum_squares_plans(n);
  const int blocks = plans.size() > 1 ? int(plans.front().grid.x) : 0;
  if (blocks > 0) {
    LINATTN_LAUNCH_PLAN(plans.front(), stream(), sum_squares_partial_kernel)(g, n);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  LINATTN_LAUNCH_PLAN(plans.back(), stream(), sum_squares_final_kernel)(sum_sq, blocks);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void adamw_update(float* w, float* m, float* v, const float* g, int64_t n, const AdamWStep& s) {
  if (n == 0) return;
  LINATTN_LAUNCH_PLAN(adamw_plans(n)[0], stream(), adamw_kernel)(w, m, v, g, n, s);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
