#include "train/fla_export.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/dataset.h"
#include "data/mapped_file.h"
#include "data/sha256.h"
#include "layers/mixer.h"
#include "train/run_data.h"

namespace linattn {

namespace {

// A short convolution's weight: DeltaNet's q_conv1d.weight, ..., Mamba2's conv1d.weight.
bool is_conv(const std::string& name) {
  const std::string tail = "conv1d.weight";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// config.json keeps its fields in the order they are added, as HF writes them.
using Json = nlohmann::ordered_json;

// One field's value as JSON.
Json json(const FlaValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

// The attention layers grouped by their settings: fla's `attn` is one spec (or a list of them) of
// {layers, num_heads, num_kv_heads, window_size, rope_theta}.
Json attn_specs(const ModelConfig& m) {
  std::map<std::tuple<int64_t, int64_t, int64_t, double>, std::vector<int64_t>> groups;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    if (mixer_descriptor(l.mixer).attention)
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

// The mixer fla's model is named after: the first linear one, or attention when every layer is.
const MixerDescriptor& fla_kind(const ModelConfig& m) {
  for (const LayerSpec& l : m.layers)
    if (!mixer_descriptor(l.mixer).attention) return mixer_descriptor(l.mixer);
  return mixer_descriptor(m.layers.at(0).mixer);
}

}  // namespace

std::vector<std::string> fla_names(const ModelConfig& m, const std::string& ours) {
  // Renamed only where fla builds the model from config.json; otherwise the names stay ours, each
  // layer's parameters under fla's names for its mixer's layer.
  const MixerDescriptor& kind = fla_kind(m);
  if (!kind.fla_names || !fla_config(m).problems.empty()) return {ours};
  return kind.fla_names(m, ours);
}

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
  if (!kind.fla_model_type.empty()) {
    const std::string fla_model = "fla's " + kind.fla_architecture;
    if (kind.fla_mlp && m.mlp == Mlp::none)
      problem(fla_model + " has a SwiGLU MLP in every block, and this model has none (mlp: none): train with "
                          "mlp: swiglu");
    if (!kind.fla_mlp && m.mlp != Mlp::none)
      problem(fla_model + "'s blocks are norm + mixer only, and this model has a SwiGLU MLP in every block: train "
                          "with mlp: none");
    if (first_linear && any_attention && !kind.fla_attention)
      problem(fla_model + " has no softmax attention layers (its config has no 'attn'), and this model has some: "
                          "an fla model of " + spec.mixer + " has " + spec.mixer + " layers only");
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
  c["model_type"] = kind.fla_model_type;
  c["architectures"] = Json::array({kind.fla_architecture});
  c["vocab_size"] = m.vocab_size;
  c["hidden_size"] = m.hidden_size;
  c["num_hidden_layers"] = m.num_hidden_layers;
  c["num_heads"] = H;
  if (kind.fla_mlp) {
    c["hidden_ratio"] = m.hidden_ratio;
    c["intermediate_size"] = m.resolved_intermediate_size();
    c["hidden_act"] = "swish";
  }
  c["norm_eps"] = m.norm_eps;
  c["tie_word_embeddings"] = m.tie_word_embeddings;
  c["initializer_range"] = m.initializer_range;
  c["fuse_cross_entropy"] = true;
  c["torch_dtype"] = "float32";
  for (const auto& [key, value] : kind.fla_fields(m, spec)) c[key] = json(value);
  if (first_linear && any_attention) {
    c["attn"] = attn_specs(m);
  } else if (first_linear && kind.fla_attention) {
    c["attn"] = nullptr;
  }
  out.json = c.dump(2) + "\n";
  out.model_type = kind.fla_model_type;
  return out;
}

TokenizerExport export_tokenizer_files(const std::string& data_path, const std::string& ckpt, const std::string& out_dir) {
  namespace fs = std::filesystem;
  TokenizerExport result;
  std::string dir;
  try {
    dir = find_run_data(data_path, ckpt, false, "");
  } catch (const Error&) {
    result.note = "the run's data folder '" + data_path + "' is not at hand, so no tokenizer.json was copied";
    return result;
  }
  const auto data = data::Dataset::open(dir, "train");
  if (data->tokenizer() != "hf") {
    result.note = "the run's tokenizer is " + data->tokenizer() + ", which has no tokenizer.json";
    return result;
  }
  const fs::path from = fs::path(dir) / data::data_tokenizer_file;
  LINATTN_REQUIRE(fs::exists(from), from.string(), ": missing: the run's data was prepared with a tokenizer.json (sha256 ",
                  data->tokenizer_sha256(), ") that linattn-data prepare keeps there; copy it back to export it");
  const std::string sha = data::sha256_hex(data::MappedFile(from.string()).text());
  LINATTN_REQUIRE(sha == data->tokenizer_sha256(), from.string(), ": sha256 ", sha, ", but the shards of ", dir,
                  " were prepared with ", data->tokenizer_sha256(), ": put the tokenizer.json they were made with there");
  for (const char* name : {data::data_tokenizer_file, data::data_tokenizer_config_file}) {
    const fs::path source = fs::path(dir) / name, target = fs::path(out_dir) / name;
    if (!fs::exists(source)) continue;
    const fs::path tmp = target.string() + ".tmp";
    std::error_code ec;
    fs::copy_file(source, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, target, ec);
    LINATTN_REQUIRE(!ec, target.string(), ": cannot write (", ec.message(), ")");
    result.copied.push_back(target.string());
  }
  return result;
}

}  // namespace linattn
