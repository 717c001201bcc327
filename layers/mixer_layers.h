// Token-mixer layers (fla's layer designs, shared/design/ops.md): linear attention, GLA, RetNet,
// DeltaNet, Gated DeltaNet and softmax attention. Each maps x [B, T, hidden] to [B, T, hidden].
#pragma once

#include <memory>

#include "autograd/segments.h"
#include "layers/modules.h"
#include "layers/model_config.h"

namespace linattn {

class MixerLayer {
 public:
  virtual ~MixerLayer() = default;
  // segments: the sequences of the batch (autograd/segments.h); empty = its rows.
  virtual Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const = 0;
  // FLOPs of the token mixing itself (not the projections), forward + backward, per token, for
  // sequences of T tokens. Used for MFU next to the 6N of the matrix products.
  virtual double mixing_flops_per_token(int64_t T) const = 0;
};

// prefix: e.g. "model.layers.3.attn"; std: the init stddev; out_std: the stddev of the output
// projection (scaled by 1/sqrt(2 num_layers)).
std::unique_ptr<MixerLayer> make_mixer(Parameters& p, const std::string& prefix, const ModelConfig& config,
                                       const LayerSpec& spec, double std, double out_std);

}  // namespace linattn
