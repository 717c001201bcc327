// The activations on the device (ops.md's definitions): y = f(x), and d f'(x), the gradient a
// backward passes on for the upstream d. Shared by the pointwise kernels (elementwise.cu) and the
// bias + activation passes (bias.cu), so the fused and the unfused passes compute alike, bit for bit.
#pragma once

#include "kernels/op_types.h"

namespace linattn::cuda::act {

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// log(sigmoid(x)) = -log(1 + e^-x), written so that neither branch overflows.
__device__ inline float logsigmoid(float x) { return x >= 0 ? -log1pf(expf(-x)) : x - log1pf(expf(x)); }

template <Activation F>
__device__ inline float value(float x) {
  if constexpr (F == Activation::silu) return x * sigmoid(x);
  if constexpr (F == Activation::sigmoid) return sigmoid(x);
  if constexpr (F == Activation::logsigmoid) return logsigmoid(x);
  if constexpr (F == Activation::elu1) return x > 0 ? x + 1.0f : expf(x);  // elu(x) + 1
  if constexpr (F == Activation::relu) return x > 0 ? x : 0.0f;
  return 0;
}

// d f'(x)
template <Activation F>
__device__ inline float gradient(float x, float d) {
  if constexpr (F == Activation::silu) {  // y = x s(x)  =>  dy (s + x s (1 - s))
    const float s = sigmoid(x);
    return d * s * (1.0f + x * (1.0f - s));
  }
  if constexpr (F == Activation::sigmoid) {  // y = s(x)  =>  dy s (1 - s)
    const float s = sigmoid(x);
    return d * s * (1.0f - s);
  }
  if constexpr (F == Activation::logsigmoid) return d * sigmoid(-x);  // y = log s(x)  =>  dy (1 - s(x)) = dy s(-x)
  if constexpr (F == Activation::elu1) return x > 0 ? d : d * expf(x);  // y = x + 1 (x > 0), e^x  =>  dy (1 or e^x)
  if constexpr (F == Activation::relu) return x > 0 ? d : 0.0f;        // y = max(x, 0)  =>  dy [x > 0]
  return 0;
}

}  // namespace linattn::cuda::act
