#include "layers/state_size.h"

#include "layers/mixer.h"

namespace linattn {

int64_t layer_state_size(const ModelConfig& c, const LayerSpec& layer, int64_t T) {
  return mixer_descriptor(layer.mixer).state_size(c, layer, T);
}

int64_t state_size(const ModelConfig& c, int64_t T) {
  int64_t total = 0;
  for (const LayerSpec& l : c.layers) total += layer_state_size(c, l, T);
  return total;
}

}  // namespace linattn
