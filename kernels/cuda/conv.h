// CUDA causal depthwise short convolution along time (float32), with the argument order and
// semantics of kernels/cpu/conv.h. Pointers are device memory; W <= kMaxConvWidth (the config's
// conv_size limit). Deterministic: no atomics.
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"
#include "kernels/op_types.h"

namespace linattn::cuda {

inline constexpr int64_t kMaxConvWidth = 16;

#ifdef LINATTN_CUDA
// y[b, t, c] = bias[c] + sum_{i < W} w[c, i] x[b, t - (W - 1) + i, c], with x = 0 before t = 0 and,
// with `seqs` (kernels/op_types.h; offsets on the device), before the first position of t's sequence.
// y and dx are those of one call per sequence, bit for bit; dw and dbias are column sums over the
// whole batch, equal to the per-sequence calls' up to the order of the additions.
// y: [B, T, C]; x: [B, T, C]; w: [C, W]; bias: [C] (may be null)
void short_conv_forward(float* y, const float* x, const float* w, const float* bias, int64_t B, int64_t T_, int64_t C,
                        int64_t W, Sequences seqs = {});
// dx: [B, T, C] (+=); dw: [C, W] (+=); dbias: [C] (+=, may be null); dy: [B, T, C]
void short_conv_backward(float* dx, float* dw, float* dbias, const float* x, const float* w, const float* dy,
                         int64_t B, int64_t T_, int64_t C, int64_t W, Sequences seqs = {});
#else
inline void short_conv_forward(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                               Sequences = {}) {
  LINATTN_NO_CUDA();
}
inline void short_conv_backward(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                int64_t, int64_t, Sequences = {}) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
