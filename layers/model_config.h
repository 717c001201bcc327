// The model's shape: sizes, the default mixer and one resolved LayerSpec per layer. Filled in by
// the run configuration (train/config.h reads it from YAML) or by hand (tests, tools).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace linattn {

// How Gated DeltaNet makes its per-head log-decay a from x:
// fla:        a = -exp(A_log) * softplus(a_proj(x) + dt_bias)   (fla's GatedDeltaNet; parameters A_log, dt_bias)
// logsigmoid: a = logsigmoid(a_proj(x) + a_proj.bias)            (linattn's first form; parameter a_proj.bias)
// A config without the key gets fla; a checkpoint whose saved config lacks it was written with
// logsigmoid (train/checkpoint.h keeps it so).
enum class GdnDecay { fla, logsigmoid };
const char* gdn_decay_name(GdnDecay d);

// One layer's token mixer, resolved from the default mixer, the `attn` block and `layers`.
// `mixer` names a mixer of the registry (layers/mixer.h).
struct LayerSpec {
  std::string mixer = "gla";
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // attention only
  int64_t window_size = 0;   // attention only; 0 = global
  double rope_theta = 10000.0;
};

struct ModelConfig {
  int64_t vocab_size = 257;
  int64_t hidden_size = 256;
  int64_t num_hidden_layers = 4;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 0;   // 0 = num_heads
  double expand_k = -1;       // -1 = the mixer's default (GLA 0.5, others 1)
  double expand_v = 1.0;
  double hidden_ratio = 4.0;
  int64_t intermediate_size = 0;  // 0 = hidden_ratio * hidden_size * 2/3 rounded up to a multiple of 256
  double norm_eps = 1e-6;
  bool use_short_conv = true;  // DeltaNet / Gated DeltaNet
  GdnDecay gated_deltanet_decay = GdnDecay::fla;
  int64_t conv_size = 4;
  int64_t state_size = 64;  // mamba2: N, the dim of B and C (the state per head is N x head dim)
  int64_t n_groups = 1;     // mamba2: groups of heads sharing B and C
  bool tie_word_embeddings = false;
  double initializer_range = 0.02;
  std::string mixer = "gla";              // the default mixer of every layer (layers/mixer.h)
  std::string feature_map = "elu1";       // linear_attn: identity | elu1 | relu
  bool normalize = false;                 // linear_attn: the normalized form
  int64_t chunk_size = 64;                // linear mixers' training chunk
  int64_t window_size = 0;                // attention mixer default; 0 = global
  double rope_theta = 10000.0;
  std::vector<LayerSpec> layers;  // resolved, one per layer

  int64_t resolved_intermediate_size() const;
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
