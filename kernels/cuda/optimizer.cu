#include "kernels/cuda/optimizer.h"

#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/cuda/common.cuh"
#include "kernels/op_types.h"

namespace linattn::cuda {

namespace {

namespace slot = step_control;

constexpr int kMaxPartials = kSumSquaresPartials;
// The first pass's per-block sums (one buffer per device; the compute stream orders its users).
__device__ double g_partials[kMaxPartials];

// Neither NaN nor an infinity (NaN compares false).
__device__ inline bool finite(double x) { return fabs(x) <= DBL_MAX; }

__global__ void sum_squares_partial_kernel(const float* g, int64_t n) {
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double x = g[i];
    acc += x * x;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) g_partials[blockIdx.x] = acc;
}

// The second pass: the partial sums in a fixed order (one block).
__device__ double sum_partials(int partials) {
  double acc = 0;
  for (int i = threadIdx.x; i < partials; i += blockDim.x) acc += g_partials[i];
  return block_sum(acc);
}

__global__ void sum_squares_final_kernel(double* sum_sq, int partials) {
  const double acc = sum_partials(partials);
  if (threadIdx.x == 0) *sum_sq = acc;
}

__global__ void step_control_kernel(double* control, int partials, double max_norm) {
  const double sum_sq = sum_partials(partials);
  if (threadIdx.x != 0) return;
  const double norm = sqrt(sum_sq);  // IEEE-rounded, as the host's std::sqrt
  control[slot::sum_squares] = sum_sq;
  control[slot::norm] = norm;
  control[slot::clip] = max_norm > 0 && norm > max_norm ? max_norm / norm : 1.0;
  control[slot::skip] = control[slot::bad] != 0 || !finite(norm) ? 1.0 : 0.0;
}

__global__ void step_loss_kernel(double* control, const float* losses, int64_t n) {
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) loss += double(losses[i]) / double(n);
  control[slot::loss] = loss;
  control[slot::bad] = finite(loss) ? 0.0 : 1.0;  // a non-finite term leaves a non-finite sum
}

// Whether element i is in a decayed range: an odd number of the range bounds are <= i.
__device__ bool decayed(const double* bounds, int64_t count, int64_t i) {
  int64_t lo = 0, hi = count;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (bounds[mid] <= double(i)) lo = mid + 1;
    else hi = mid;
  }
  return lo & 1;
}

__global__ void adamw_kernel(float* w, __nv_bfloat16* w16, float* m, float* v, const float* g, int64_t n,
                             const double* decay_ranges, int64_t ranges, const double* control, AdamWStep s) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n || control[slot::skip] != 0) return;
  const double clip = control[slot::clip];
  const float step_size = float(control[slot::step_size]), rbc2 = float(control[slot::rbc2]);
  // The __f*_rn intrinsics round each operation and are never contracted into an FMA.
  const float gi = clip != 1.0 ? __fmul_rn(g[i], float(clip)) : g[i], wi = w[i];
  const float decay = decayed(decay_ranges, 2 * ranges, i) ? float(control[slot::decay]) : 0.0f;
  const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, s.beta1), gi));
  const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, s.beta2), gi), gi));
  const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, rbc2)), s.eps);
  m[i] = mi;
  v[i] = vi;
  const float updated = __fsub_rn(wi, __fadd_rn(__fdiv_rn(__fmul_rn(step_size, mi), denom), __fmul_rn(decay, wi)));
  w[i] = updated;
  if (w16) w16[i] = __float2bfloat16(updated);  // round to nearest even, as to_bf16_kernel
}

// The first pass of sum_squares and step_control; returns the number of partial sums.
int partial_sums(const LaunchPlans& plans, const float* g, int64_t n) {
  const int blocks = plans.size() > 1 ? int(plans.front().grid.x) : 0;
  if (blocks > 0) {
    LINATTN_LAUNCH_PLAN(plans.front(), stream(), sum_squares_partial_kernel)(g, n);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  return blocks;
}

}  // namespace

void sum_squares(double* sum_sq, const float* g, int64_t n) {
  const LaunchPlans plans = sum_squares_plans(n);
  const int blocks = partial_sums(plans, g, n);
  LINATTN_LAUNCH_PLAN(plans.back(), stream(), sum_squares_final_kernel)(sum_sq, blocks);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void step_loss(double* control, const float* losses, int64_t n) {
  LINATTN_LAUNCH_PLAN(step_loss_plans()[0], stream(), step_loss_kernel)(control, losses, n);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void step_control(double* control, const float* g, int64_t n, double max_norm) {
  const LaunchPlans plans = step_control_plans(n);
  const int blocks = partial_sums(plans, g, n);
  LINATTN_LAUNCH_PLAN(plans.back(), stream(), step_control_kernel)(control, blocks, max_norm);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void adamw_update(float* w, uint16_t* w16, float* m, float* v, const float* g, int64_t n, const double* decay_ranges,
                  int64_t ranges, const double* control, const AdamWStep& s) {
  if (n == 0) return;
  LINATTN_LAUNCH_PLAN(adamw_plans(n)[0], stream(), adamw_kernel)(w, reinterpret_cast<__nv_bfloat16*>(w16), m, v, g, n,
                                                                 decay_ranges, ranges, control, s);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
