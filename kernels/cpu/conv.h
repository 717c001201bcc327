// Causal depthwise short convolution along time (fla's ShortConvolution, without its activation).
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cpu {

// y[b, t, c] = bias[c] + sum_{i < W} w[c, i] x[b, t - (W - 1) + i, c], with x = 0 before t = 0, and
// with `seqs` (kernels/op_types.h) before the first position of t's sequence: a tap never reads
// another document. dw and dbias add the positions in order, one at a time, so one call over the
// batch gives the bits of one call per sequence.
// y: [B, T, C]; x: [B, T, C]; w: [C, W]; bias: [C] (may be null)
template <class T>
void short_conv_forward(T* y, const T* x, const T* w, const T* bias, int64_t B, int64_t T_, int64_t C, int64_t W,
                        Sequences seqs = {});
// dx: [B, T, C] (+=); dw: [C, W] (+=); dbias: [C] (+=, may be null); dy: [B, T, C]
template <class T>
void short_conv_backward(T* dx, T* dw, T* dbias, const T* x, const T* w, const T* dy, int64_t B, int64_t T_,
                         int64_t C, int64_t W, Sequences seqs = {});

}  // namespace linattn::cpu
