// The state a model carries from one token to the next when it generates: what the mixers must
// keep per sequence after T tokens, in scalars (multiply by the dtype's size for bytes).
#pragma once

#include <cstdint>

#include "layers/model_config.h"

namespace linattn {

// One layer's state after T tokens:
//   linear mixers (linear attention, GLA, RetNet, DeltaNet, Gated DeltaNet): per head a dk x dv
//     matrix, H (key_dim/H)(value_dim/H) = key_dim value_dim / H, whatever T; normalized linear
//     attention adds its key_dim normalizer; DeltaNet's short convolutions keep their last
//     conv_size - 1 inputs of q, k and v;
//   attention: the key and value cache, 2 x min(T, window_size or T) x num_kv_heads x head_dim.
int64_t layer_state_size(const ModelConfig& c, const LayerSpec& layer, int64_t T);
// The sum over c.layers (resolved).
int64_t state_size(const ModelConfig& c, int64_t T);

}  // namespace linattn
