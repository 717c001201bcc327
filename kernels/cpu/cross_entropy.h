// Fused softmax + cross-entropy over the vocabulary, in float32 or better, with an ignore index.
#pragma once

#include <cstdint>

namespace linattn::cpu {

struct CrossEntropySum {
  double loss_sum = 0;  // sum of -log p(target) over the rows that count
  int64_t count = 0;    // rows whose target is not the ignore index
};

// lse (saved): [N], the log-sum-exp of each row; logits: [N, V]; targets: [N].
// Throws linattn::Error naming the row when a target is outside [0, V) (and not ignore_index),
// or when a counted row's loss is not finite (NaN or Inf in the logits).
template <class T>
CrossEntropySum cross_entropy_forward(T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                                      int32_t ignore_index);
// forward: loss = scale * sum_i (lse_i - logit_{i, t_i})  =>  dlogits_i += scale (softmax_i - onehot(t_i))
// dlogits: [N, V] (+=); scale is d(total loss)/d(each row's loss), e.g. dloss / count for a mean.
// write: dlogits = (the ignored rows: 0) instead, in T or bf16 (a product's operand, D).
template <class T, class D = T>
void cross_entropy_backward(D* dlogits, const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V,
                            int32_t ignore_index, T scale, bool write = false);

}  // namespace linattn::cpu
