// Token-mixer layers (fla's layer designs, shared/design/ops.md): linear attention, GLA, RetNet,
// DeltaNet, Gated DeltaNet and softmax attention. Each maps x [B, T, hidden] to [B, T, hidden].
#pragma once

#include <memory>

#include "autograd/decoding.h"
#include "autograd/segments.h"
#include "layers/modules.h"
#include "layers/model_config.h"

namespace linattn {

// Decoding (layers/decoder.h, docs/decoding.md): one layer's state between calls, for a batch of
// sequences at the same position. Each mixer uses the members it needs; a fresh state is all undefined.
struct MixerState {
  Tensor h;                       // linear mixers: the recurrent state [B, H, dk, dv]
  Tensor z;                       // normalized linear attention: the normalizer state [B, H, dk]
  Tensor q_conv, k_conv, v_conv;  // short convolutions: the last W-1 inputs [B, W-1, channels]
  ops::KVCache kv;                // softmax attention: keys and values
  size_t bytes() const;           // memory held
};

class MixerLayer {
 public:
  virtual ~MixerLayer() = default;
  // segments: the sequences of the batch (autograd/segments.h); empty = its rows.
  virtual Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const = 0;
  // FLOPs of the token mixing itself (not the projections), forward + backward, per token, for
  // sequences of T tokens. Used for MFU next to the 6N of the matrix products.
  virtual double mixing_flops_per_token(int64_t T) const = 0;
  // forward() of the tokens at positions pos .. pos + T - 1 of sequences whose earlier tokens left
  // `state` (fresh at pos 0), which it carries on. Records no gradients.
  virtual Variable decode(const Parameters& p, const Variable& x, MixerState& state, int64_t pos) const;
};

// prefix: e.g. "model.layers.3.attn"; std: the init stddev; out_std: the stddev of the output
// projection (scaled by 1/sqrt(2 num_layers)).
std::unique_ptr<MixerLayer> make_mixer(Parameters& p, const std::string& prefix, const ModelConfig& config,
                                       const LayerSpec& spec, double std, double out_std);

}  // namespace linattn
