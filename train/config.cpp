// The run configuration: the YAML file read, checked and written back key by key from the
// declarations in config_keys.cpp; here are only the checks that involve more than one key
// (heads that divide widths, the layer schedule, the MQAR task against the model, the products
// of sizes) and the keys with a shape of their own (model.attn, model.layers, data.mqar).
#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "train/config_keys.h"
#include "train/config_reader.h"

namespace linattn {

namespace {

// The widest of a layer's key and value dims, over every mixer, in units of hidden_size.
double widest_expand(const ModelConfig& m) { return std::max(m.expand_k > 0 ? m.expand_k : 1.0, m.expand_v); }

// About the parameter count (embedding and head; per layer the mixer's q, k, v, o and gate
// projections and the MLP), in double so that it cannot overflow.
double model_parameter_estimate(const ModelConfig& m) {
  const double h = double(m.hidden_size);
  const double mixer = h * h * (4 * widest_expand(m) + 2);
  const double mlp = 3 * h * double(m.resolved_intermediate_size());
  return double(m.vocab_size) * h * 2 + double(m.num_hidden_layers) * (mixer + mlp);
}

// A number as both YAML 1.1 (PyYAML) and 1.2 read it: 15 significant digits (every decimal written
// in a config round-trips, and 0.003 stays 0.003), with a '.' in the mantissa of an exponent form
// ("1.0e-06", not "1e-06", which YAML 1.1 reads as a string).
std::string yaml_number(double v) {
  std::string s = config_number(v);
  size_t e = s.find('e');
  if (e != std::string::npos && s.find('.') == std::string::npos) s.insert(e, ".0");
  return s;
}

template <class S>
std::vector<std::string> key_names(const std::vector<ConfigKey<S>>& keys) {
  std::vector<std::string> names;
  for (const ConfigKey<S>& k : keys) names.push_back(k.name);
  return names;
}

// ---- the layer schedule: model.attn and model.layers, read with the keys of one layer

// Reads the layer keys of `node` (an attn block or a layers entry) into `spec`; the mixer is read
// by the caller.
void read_layer_fields(const Reader& r, const YAML::Node& node, const std::string& path, const ModelConfig& mc,
                       LayerSpec& spec) {
  for (const ConfigKey<LayerSpec>& key : layer_keys())
    if (key.name != "mixer") r.read(node, path, key, spec);
  r.require(mc.hidden_size % spec.num_heads == 0, node, path, "num_heads",
            "'num_heads' must divide hidden_size (" + std::to_string(mc.hidden_size) + ")");
  r.require(spec.num_heads % spec.num_kv_heads == 0, node, path, "num_kv_heads",
            "'num_heads' (" + std::to_string(spec.num_heads) + ") must be a multiple of 'num_kv_heads' (" +
                std::to_string(spec.num_kv_heads) + ")");
}

const ConfigKey<LayerSpec>& mixer_key() {
  static const ConfigKey<LayerSpec>& key =
      *std::find_if(layer_keys().begin(), layer_keys().end(), [](const auto& k) { return k.name == "mixer"; });
  return key;
}

std::optional<AttnBlock> read_attn(const Reader& r, const YAML::Node& m, const ModelConfig& mc) {
  if (!m.IsMap() || !m["attn"]) return std::nullopt;
  YAML::Node a = m["attn"];
  std::vector<std::string> known = {"layers", "every"};
  for (const ConfigKey<LayerSpec>& key : layer_keys())
    if (key.name != "mixer") known.push_back(key.name);
  r.check_keys(a, "model.attn", known);
  AttnBlock attn;
  attn.spec = mc.default_layer();
  attn.spec.mixer = "attention";
  attn.spec.window_size = 0;  // no window_size in the attn block = global
  read_layer_fields(r, a, "model.attn", mc, attn.spec);
  if (a.IsMap() && a["layers"]) {
    YAML::Node list = a["layers"];
    if (!list.IsSequence()) r.fail(list, "model.attn.layers", "'layers' must be a list of layer indices, e.g. [1, 3]");
    attn.layers.emplace();
    for (const auto& item : list) {
      try {
        attn.layers->push_back(item.as<int64_t>());
      } catch (const YAML::Exception&) {
        r.fail(item, "model.attn.layers", "layer indices must be integers, got '" + item.as<std::string>() + "'");
      }
    }
  }
  if (a.IsMap() && a["every"])
    attn.every = std::get<int64_t>(r.value(a["every"], "model.attn.every", "every", ConfigType::integer));
  return attn;
}

std::optional<std::vector<LayerSpec>> read_layers(const Reader& r, const YAML::Node& m, const ModelConfig& mc) {
  if (!m.IsMap() || !m["layers"]) return std::nullopt;
  YAML::Node list = m["layers"];
  if (!list.IsSequence()) r.fail(list, "model.layers", "'layers' must be a list with one entry per layer");
  std::vector<LayerSpec> layers;
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node item = list[i];
    std::string path = "model.layers." + std::to_string(i);
    LayerSpec spec = mc.default_layer();
    if (item.IsScalar()) {
      r.read_node(item, path, mixer_key(), spec);
    } else {
      r.check_keys(item, path, key_names(layer_keys()));
      if (!item.IsMap() || !item["mixer"]) r.fail(item, path, "each entry of 'layers' needs a 'mixer'");
      r.read_node(item["mixer"], path + ".mixer", mixer_key(), spec);
      read_layer_fields(r, item, path, mc, spec);
    }
    layers.push_back(spec);
  }
  return layers;
}

// ---- the checks that involve more than one key, section by section

void check_model(const Reader& r, const YAML::Node& m, ModelConfig& mc) {
  r.require(mc.hidden_size % mc.num_heads == 0, m, "model", "num_heads",
            "'hidden_size' (" + std::to_string(mc.hidden_size) + ") is not divisible by 'num_heads' (" +
                std::to_string(mc.num_heads) + ")");
  if (mc.num_kv_heads == 0) mc.num_kv_heads = mc.num_heads;
  r.require(mc.num_heads % mc.num_kv_heads == 0, m, "model", "num_kv_heads",
            "'num_heads' (" + std::to_string(mc.num_heads) + ") must be a multiple of 'num_kv_heads' (" +
                std::to_string(mc.num_kv_heads) + ")");

  // The layer schedule (resolved in layers/model_config.cpp): the YAML's values, then the rules.
  std::optional<AttnBlock> attn = read_attn(r, m, mc);
  std::optional<std::vector<LayerSpec>> layers = read_layers(r, m, mc);
  try {
    resolve_layers(mc, attn, layers);
  } catch (const ScheduleError& e) {
    std::string path = e.path().empty() ? "model" : "model." + e.path();
    r.fail(node_at(m, e.path()), path, e.what());
  }

  // The sizes are bounded one by one; their products must stay countable too.
  const double params = model_parameter_estimate(mc);
  r.require(params <= kMaxElements, m, "model", "hidden_size",
            "the model would have about " + std::to_string(int64_t(params)) +
                " parameters (vocab_size x hidden_size for the embedding and head, plus num_hidden_layers x "
                "hidden_size x (intermediate and key/value dims)), more than 2^40: lower hidden_size, "
                "num_hidden_layers, vocab_size or intermediate_size");
}

void check_data(const Reader& r, const YAML::Node& m, const YAML::Node& d, Config& c) {
  // Unset, document_boundaries is cross for MQAR: one example per row, nothing to cut.
  if (c.data.source == "mqar" && !c.locations.count("data.document_boundaries"))
    c.data.document_boundaries = DocumentBoundaries::cross;
  const bool has_mqar = d && d.IsMap() && d["mqar"];
  r.require(!has_mqar || c.data.source == "mqar", d, "data", "mqar",
            "'mqar' is set but data.source is '" + c.data.source + "': set data.source: mqar to train on it");
  if (c.data.source != "mqar") return;
  const data::MqarTask& task = c.data.mqar;
  r.require(c.data.document_boundaries == DocumentBoundaries::cross, d, "data", "document_boundaries",
            "MQAR examples are one per row, with no documents inside to cut: set data.document_boundaries: cross");
  const data::MqarProblem problem = data::mqar_problem(task, c.data.seq_len);
  r.require(problem.key != "seq_len", d, "data", "seq_len", problem.message);
  r.require(problem.key.empty(), section_node(d, "mqar"), "data.mqar", problem.key, problem.message);
  r.require(task.vocab_size <= c.model.vocab_size, m, "model", "vocab_size",
            "vocab_size " + std::to_string(c.model.vocab_size) + " is smaller than the MQAR task's vocabulary " +
                std::to_string(task.vocab_size) + " (data.mqar.vocab_size, " + c.where("data.mqar.vocab_size") +
                "): set model.vocab_size to at least " + std::to_string(task.vocab_size) +
                " or lower data.mqar.vocab_size");
}

void check_train(const Reader& r, const YAML::Node& t, const YAML::Node& d, const Config& c) {
  const TrainConfig& tc = c.train;
  r.require(tc.micro_batch_size == 0 || tc.batch_size % tc.micro_batch_size == 0, t, "train", "micro_batch_size",
            "'batch_size' (" + std::to_string(tc.batch_size) + ") must be a multiple of 'micro_batch_size' (" +
                std::to_string(tc.micro_batch_size) + ")");
  r.require(tc.lr_min <= tc.lr, t, "train", "lr_min", "'lr_min' must be in [0, lr]");
  r.require(tc.max_steps > 0 || tc.max_tokens > 0 || tc.max_time > 0, t, "train", "max_steps",
            "the run has no bound: set 'max_steps', 'max_tokens' or 'max_time'");
  // Whether a GPU is there is checked when training starts (Trainer), not here; a CPU without bf16
  // products runs bf16 widened to float32 (a note at start-up).
  r.require(tc.precision == "fp32" || tc.dtype == "f32", t, "train", "precision",
            "'precision: bf16' keeps float32 weights and activations: it needs train.dtype: f32");
  r.require(tc.device == "cpu" || tc.dtype == "f32", t, "train", "dtype",
            "'dtype: f64' runs on the CPU only (the CUDA kernels are float32): set train.dtype: f32 or "
            "train.device: cpu");

  const ModelConfig& mc = c.model;
  const double micro = double(tc.micro_batch_size > 0 ? tc.micro_batch_size : tc.batch_size);
  const double widest = std::max({double(mc.vocab_size), double(mc.resolved_intermediate_size()),
                                  widest_expand(mc) * double(mc.hidden_size)});
  r.require(micro * double(c.data.seq_len) * widest <= kMaxElements, d, "data", "seq_len",
            "one micro-batch's activations would hold more than 2^40 values (batch_size or micro_batch_size x "
            "seq_len x the widest layer, up to vocab_size " + std::to_string(mc.vocab_size) +
                "): lower seq_len, or set train.micro_batch_size");
}

// ---- the resolved config, written back key by key

template <class S>
void write_value(YAML::Emitter& out, const ConfigKey<S>& key, const S& s) {
  const ConfigValue v = key.written ? key.written(s) : key.get(s);
  if (const bool* b = std::get_if<bool>(&v)) out << *b;
  else if (const int64_t* i = std::get_if<int64_t>(&v)) out << *i;
  else if (const double* d = std::get_if<double>(&v)) out << yaml_number(*d);
  else if (key.quoted) out << YAML::DoubleQuoted << std::get<std::string>(v);
  else out << std::get<std::string>(v);
}

void write_layers(YAML::Emitter& out, const ModelConfig& m) {
  out << YAML::BeginSeq;
  for (const LayerSpec& l : m.layers) {
    out << YAML::Flow << YAML::BeginMap;
    for (const ConfigKey<LayerSpec>& key : layer_keys()) {
      if (key.written_if && !key.written_if(l)) continue;
      out << YAML::Key << key.name << YAML::Value;
      write_value(out, key, l);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

// Writes the section at `path` (its keys, and the nested sections and the schedule of its custom keys).
template <class S>
void write_section(YAML::Emitter& out, const Config& c, const std::string& path, const std::vector<ConfigKey<S>>& keys,
                   const S& s) {
  out << YAML::BeginMap;
  for (const ConfigKey<S>& key : keys) {
    if (key.written_if && !key.written_if(s)) continue;
    const std::string full = path + "." + key.name;
    out << YAML::Key << key.name << YAML::Value;
    if (key.type != ConfigType::custom) {
      write_value(out, key, s);
    } else if (full == "model.layers") {
      write_layers(out, c.model);
    } else {
      for_each_section([&](const auto& nested) {
        if (nested.path == full) write_section(out, c, full, nested.keys, nested.of(c));
      });
    }
  }
  out << YAML::EndMap;
}

std::string emit(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for_each_section([&](const auto& section) {
    const std::string path = section.path;
    if (path.find('.') != std::string::npos) return;  // written inside its parent
    out << YAML::Key << path << YAML::Value;
    write_section(out, c, path, section.keys, section.of(c));
  });
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw Error(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": YAML syntax error: " + e.msg + yaml_tab_hint(yaml_text, e.mark.line));
  }
  LINATTN_REQUIRE(!root.IsNull(), source,
                  " is empty: a config has the sections model, data, train, checkpoint and distributed; start "
                  "from configs/default.yaml");
  LINATTN_REQUIRE(root.IsMap(), source,
                  ": expected a mapping of sections (model:, data:, train:, ...), found a ",
                  root.IsSequence() ? "list" : "single value");
  check_duplicate_keys(root, "", source);
  Overrides overridden;
  for (const std::string& item : overrides) apply_override(root, item, overridden);

  Config c;
  c.source = source;
  Reader r(source, overridden, c.locations);
  std::vector<std::string> sections;
  for_each_section([&](const auto& section) {
    if (std::string(section.path).find('.') == std::string::npos) sections.push_back(section.path);
  });
  r.check_keys(root, "", sections);
  // Every key alone: its name, type and bound or choices.
  for_each_section([&](const auto& section) {
    const YAML::Node node = section_node(root, section.path);
    r.check_keys(node, section.path, key_names(section.keys));
    for (const auto& key : section.keys) r.read(node, section.path, key, section.of(c));
  });
  // Then the keys together.
  const YAML::Node m = root["model"], d = root["data"], t = root["train"];
  check_model(r, m, c.model);
  check_data(r, m, d, c);
  check_train(r, t, d, c);

  c.text = emit(c);
  return c;
}

std::string Config::where(const std::string& path) const {
  auto it = locations.find(path);
  if (it != locations.end()) return it->second;
  return source + " (" + path + " not set; default used)";
}

Config with_settings(const Config& config, const std::vector<std::string>& settings) {
  Config out = parse_config(config.text, config.source, settings);
  out.locations = config.locations;
  return out;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  LINATTN_REQUIRE(!std::filesystem::is_directory(path), path,
                  " is a directory, expected a YAML file (e.g. configs/default.yaml)");
  std::ifstream in(path);
  LINATTN_REQUIRE(in, "cannot read the config file '", path, "' (check the path)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

const char* document_boundaries_name(DocumentBoundaries b) {
  return b == DocumentBoundaries::reset ? "reset" : "cross";
}

}  // namespace linattn
