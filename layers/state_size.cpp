#include "layers/state_size.h"

#include <algorithm>
#include <cmath>

namespace linattn {

int64_t layer_state_size(const ModelConfig& c, const LayerSpec& layer, int64_t T) {
  const int64_t H = layer.num_heads;
  if (layer.mixer == MixerKind::attention) {
    const int64_t cached = layer.window_size > 0 ? std::min(T, layer.window_size) : T;
    return 2 * cached * layer.num_kv_heads * (c.hidden_size / H);
  }
  // The dims the mixer layers project to (layers/mixer_layers.cpp).
  const int64_t key_dim = std::llround(c.resolved_expand_k(layer.mixer) * double(c.hidden_size));
  const int64_t value_dim = std::llround(c.expand_v * double(c.hidden_size));
  int64_t size = key_dim * value_dim / H;
  if (layer.mixer == MixerKind::linear_attn && c.normalize) size += key_dim;
  const bool delta = layer.mixer == MixerKind::deltanet || layer.mixer == MixerKind::gated_deltanet;
  if (delta && c.use_short_conv) size += (c.conv_size - 1) * (2 * key_dim + value_dim);
  return size;
}

int64_t state_size(const ModelConfig& c, int64_t T) {
  int64_t total = 0;
  for (const LayerSpec& l : c.layers) total += layer_state_size(c, l, T);
  return total;
}

}  // namespace linattn
