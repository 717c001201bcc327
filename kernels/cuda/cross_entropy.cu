#include "kernels/cuda/cross_entropy.h"

#include <algorithm>

#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

// The log-sum-exp of one row of V logits, by its block: the row's max, then the sum of
// exp(logit - max), each a strided pass by the block's threads and a block reduction (the second
// pass reads the row from L2); the same value in every thread.
__device__ float row_lse(const float* row, int64_t V) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_max(m);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum += expf(row[j] - m);
  sum = block_sum(sum);
  return m + logf(sum);
}

// One block per row (kCrossEntropyRowThreads threads, launch_plan.h): its log-sum-exp.
__global__ void lse_kernel(float* lse, const float* logits, int64_t V) {
  const float l = row_lse(logits + int64_t(blockIdx.x) * V, V);
  if (threadIdx.x == 0) lse[blockIdx.x] = l;
}

// lse_kernel, then the row's gradient as cross_entropy_backward_kernel writes it (write, the scale
// dloss[0] / count), a third strided pass over the row (from L2): the same bits, one read of the
// logits from memory instead of two.
__global__ void lse_gradient_kernel(float* lse, FloatsOut dlogits, const float* logits, const int32_t* targets,
                                    int64_t V, int32_t ignore_index, const float* dloss, float count) {
  const int64_t i = blockIdx.x;
  const float* row = logits + i * V;
  const float l = row_lse(row, V);
  if (threadIdx.x == 0) lse[i] = l;
  const int32_t t = targets[i];
  const bool counts = t != ignore_index && t >= 0 && t < V;
  const float scale = dloss[0] / count;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    if (!counts) {
      dlogits.set(i * V + j, 0.0f);
      continue;
    }
    float d = 0.0f + scale * expf(row[j] - l);
    if (j == t) d -= scale;
    dlogits.set(i * V + j, d);
  }
}

// One block (kCrossEntropySumThreads threads) adds the rows' losses in float64 in a fixed order: the
// same total on every run.
__global__ void loss_sum_kernel(double* sums, float* mean, const float* lse, const float* logits,
                                const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index) {
  double loss = 0, count = 0, bad = 0;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const int32_t t = targets[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= V) {
      bad += 1;
      continue;
    }
    loss += double(lse[i]) - double(logits[i * V + t]);
    count += 1;
  }
  loss = block_sum(loss);
  count = block_sum(count);
  bad = block_sum(bad);
  if (threadIdx.x == 0) {
    sums[0] = loss;
    sums[1] = count;
    sums[2] = bad;
    if (mean) *mean = float(count > 0 ? loss / count : 0.0);
  }
}

// One thread per logit: dlogits += scale (exp(logit - lse) - [j == target]), in the CPU's order.
// write: dlogits is written (0 on the rows that do not count), else added into (float32).
__global__ void cross_entropy_backward_kernel(FloatsOut dlogits, const float* logits, const float* lse,
                                              const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index,
                                              float scale, const float* dloss, float count, bool write) {
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= N * V) return;
  if (dloss) scale = dloss[0] / count;  // as the host would divide, without reading dloss back
  const int64_t i = k / V, j = k - i * V;
  const int32_t t = targets[i];
  if (t == ignore_index || t < 0 || t >= V) {
    if (write) dlogits.set(k, 0.0f);
    return;
  }
  float d = (write ? 0.0f : static_cast<const float*>(dlogits.data)[k]) + scale * expf(logits[k] - lse[i]);
  if (j == t) d -= scale;
  dlogits.set(k, d);
}

}  // namespace

void cross_entropy_forward(float* lse, double* sums, float* mean, const float* logits, const int32_t* targets,
                           int64_t N, int64_t V, int32_t ignore_index) {
  LINATTN_CHECK(N < (int64_t(1) << 31), "cuda::cross_entropy_forward: ", N, " rows is more than one launch takes (2^31 - 1)");
  const LaunchPlans plans = cross_entropy_forward_plans(N, V);
  if (N > 0 && V > 0) {
    LINATTN_LAUNCH_PLAN(plans.front(), stream(), lse_kernel)(lse, logits, V);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  LINATTN_LAUNCH_PLAN(plans.back(), stream(), loss_sum_kernel)(sums, mean, lse, logits, targets, N, V, ignore_index);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_forward_backward(float* lse, double* sums, float* mean, FloatsOut dlogits, const float* logits,
                                    const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index,
                                    const float* dloss, int64_t count) {
  LINATTN_CHECK(N < (int64_t(1) << 31), "cuda::cross_entropy_forward_backward: ", N,
                " rows is more than one launch takes (2^31 - 1)");
  const LaunchPlans plans = cross_entropy_forward_backward_plans(N, V);
  if (N > 0 && V > 0) {
    LINATTN_LAUNCH_PLAN(plans.front(), stream(), lse_gradient_kernel)(lse, dlogits, logits, targets, V, ignore_index,
                                                                      dloss, float(std::max<int64_t>(count, 1)));
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  LINATTN_LAUNCH_PLAN(plans.back(), stream(), loss_sum_kernel)(sums, mean, lse, logits, targets, N, V, ignore_index);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(FloatsOut dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
                            int64_t V, int32_t ignore_index, float scale, bool write) {
  if (N * V == 0) return;
  LINATTN_CHECK(write || !dlogits.bf16, "cuda::cross_entropy_backward: bf16 gradients are written, not added into");
  LINATTN_LAUNCH_PLAN(cross_entropy_backward_plans(N, V)[0], stream(), cross_entropy_backward_kernel)(
      dlogits, logits, lse, targets, N, V, ignore_index, scale, nullptr, 1.0f, write);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward_mean(FloatsOut dlogits, const float* logits, const float* lse, const int32_t* targets,
                                 int64_t N, int64_t V, int32_t ignore_index, const float* dloss, int64_t count,
                                 bool write) {
  if (N * V == 0) return;
  LINATTN_CHECK(write || !dlogits.bf16, "cuda::cross_entropy_backward: bf16 gradients are written, not added into");
  LINATTN_LAUNCH_PLAN(cross_entropy_backward_plans(N, V)[0], stream(), cross_entropy_backward_kernel)(
      dlogits, logits, lse, targets, N, V, ignore_index, 0.0f, dloss, float(std::max<int64_t>(count, 1)), write);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
