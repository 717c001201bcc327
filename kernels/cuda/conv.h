// CUDA causal depthwise short convolution along time (float32), with the argument order and
// semantics of kernels/cpu/conv.h. Pointers are device memory; W <= kMaxConvWidth (the config's
// conv_size limit). Deterministic: no atomics.
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

inline constexpr int64_t kMaxConvWidth = 16;

#ifdef LINATTN_CUDA
// y[b, t, c] = bias[c] + sum_{i < W} w[c, i] x[b, t - (W - 1) + i, c], with x = 0 before t = 0.
// y: [B, T, C]; x: [B, T, C]; w: [C, W]; bias: [C] (may be null)
void short_conv_forward(float* y, const float* x, const float* w, const float* bias, int64_t B, int64_t T_, int64_t C,
                        int64_t W);
// dx: [B, T, C] (+=); dw: [C, W] (+=); dbias: [C] (+=, may be null); dy: [B, T, C]
void short_conv_backward(float* dx, float* dw, float* dbias, const float* x, const float* w, const float* dy,
                         int64_t B, int64_t T_, int64_t C, int64_t W);
#else
inline void short_conv_forward(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t) {
  LINATTN_NO_CUDA();
}
inline void short_conv_backward(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                int64_t, int64_t) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
