#include "layers/model_config.h"

#include <cmath>

#include "layers/mixer.h"

namespace linattn {

int64_t ModelConfig::resolved_intermediate_size() const {
  if (mlp == Mlp::none) return 0;
  if (intermediate_size > 0) return intermediate_size;
  int64_t raw = int64_t(std::ceil(hidden_ratio * double(hidden_size) * 2.0 / 3.0));
  return (raw + 255) / 256 * 256;
}

double ModelConfig::resolved_expand_k(const std::string& m) const {
  return expand_k > 0 ? expand_k : mixer_descriptor(m).default_expand_k;
}

LayerSpec ModelConfig::default_layer() const {
  LayerSpec l;
  l.mixer = mixer;
  l.num_heads = num_heads;
  l.num_kv_heads = num_kv_heads;
  l.window_size = window_size;
  l.rope_theta = rope_theta;
  return l;
}

void resolve_layers(ModelConfig& c, const std::optional<AttnBlock>& attn,
                    const std::optional<std::vector<LayerSpec>>& layers) {
  const int64_t L = c.num_hidden_layers;
  c.layers.assign(size_t(L), c.default_layer());
  if (attn) {
    if (!attn->layers && !attn->every) throw ScheduleError("attn", "the 'attn' block needs 'layers: [i, j, ...]' or 'every: N'");
    std::vector<int64_t> picked;
    if (attn->layers) {
      for (size_t j = 0; j < attn->layers->size(); ++j) {
        int64_t i = (*attn->layers)[j];
        if (i < 0 || i >= L)
          throw ScheduleError("attn.layers." + std::to_string(j),
                              "layer index " + std::to_string(i) + " is out of range: num_hidden_layers is " +
                                  std::to_string(L) + " (indices 0.." + std::to_string(L - 1) + ")");
        picked.push_back(i);
      }
    }
    if (attn->every) {
      int64_t every = *attn->every;
      if (every < 1) throw ScheduleError("attn.every", "'every' must be at least 1");
      for (int64_t i = every - 1; i < L; i += every) picked.push_back(i);
    }
    for (int64_t i : picked) c.layers[size_t(i)] = attn->spec;
  }
  if (layers) {
    if (int64_t(layers->size()) != L)
      throw ScheduleError("layers", "'layers' has " + std::to_string(layers->size()) +
                                        (layers->size() == 1 ? " entry" : " entries") + " but num_hidden_layers is " +
                                        std::to_string(L));
    c.layers = *layers;
  }
  // Attention splits hidden_size into its heads (checked with num_heads); the linear mixers split
  // their key and value dims.
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& l = c.layers[i];
    const MixerDescriptor* m = find_mixer(l.mixer);
    if (!m) {
      std::string known;
      for (const MixerDescriptor* d : all_mixers()) known += (known.empty() ? "" : ", ") + d->name;
      throw ScheduleError("", "layer " + std::to_string(i) + ": unknown mixer '" + l.mixer + "' (known: " + known + ")");
    }
    if (m->config_problem)
      if (std::string problem = m->config_problem(c, l); !problem.empty()) throw ScheduleError("", problem);
    if (m->attention) continue;
    int64_t key_dim = int64_t(std::llround(c.resolved_expand_k(l.mixer) * double(c.hidden_size)));
    int64_t value_dim = int64_t(std::llround(c.expand_v * double(c.hidden_size)));
    if (key_dim % l.num_heads || value_dim % l.num_heads)
      throw ScheduleError("", "the " + l.mixer + " layers' key dim (" +
                                  std::to_string(key_dim) + ") and value dim (" + std::to_string(value_dim) +
                                  ") must be divisible by num_heads (" + std::to_string(l.num_heads) +
                                  "): adjust expand_k / expand_v or num_heads");
  }
}

}  // namespace linattn
