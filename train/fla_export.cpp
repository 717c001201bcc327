#include "train/fla_export.h"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "data/json.h"

namespace linattn {

namespace {

bool is_conv(const std::string& name) {
  const std::string tail = "_conv1d.weight";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// The shortest decimal that reads back as v (JSON has no 1.0e-06 vs 1e-06 question).
std::string number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // a float field stays a float
  return s;
}
std::string integer(int64_t v) { return std::to_string(v); }
std::string boolean(bool v) { return v ? "true" : "false"; }
std::string text(const std::string& v) { return data::json_quote(v); }

// An ordered JSON object written one field at a time.
class Object {
 public:
  void add(const std::string& key, const std::string& json_value) { fields_.emplace_back(key, json_value); }
  std::string str(const std::string& indent = "") const {
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i)
      out += (i ? ",\n" : "\n") + indent + "  " + data::json_quote(fields_[i].first) + ": " + fields_[i].second;
    return out + "\n" + indent + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

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
std::string attn_specs(const ModelConfig& m) {
  std::map<std::tuple<int64_t, int64_t, int64_t, double>, std::vector<int64_t>> groups;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    if (l.mixer == MixerKind::attention)
      groups[{l.num_heads, l.num_kv_heads, l.window_size, l.rope_theta}].push_back(int64_t(i));
  }
  std::vector<std::string> specs;
  for (const auto& [key, layers] : groups) {
    const auto& [heads, kv_heads, window, theta] = key;
    std::string list = "[";
    for (size_t j = 0; j < layers.size(); ++j) list += (j ? ", " : "") + integer(layers[j]);
    Object spec;
    spec.add("layers", list + "]");
    spec.add("num_heads", integer(heads));
    spec.add("num_kv_heads", integer(kv_heads));
    spec.add("qkv_bias", "false");
    spec.add("window_size", window > 0 ? integer(window) : "null");  // null: global attention
    spec.add("rope_theta", number(theta));
    specs.push_back(spec.str("    "));
  }
  if (specs.size() == 1) return specs[0];
  std::string out = "[";
  for (size_t j = 0; j < specs.size(); ++j) out += (j ? ", " : "") + specs[j];
  return out + "]";
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

  Object c;
  c.add("model_type", text(fla->model_type));
  c.add("architectures", "[" + text(fla->architecture) + "]");
  c.add("vocab_size", integer(m.vocab_size));
  c.add("hidden_size", integer(m.hidden_size));
  c.add("num_hidden_layers", integer(m.num_hidden_layers));
  c.add("num_heads", integer(H));
  c.add("hidden_ratio", number(m.hidden_ratio));
  c.add("intermediate_size", integer(m.resolved_intermediate_size()));
  c.add("hidden_act", text("swish"));
  c.add("norm_eps", number(m.norm_eps));
  c.add("tie_word_embeddings", boolean(m.tie_word_embeddings));
  c.add("initializer_range", number(m.initializer_range));
  c.add("fuse_cross_entropy", "true");
  c.add("torch_dtype", text("float32"));
  switch (kind) {
    case MixerKind::gla:
      c.add("expand_k", number(m.resolved_expand_k(kind)));
      c.add("expand_v", number(m.expand_v));
      c.add("num_kv_heads", "null");
      c.add("feature_map", "null");
      c.add("use_short_conv", "false");
      c.add("use_output_gate", "true");
      c.add("use_gk", "true");
      c.add("use_gv", "false");
      c.add("clamp_min", "null");
      c.add("elementwise_affine", "true");
      c.add("attn_mode", text("chunk"));
      break;
    case MixerKind::deltanet:
      c.add("expand_k", number(m.resolved_expand_k(kind)));
      c.add("expand_v", number(m.expand_v));
      c.add("use_gate", "false");
      c.add("use_short_conv", boolean(m.use_short_conv));
      c.add("conv_size", integer(m.conv_size));
      c.add("use_beta", "true");
      c.add("use_output_norm", "true");
      c.add("qk_norm", text("l2"));
      c.add("qk_activation", text("silu"));
      c.add("allow_neg_eigval", "false");
      c.add("attn_mode", text("chunk"));
      break;
    case MixerKind::gated_deltanet:
      c.add("head_dim", integer(key_dim / H));
      c.add("expand_v", number(double(value_dim) / double(key_dim)));
      c.add("num_v_heads", "null");
      c.add("use_gate", "true");
      c.add("use_short_conv", boolean(m.use_short_conv));
      c.add("conv_size", integer(m.conv_size));
      c.add("allow_neg_eigval", "false");
      c.add("attn_mode", text("chunk"));
      break;
    case MixerKind::linear_attn:
      c.add("expand_k", number(m.resolved_expand_k(kind)));
      c.add("expand_v", number(m.expand_v));
      c.add("num_kv_heads", "null");
      c.add("feature_map", text(m.feature_map == "elu1" ? "elu" : m.feature_map));  // fla's 'elu' is elu(x) + 1
      c.add("tie_feature_map_qk", "false");
      c.add("norm_q", "false");
      c.add("norm_k", "false");
      c.add("norm_feature_map", "false");
      c.add("elementwise_affine", "true");
      c.add("attn_mode", text("chunk"));
      break;
    case MixerKind::attention:
      c.add("num_kv_heads", integer(m.layers[0].num_kv_heads));
      c.add("qkv_bias", "false");
      c.add("qk_norm", "false");
      c.add("window_size", m.layers[0].window_size > 0 ? integer(m.layers[0].window_size) : "null");
      c.add("rope_theta", number(m.layers[0].rope_theta));
      break;
    case MixerKind::retnet: break;
  }
  if (first_linear && any_attention) {
    c.add("attn", attn_specs(m));
  } else if (first_linear) {
    c.add("attn", "null");
  }
  out.json = c.str() + "\n";
  out.model_type = fla->model_type;
  return out;
}

}  // namespace linattn
