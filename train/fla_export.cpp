#include "train/fla_export.h"

#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

namespace linattn {

namespace {

bool is_conv(const std::string& name) {
  const std::string tail = "_conv1d.weight";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// config.json keeps its fields in the order they are added, as HF writes them.
using Json = nlohmann::ordered_json;

struct FlaModel {
  const char* model_type;
  const char* architecture;
};

std::optional<FlaModel> fla_model(MixerKind m) {
  switch (m) {
    case MixerKind::gla: return FlaModel{"gla", "GLAForCausalLM"};
    case MixerKind::deltanet: return FlaModel{"delta_net", "DeltaNetForCausalLM"};
    case MixerKind::gated_deltanet: return FlaModel{"gated_deltanet", "GatedDeltaNetForCausalLM"};
    case MixerKind::linear_attn: return FlaModel{"linear_attn", "LinearAttentionForCausalLM"};
    case MixerKind::attention: return FlaModel{"transformer", "TransformerForCausalLM"};
    case MixerKind::retnet: return std::nullopt;
  }
  return std::nullopt;
}

int64_t dim(double expand, int64_t hidden) { return int64_t(std::llround(expand * double(hidden))); }

// The attention layers grouped by their settings: fla's `attn` is one spec (or a list of them) of
// {layers, num_heads, num_kv_heads, window_size, rope_theta}.
Json attn_specs(const ModelConfig& m) {
  std::map<std::tuple<int64_t, int64_t, int64_t, double>, std::vector<int64_t>> groups;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    if (l.mixer == MixerKind::attention)
      groups[{l.num_heads, l.num_kv_heads, l.window_size, l.rope_theta}].push_back(int64_t(i));
  }
  Json specs = Json::array();
  for (const auto& [key, layers] : groups) {
    const auto& [heads, kv_heads, window, theta] = key;
    Json spec;
    spec["layers"] = layers;
    spec["num_heads"] = heads;
    spec["num_kv_heads"] = kv_heads;
    spec["qkv_bias"] = false;
    spec["window_size"] = window > 0 ? Json(window) : Json(nullptr);  // null: global attention
    spec["rope_theta"] = theta;
    specs.push_back(spec);
  }
  return specs.size() == 1 ? specs[0] : specs;
}

}  // namespace

Shape fla_shape(const std::string& name, const Shape& ours) {
  return is_conv(name) && ours.ndim() == 2 ? Shape{ours[0], 1, ours[1]} : ours;
}

Shape our_shape(const std::string& name, const Shape& theirs) {
  return is_conv(name) && theirs.ndim() == 3 && theirs[1] == 1 ? Shape{theirs[0], theirs[2]} : theirs;
}

FlaConfig fla_config(const ModelConfig& m) {
  FlaConfig out;
  auto problem = [&](const std::string& s) { out.problems.push_back(s); };

  // The linear mixer: one kind and one head count across the model.
  std::optional<size_t> first_linear;
  bool any_attention = false;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    if (l.mixer == MixerKind::attention) {
      any_attention = true;
      continue;
    }
    if (!first_linear) {
      first_linear = i;
      continue;
    }
    const LayerSpec& f = m.layers[*first_linear];
    if (l.mixer != f.mixer)
      problem("layer " + std::to_string(*first_linear) + " is " + mixer_name(f.mixer) + " but layer " +
              std::to_string(i) + " is " + mixer_name(l.mixer) + ": an fla model has one linear mixer (and "
              "softmax attention at the layers of its 'attn')");
    else if (l.num_heads != f.num_heads)
      problem("layers " + std::to_string(*first_linear) + " and " + std::to_string(i) + " give " + mixer_name(f.mixer) +
              " different head counts (" + std::to_string(f.num_heads) + ", " + std::to_string(l.num_heads) +
              "): fla's config has one num_heads for its linear layers");
  }
  const MixerKind kind = first_linear ? m.layers[*first_linear].mixer : MixerKind::attention;
  const int64_t H = first_linear ? m.layers[*first_linear].num_heads : m.layers[0].num_heads;
  const std::optional<FlaModel> fla = fla_model(kind);
  if (!fla)
    problem("retnet has no fla equivalent: fla's RetNet applies rotary position embedding to q and k inside its "
            "retention layers, linattn's RetNet does not");
  if (kind == MixerKind::linear_attn && m.normalize)
    problem("linear_attn with normalize: true is not exported: the normalized form's epsilon is not the one of "
            "fla's norm_feature_map; train with normalize: false");
  if (kind == MixerKind::gated_deltanet && m.gated_deltanet_decay != GdnDecay::fla)
    problem("gated_deltanet with gated_deltanet_decay: logsigmoid has no fla equivalent (fla's decay is "
            "-exp(A_log) * softplus(a_proj(x) + dt_bias)); train with gated_deltanet_decay: fla");
  const int64_t key_dim = dim(m.resolved_expand_k(kind), m.hidden_size), value_dim = dim(m.expand_v, m.hidden_size);
  if (kind == MixerKind::gated_deltanet) {
    // fla derives the value head dim as int(head_dim * expand_v): it must come out exact.
    const int64_t head_dim = key_dim / H, head_v_dim = value_dim / H;
    if (double(head_dim) * (double(value_dim) / double(key_dim)) != double(head_v_dim))
      problem("gated_deltanet's value head dim " + std::to_string(head_v_dim) + " is not exactly head_dim " +
              std::to_string(head_dim) + " x expand_v in floating point, as fla computes it");
  }
  if (!first_linear) {
    // Every layer attention: fla's Transformer, whose layers share one setting.
    for (const LayerSpec& l : m.layers)
      if (l.num_heads != m.layers[0].num_heads || l.num_kv_heads != m.layers[0].num_kv_heads ||
          l.window_size != m.layers[0].window_size || l.rope_theta != m.layers[0].rope_theta) {
        problem("the attention layers differ in heads, window or rope_theta: fla's Transformer has one setting "
                "for all of its layers");
        break;
      }
  }
  if (!out.problems.empty()) return out;

  Json c;
  c["model_type"] = fla->model_type;
  c["architectures"] = Json::array({fla->architecture});
  c["vocab_size"] = m.vocab_size;
  c["hidden_size"] = m.hidden_size;
  c["num_hidden_layers"] = m.num_hidden_layers;
  c["num_heads"] = H;
  c["hidden_ratio"] = m.hidden_ratio;
  c["intermediate_size"] = m.resolved_intermediate_size();
  c["hidden_act"] = "swish";
  c["norm_eps"] = m.norm_eps;
  c["tie_word_embeddings"] = m.tie_word_embeddings;
  c["initializer_range"] = m.initializer_range;
  c["fuse_cross_entropy"] = true;
  c["torch_dtype"] = "float32";
  switch (kind) {
    case MixerKind::gla:
      c["expand_k"] = m.resolved_expand_k(kind);
      c["expand_v"] = m.expand_v;
      c["num_kv_heads"] = nullptr;
      c["feature_map"] = nullptr;
      c["use_short_conv"] = false;
      c["use_output_gate"] = true;
      c["use_gk"] = true;
      c["use_gv"] = false;
      c["clamp_min"] = nullptr;
      c["elementwise_affine"] = true;
      c["attn_mode"] = "chunk";
      break;
    case MixerKind::deltanet:
      c["expand_k"] = m.resolved_expand_k(kind);
      c["expand_v"] = m.expand_v;
      c["use_gate"] = false;
      c["use_short_conv"] = m.use_short_conv;
      c["conv_size"] = m.conv_size;
      c["use_beta"] = true;
      c["use_output_norm"] = true;
      c["qk_norm"] = "l2";
      c["qk_activation"] = "silu";
      c["allow_neg_eigval"] = false;
      c["attn_mode"] = "chunk";
      break;
    case MixerKind::gated_deltanet:
      c["head_dim"] = key_dim / H;
      c["expand_v"] = double(value_dim) / double(key_dim);
      c["num_v_heads"] = nullptr;
      c["use_gate"] = true;
      c["use_short_conv"] = m.use_short_conv;
      c["conv_size"] = m.conv_size;
      c["allow_neg_eigval"] = false;
      c["attn_mode"] = "chunk";
      break;
    case MixerKind::linear_attn:
      c["expand_k"] = m.resolved_expand_k(kind);
      c["expand_v"] = m.expand_v;
      c["num_kv_heads"] = nullptr;
      c["feature_map"] = m.feature_map == "elu1" ? "elu" : m.feature_map;  // fla's 'elu' is elu(x) + 1
      c["tie_feature_map_qk"] = false;
      c["norm_q"] = false;
      c["norm_k"] = false;
      c["norm_feature_map"] = false;
      c["elementwise_affine"] = true;
      c["attn_mode"] = "chunk";
      break;
    case MixerKind::attention:
      c["num_kv_heads"] = m.layers[0].num_kv_heads;
      c["qkv_bias"] = false;
      c["qk_norm"] = false;
      c["window_size"] = m.layers[0].window_size > 0 ? Json(m.layers[0].window_size) : Json(nullptr);
      c["rope_theta"] = m.layers[0].rope_theta;
      break;
    case MixerKind::retnet: break;
  }
  if (first_linear && any_attention) {
    c["attn"] = attn_specs(m);
  } else if (first_linear) {
    c["attn"] = nullptr;
  }
  out.json = c.dump(2) + "\n";
  out.model_type = fla->model_type;
  return out;
}

}  // namespace linattn
