// CUDA fused softmax + cross-entropy over the vocabulary (float32, sums in float64), with the
// argument order and semantics of kernels/cpu/cross_entropy.h. Pointers are device memory.
// The forward leaves its totals and the mean loss on the device, so a training step need not wait
// for them; a caller that wants the CPU kernel's errors copies the three doubles and raises them: a
// target outside the vocabulary (sums[2] > 0), a non-finite loss (sums[0] not finite).
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// lse (saved): [N], the log-sum-exp of each row; logits: [N, V]; targets: [N].
// sums: [3] on the device, set to {sum of lse_i - logit_{i, t_i} over the rows that count, the
// number of those rows, the number of rows whose target is outside [0, V) and not ignore_index}
// (such rows count nowhere, and the backward skips them). mean: [1] or null: set to
// float(sums[0] / sums[1]), 0 without rows that count.
void cross_entropy_forward(float* lse, double* sums, float* mean, const float* logits, const int32_t* targets,
                           int64_t N, int64_t V, int32_t ignore_index);
// forward: loss = scale * sum_i (lse_i - logit_{i, t_i})  =>  dlogits_i += scale (softmax_i - onehot(t_i))
// dlogits: [N, V] (+=); scale is d(total loss)/d(each row's loss), e.g. dloss / count for a mean.
// write: dlogits = (the rows that do not count: 0), float32 or bf16 (a product's operand), instead.
void cross_entropy_backward(FloatsOut dlogits, const float* logits, const float* lse, const int32_t* targets, int64_t N,
                            int64_t V, int32_t ignore_index, float scale, bool write = false);
// The same for a mean over `count` rows with the upstream gradient dloss [1] in device memory:
// scale = dloss[0] / count, read by the kernel (no copy to the host, no wait).
void cross_entropy_backward_mean(FloatsOut dlogits, const float* logits, const float* lse, const int32_t* targets,
                                 int64_t N, int64_t V, int32_t ignore_index, const float* dloss, int64_t count,
                                 bool write = false);
// cross_entropy_forward (mean set), then cross_entropy_backward_mean (write), in one pass over each
// row: its block makes the row's lse and writes its gradient while the row is in L2. The same bits.
void cross_entropy_forward_backward(float* lse, double* sums, float* mean, FloatsOut dlogits, const float* logits,
                                    const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index,
                                    const float* dloss, int64_t count);
#else
inline void cross_entropy_forward(float*, double*, float*, const float*, const int32_t*, int64_t, int64_t, int32_t) {
  LINATTN_NO_CUDA();
}
inline void cross_entropy_backward(FloatsOut, const float*, const float*, const int32_t*, int64_t, int64_t, int32_t,
                                   float, bool = false) {
  LINATTN_NO_CUDA();
}
inline void cross_entropy_backward_mean(FloatsOut, const float*, const float*, const int32_t*, int64_t, int64_t, int32_t,
                                        const float*, int64_t, bool = false) {
  LINATTN_NO_CUDA();
}
inline void cross_entropy_forward_backward(float*, double*, float*, FloatsOut, const float*, const int32_t*, int64_t,
                                           int64_t, int32_t, const float*, int64_t) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
