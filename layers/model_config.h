// The model's shape: sizes, the default mixer and one resolved LayerSpec per layer. Filled in by
// the run configuration (train/config.h reads it from YAML) or by hand (tests, tools).
#pragma once

#include <any>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "core/error.h"

namespace linattn {

// The mixers' own settings, the values of their config keys (layers/mixer.h): one struct per kind
// of setting, declared by the mixers that read it (layers/mixers/), so that a new mixer adds no
// member to ModelConfig. A struct never written reads as its defaults (its fields' initializers).
class MixerSettings {
 public:
  template <class S>
  const S& of() const {
    auto it = values_.find(std::type_index(typeid(S)));
    if (it != values_.end()) return *std::any_cast<S>(&it->second);
    static const S defaults{};
    return defaults;
  }
  template <class S>
  S& of() {
    std::any& value = values_[std::type_index(typeid(S))];
    if (!value.has_value()) value = S{};
    return *std::any_cast<S>(&value);
  }

 private:
  std::map<std::type_index, std::any> values_;
};

// One layer's token mixer, resolved from the default mixer, the `attn` block and `layers`.
// `mixer` names a mixer of the registry (layers/mixer.h).
struct LayerSpec {
  std::string mixer = "gla";
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // attention only
  int64_t window_size = 0;   // attention only; 0 = global
  double rope_theta = 10000.0;
};

// The MLP of every block: SwiGLU (shared/design/ops.md), or none: blocks of norm + mixer only, as in
// fla's and mamba_ssm's Mamba2 models.
enum class Mlp { swiglu, none };

struct ModelConfig {
  int64_t vocab_size = 257;
  int64_t hidden_size = 256;
  int64_t num_hidden_layers = 4;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 0;   // 0 = num_heads
  double expand_k = -1;       // -1 = the mixer's default (GLA 0.5, others 1)
  double expand_v = 1.0;
  Mlp mlp = Mlp::swiglu;
  double hidden_ratio = 4.0;
  int64_t intermediate_size = 0;  // 0 = hidden_ratio * hidden_size * 2/3 rounded up to a multiple of 256
  double norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  std::string mixer = "gla";              // the default mixer of every layer (layers/mixer.h)
  int64_t chunk_size = 64;                // linear mixers' training chunk
  int64_t window_size = 0;                // attention mixer default; 0 = global
  double rope_theta = 10000.0;
  std::vector<LayerSpec> layers;  // resolved, one per layer
  MixerSettings settings;         // the mixers' own keys (feature_map, state_size, ...)

  int64_t resolved_intermediate_size() const;  // 0 without an MLP
  double resolved_expand_k(const std::string& mixer) const;
  // A layer of the default mixer with the model-wide head settings: what every layer starts from.
  LayerSpec default_layer() const;
};

// The `attn` block: attention at the listed layers and/or at every N-th layer (N-1, 2N-1, ...).
struct AttnBlock {
  std::optional<std::vector<int64_t>> layers;
  std::optional<int64_t> every;
  LayerSpec spec;  // the attention layers' settings (mixer = attention)
};

// A problem in the layer schedule, with the dotted path of the entry at fault, relative to the
// model section ("attn.layers.1", "attn", "layers", or "" for the model as a whole), so that a
// config reader can point at the line to fix.
class ScheduleError : public Error {
 public:
  ScheduleError(std::string path, const std::string& message) : Error(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Fills c.layers: every layer gets c.default_layer(), then the attn block's layers become
// attention, then `layers` (one entry per layer) replaces them all. Checks the indices, the
// entry count and that each mixer's key and value dims split into its heads; throws ScheduleError.
void resolve_layers(ModelConfig& c, const std::optional<AttnBlock>& attn,
                    const std::optional<std::vector<LayerSpec>>& layers);

}  // namespace linattn
