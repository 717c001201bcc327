// A token mixer in one place (docs/mixers.md): each mixer is one file of layers/mixers/ holding its
// layer (x [B, T, hidden] -> [B, T, hidden], fla's layer design, shared/design/ops.md) and its
// descriptor: its name, defaults, decoding-state size, kernels and fla export. The model, the config
// reader, the exporter, the state-size report and the tools look mixers up here; none of them
// switches on a mixer's name. A new mixer is its file plus one line in layers/mixers/registry.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "autograd/mixer_ops.h"
#include "autograd/segments.h"
#include "core/config_key.h"
#include "layers/model_config.h"
#include "layers/modules.h"

namespace linattn {

// Decoding (layers/decoder.h, docs/decoding.md): one layer's state between calls, for a batch of
// sequences at the same position, as named tensors that the layer's decode() reads and replaces
// ("h": a linear mixer's recurrent state [B, H, dk, dv], "k_cache": attention's keys, ...). A fresh
// state is empty.
struct MixerState {
  std::map<std::string, Tensor> tensors;
  size_t bytes() const;  // memory held
};

class MixerLayer {
 public:
  virtual ~MixerLayer() = default;
  // segments: the sequences of the batch (autograd/segments.h); empty = its rows.
  Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const {
    return mix(p, x, nullptr, 0, segments);
  }
  // forward() of the tokens at positions pos .. pos + T - 1 of sequences whose earlier tokens left
  // `state` (fresh at pos 0), which it carries on. Records no gradients.
  Variable decode(const Parameters& p, const Variable& x, MixerState& state, int64_t pos) const {
    return mix(p, x, &state, pos, {});
  }
  // FLOPs of the token mixing itself (not the projections), forward + backward, per token, for
  // sequences of T tokens. Used for MFU next to the 6N of the matrix products.
  virtual double mixing_flops_per_token(int64_t T) const = 0;

 protected:
  // Both: in training s is nullptr and pos 0; when decoding, s is the layer's state.
  virtual Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t pos,
                       const ops::Segments& segments) const = 0;
};

// One field of fla's config.json (null, bool, integer, float or string).
using FlaValue = std::variant<std::nullptr_t, bool, int64_t, double, std::string>;
using FlaFields = std::vector<std::pair<std::string, FlaValue>>;

struct MixerDescriptor {
  std::string name;     // as configs write it: "gla"
  std::string summary;  // one line for the docs and --help
  double default_expand_k = 1.0;  // the key dim / hidden_size when the config leaves expand_k out
  // The mixer's own keys of the config's model section (README's config reference lists them), and
  // what is wrong with a layer of it in model c beyond what one key's bound says ("" = nothing).
  std::vector<ConfigKey<ModelConfig>> config_keys;
  std::string (*config_problem)(const ModelConfig& c, const LayerSpec& spec) = nullptr;
  // Softmax attention: the layer's heads split hidden_size (with num_kv_heads, window_size and
  // rope_theta of LayerSpec) instead of the expanded key and value dims.
  bool attention = false;

  // The layer, its parameters added to p under `prefix` ("model.layers.3.attn"); std: the init
  // stddev; out_std: the output projection's (scaled by 1/sqrt(2 num_layers)).
  std::unique_ptr<MixerLayer> (*make)(Parameters& p, const std::string& prefix, const ModelConfig& c,
                                      const LayerSpec& spec, double std, double out_std) = nullptr;
  // Scalars of decoding state one sequence holds after T tokens (layers/state_size.h).
  int64_t (*state_size)(const ModelConfig& c, const LayerSpec& spec, int64_t T) = nullptr;
  // The token-mixer op the layer runs (autograd/mixer_ops.h): its backend entries say which devices
  // can run the layer.
  const ops::MixerOpDescriptor* op = nullptr;

  // fla (train/fla_export.h): the model_type and architecture of fla's model of this mixer ("" when
  // fla has none: fla_unsupported says why), what of c fla cannot express (one sentence each), and
  // this mixer's own fields of config.json in fla's order.
  std::string fla_model_type, fla_architecture, fla_unsupported;
  std::vector<std::string> (*fla_problems)(const ModelConfig& c, const LayerSpec& spec) = nullptr;
  FlaFields (*fla_fields)(const ModelConfig& c, const LayerSpec& spec) = nullptr;
  // The layout of fla's model of this mixer: whether its blocks have an MLP (Mamba2ForCausalLM's are
  // norm + mixer only) and its config takes softmax attention layers (`attn`); and fla's names for
  // our parameter `ours` of c where they are not ours (Mamba2's backbone.layers.N.mixer; one
  // parameter may be written under two names), nullptr: ours are fla's.
  bool fla_mlp = true, fla_attention = true;
  std::vector<std::string> (*fla_names)(const ModelConfig& c, const std::string& ours) = nullptr;

  // The backend entries the layer's op runs that have no kernel on `device`, comma-separated; "" = none.
  std::string missing_kernels(Device device) const { return op->missing_kernels(device); }
};

// A descriptor's `make` for a layer class built as Layer(p, prefix, c, spec, std, out_std, extra...).
template <class Layer, auto... extra>
std::unique_ptr<MixerLayer> make_layer(Parameters& p, const std::string& prefix, const ModelConfig& c,
                                       const LayerSpec& spec, double std, double out_std) {
  return std::make_unique<Layer>(p, prefix, c, spec, std, out_std, extra...);
}

// A mixer's config key bound to field `field` of its settings struct S (kept in ModelConfig::settings,
// layers/model_config.h); the field's initializer is the default. Builders as for config_key:
//   setting_key("state_size", &Mamba2Settings::state_size, "...").in(1, 1024)
template <class S, class T>
ConfigKey<ModelConfig> setting_key(std::string name, T S::*field, std::string doc) {
  return config_key(std::move(name), field, std::move(doc))
      .template inside<ModelConfig>([](auto& c) -> auto& { return c.settings.template of<S>(); });
}
// The same for an enum field written as the name of its value (config_choice).
template <class S, class E>
ConfigKey<ModelConfig> setting_choice(std::string name, E S::*field, std::vector<std::pair<E, ConfigChoice>> choices,
                                      std::string doc) {
  return config_choice(std::move(name), field, std::move(choices), std::move(doc))
      .template inside<ModelConfig>([](auto& c) -> auto& { return c.settings.template of<S>(); });
}

// The value of the mixers' config key `key` in c, as config.yaml writes it ("elu1", 4, true), and
// setting it: for code that sets a mixer's option by hand (tests, tools). An unknown key throws.
ConfigValue mixer_setting(const ModelConfig& c, const std::string& key);
void set_mixer_setting(ModelConfig& c, const std::string& key, const ConfigValue& value);

// Every mixer, in the order of layers/mixers/registry.cpp.
const std::vector<const MixerDescriptor*>& all_mixers();
// The mixer named `name`, or nullptr.
const MixerDescriptor* find_mixer(const std::string& name);
// Every mixer's name, for messages.
std::vector<std::string> mixer_names();
// The mixer named `name`; throws naming the known ones.
const MixerDescriptor& mixer_descriptor(const std::string& name);

}  // namespace linattn
