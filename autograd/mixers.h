// Token mixers as autograd ops: one tape node each, whose backward is the hand-derived chunkwise
// (or recurrent) backward kernel. Layout [B, T, H, D]; states [B, H, dk, dv]; see
// shared/design/ops.md. Every op validates its inputs (shapes, gate and beta ranges, NaN) and
// throws a linattn::Error that names the op, the input and the offending value.
#pragma once

#include <string>

#include "autograd/segments.h"
#include "autograd/variable.h"
#include "kernels/op_types.h"

namespace linattn::ops {

enum class MixerForm { chunk, recurrent };

struct MixerOptions {
  double scale = 0;          // 0 = dk^-1/2
  int64_t chunk_size = 64;   // chunk form only
  MixerForm form = MixerForm::chunk;
  const Segments* segments = nullptr;  // the batch's sequences (segments.h); nullptr = its rows
  // The final states ht (and zt); false: MixerOutput's ht and zt are undefined and the kernels may
  // skip them (training, where nothing reads them).
  bool final_state = true;
};

// o: [B, T, H, dv]; ht: the final state [B, H, dk, dv] (zt: [B, H, dk], normalized linear attention only).
struct MixerOutput {
  Variable o;
  Variable ht;
  Variable zt;
};

// Linear attention with feature map phi on q and k; h0 (and z0 when normalized) optional.
MixerOutput linear_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& h0,
                             FeatureMap phi, bool normalize, const MixerOptions& options = {},
                             const Variable& z0 = {});
// GLA with log-gate g [B, T, H, dk], g <= 0.
MixerOutput gla(const Variable& q, const Variable& k, const Variable& v, const Variable& g, const Variable& h0,
                const MixerOptions& options = {});
// DeltaNet with beta [B, T, H] in (0, 1); q and k are used as given (the layer L2-normalizes them).
MixerOutput deltanet(const Variable& q, const Variable& k, const Variable& v, const Variable& beta,
                     const Variable& h0, const MixerOptions& options = {});
// Gated DeltaNet: DeltaNet with a log-decay a [B, T, H], a <= 0.
MixerOutput gated_deltanet(const Variable& q, const Variable& k, const Variable& v, const Variable& beta,
                           const Variable& a, const Variable& h0, const MixerOptions& options = {});

// Causal softmax attention: q [B, T, H, dk], k [B, T, Hkv, dk], v [B, T, Hkv, dv]; window 0 = global.
// A query sees the keys of its own sequence only.
Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t window, double scale = 0,
                   const Segments& segments = {});
// Rotary position embedding on x [B, T, H, d] (d even), positions offset .. offset + T - 1; with
// segments, positions restart from 0 at each sequence start inside a row.
Variable rope(const Variable& x, double theta = 10000.0, int64_t offset = 0, const Segments& segments = {});

// The ops above as entries of the table of mixer ops (autograd/mixer_ops.h): their inputs, how to
// call them, the backend entries they run.
struct MixerOpDescriptor;
extern const MixerOpDescriptor linear_attn_op, gla_op, deltanet_op, gated_deltanet_op, attention_op;

}  // namespace linattn::ops
