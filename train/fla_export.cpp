#include "train/fla_export.h"

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "data/json.h"
#include "layers/mixer.h"

namespace linattn {

namespace {

// A short convolution's weight: DeltaNet's q_conv1d.weight, ..., Mamba2's conv1d.weight.
bool is_conv(const std::string& name) {
  const std::string tail = "conv1d.weight";
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

// One field's value as JSON.
std::string json(const FlaValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using V = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<V, std::nullptr_t>) return "null";
        else if constexpr (std::is_same_v<V, bool>) return boolean(x);
        else if constexpr (std::is_same_v<V, int64_t>) return integer(x);
        else if constexpr (std::is_same_v<V, double>) return number(x);
        else return text(x);
      },
      v);
}

// The attention layers grouped by their settings: fla's `attn` is one spec (or a list of them) of
// {layers, num_heads, num_kv_heads, window_size, rope_theta}.
std::string attn_specs(const ModelConfig& m) {
  std::map<std::tuple<int64_t, int64_t, int64_t, double>, std::vector<int64_t>> groups;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    if (mixer_descriptor(l.mixer).attention)
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
    if (mixer_descriptor(l.mixer).attention) {
      any_attention = true;
      continue;
    }
    if (!first_linear) {
      first_linear = i;
      continue;
    }
    const LayerSpec& f = m.layers[*first_linear];
    if (l.mixer != f.mixer)
      problem("layer " + std::to_string(*first_linear) + " is " + f.mixer + " but layer " +
              std::to_string(i) + " is " + l.mixer + ": an fla model has one linear mixer (and "
              "softmax attention at the layers of its 'attn')");
    else if (l.num_heads != f.num_heads)
      problem("layers " + std::to_string(*first_linear) + " and " + std::to_string(i) + " give " + f.mixer +
              " different head counts (" + std::to_string(f.num_heads) + ", " + std::to_string(l.num_heads) +
              "): fla's config has one num_heads for its linear layers");
  }
  // The mixer fla's model is named after: the linear one, or attention when every layer is.
  const LayerSpec& spec = m.layers[first_linear.value_or(0)];
  const MixerDescriptor& kind = mixer_descriptor(spec.mixer);
  const int64_t H = spec.num_heads;
  if (kind.fla_model_type.empty()) problem(kind.fla_unsupported);
  if (kind.fla_problems)
    for (const std::string& p : kind.fla_problems(m, spec)) problem(p);
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
  c.add("model_type", text(kind.fla_model_type));
  c.add("architectures", "[" + text(kind.fla_architecture) + "]");
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
  for (const auto& [key, value] : kind.fla_fields(m, spec)) c.add(key, json(value));
  if (first_linear && any_attention) {
    c.add("attn", attn_specs(m));
  } else if (first_linear) {
    c.add("attn", "null");
  }
  out.json = c.str() + "\n";
  out.model_type = kind.fla_model_type;
  return out;
}

}  // namespace linattn
