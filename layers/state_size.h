// The state a model carries from one token to the next when it generates: what the mixers must
// keep per sequence after T tokens, in scalars (multiply by the dtype's size for bytes).
#pragma once

#include <cstdint>

#include "layers/model_config.h"

namespace linattn {

// One layer's state after T tokens, as its mixer's descriptor (layers/mixers/) counts it: a linear
// mixer's dk x dv matrix per head whatever T (plus what else it keeps: a normalizer, the short
// convolutions' last inputs), attention's key and value cache of min(T, window) positions.
int64_t layer_state_size(const ModelConfig& c, const LayerSpec& layer, int64_t T);
// The sum over c.layers (resolved).
int64_t state_size(const ModelConfig& c, int64_t T);

}  // namespace linattn
