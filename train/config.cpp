#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "layers/mixer.h"

namespace linattn {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 4;
  for (const std::string& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  if (!best.empty()) return " (did you mean '" + best + "'?)";
  std::string all;
  for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
  return " (known keys: " + all + ")";
}

// --set items by the dotted path they set ("train.lr" -> "train.lr=1e-4").
using Overrides = std::map<std::string, std::string>;

// Reads one YAML mapping, checking keys and types, and reporting FILE:LINE:COL or the --set flag.
class Reader {
 public:
  Reader(const std::string& source, const Overrides& overridden, std::map<std::string, std::string>& locations)
      : source_(source), overridden_(overridden), locations_(locations) {}

  // A value set by --set (or lying inside one) is reported as "--set KEY=VALUE"; so is a section
  // that only a --set created (it has no position in the file).
  std::string location(const YAML::Node& node, const std::string& path) const {
    const std::string* within = nullptr;  // the innermost --set that holds `path`
    for (const auto& [set_path, item] : overridden_)
      if (path == set_path || path.rfind(set_path + ".", 0) == 0) within = &item;
    if (within) return "--set " + *within;
    YAML::Mark m = node.Mark();
    if (m.line < 0)
      for (const auto& [set_path, item] : overridden_)
        if (set_path.rfind(path + ".", 0) == 0) return "--set " + item;
    std::ostringstream os;
    os << source_;
    if (m.line >= 0) os << ":" << m.line + 1 << ":" << m.column + 1;
    return os.str();
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& msg) const {
    throw Error(location(node, path) + ": " + msg);
  }

  void check_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) const {
    if (!map || map.IsNull()) return;
    if (!map.IsMap()) fail(map, path, "'" + path + "' must be a mapping of keys to values");
    for (const auto& kv : map) {
      std::string key = kv.first.as<std::string>();
      if (std::find(known.begin(), known.end(), key) == known.end())
        fail(kv.first, path.empty() ? key : path + "." + key,
             "unknown key '" + key + "'" + (path.empty() ? "" : " in '" + path + "'") + did_you_mean(key, known));
    }
  }

  template <class T>
  void get(const YAML::Node& map, const std::string& path, const std::string& key, T& out) const {
    if (!map || !map.IsMap() || !map[key]) return;
    YAML::Node n = map[key];
    std::string full = path + "." + key;
    locations_[full] = location(n, full);
    try {
      if constexpr (std::is_same_v<T, bool>) {
        out = n.as<bool>();
      } else if constexpr (std::is_integral_v<T>) {
        double d = n.as<double>();
        if (d != std::floor(d)) fail(n, full, "'" + key + "' must be a whole number, got " + n.as<std::string>());
        // Whole numbers up to 2^53 convert exactly; beyond, no key means anything.
        if (!(std::fabs(d) <= 9007199254740992.0))
          fail(n, full, "'" + key + "' is too large: " + n.as<std::string>() + " (at most 2^53 = 9007199254740992)");
        if (std::is_unsigned_v<T> && d < 0) fail(n, full, "'" + key + "' must not be negative, got " + n.as<std::string>());
        out = T(d);
      } else {
        out = n.as<T>();
        if constexpr (std::is_floating_point_v<T>)
          if (!std::isfinite(out)) fail(n, full, "'" + key + "' must be a finite number, got " + n.as<std::string>());
      }
    } catch (const YAML::Exception&) {
      fail(n, full, "'" + key + "' has the wrong type: expected " + type_name<T>() + ", got '" +
                        (n.IsScalar() ? n.as<std::string>() : std::string("a list or mapping")) + "'");
    }
  }

  template <class T>
  static std::string type_name() {
    if constexpr (std::is_same_v<T, bool>) return "true or false";
    if constexpr (std::is_integral_v<T>) return "an integer";
    if constexpr (std::is_floating_point_v<T>) return "a number";
    return "a string";
  }

  // Range checks report at the key's value when present, else at the section.
  void require(bool ok, const YAML::Node& map, const std::string& path, const std::string& key,
               const std::string& msg) const {
    if (ok) return;
    YAML::Node at = map && map.IsMap() && map[key] ? map[key] : map;
    fail(at, path + "." + key, msg);
  }

 private:
  std::string source_;
  const Overrides& overridden_;
  std::map<std::string, std::string>& locations_;
};

std::string parse_mixer(const Reader& r, const YAML::Node& n, const std::string& path) {
  std::string s = n.IsScalar() ? n.as<std::string>() : "";
  if (!find_mixer(s)) r.fail(n, path, "unknown mixer '" + s + "'" + did_you_mean(s, mixer_names()));
  return s;
}

// The node at a dotted path below `node` ("attn.layers.1"), or the deepest one that exists.
YAML::Node node_at(const YAML::Node& node, const std::string& path) {
  if (path.empty()) return node;
  size_t dot = path.find('.');
  std::string part = path.substr(0, dot), rest = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (node.IsMap() && node[part]) return node_at(node[part], rest);
  bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (node.IsSequence() && index && std::stoul(part) < node.size()) return node_at(node[std::stoul(part)], rest);
  return node;
}

// Applies "a.b.c=value" to the tree; the value is parsed as YAML (numbers, booleans, lists).
void apply_override(YAML::Node root, const std::string& item, Overrides& overridden) {
  const std::string usage = ": expected section.key=value (e.g. train.lr=1e-3)";
  size_t eq = item.find('=');
  LINATTN_REQUIRE(eq != std::string::npos && eq > 0, "--set ", item, usage);
  LINATTN_REQUIRE(eq + 1 < item.size(), "--set ", item, ": no value after '='", usage);
  std::string path = item.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(item.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    LINATTN_REQUIRE(false, "--set ", item, ": cannot parse the value: ", e.msg);
  }
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  LINATTN_REQUIRE(parts.size() >= 2 && std::find(parts.begin(), parts.end(), "") == parts.end(), "--set ", item,
                  usage);
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsMap()) next = YAML::Node(YAML::NodeType::Map);
    chain.back()[parts[i]] = next;
    chain.push_back(chain.back()[parts[i]]);
  }
  chain.back()[parts.back()] = value;
  overridden[path] = item;
}

// YAML keeps the first of two equal keys and drops the other without a word: refuse them.
void check_duplicate_keys(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (node.IsSequence())
    for (size_t i = 0; i < node.size(); ++i) check_duplicate_keys(node[i], path + "." + std::to_string(i), source);
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    std::string key = kv.first.IsScalar() ? kv.first.as<std::string>() : "";
    YAML::Mark at = kv.first.Mark();
    auto [first, fresh] = seen.emplace(key, at);
    if (!fresh)
      throw Error(source + ":" + std::to_string(at.line + 1) + ":" + std::to_string(at.column + 1) +
                  ": duplicate key '" + key + "'" + (path.empty() ? "" : " in '" + path + "'") +
                  ": it is also set at line " + std::to_string(first->second.line + 1) + "; remove one of them");
    check_duplicate_keys(kv.second, path.empty() ? key : path + "." + key, source);
  }
}

// Bounds on the sizes: each far above any model this trains, and low enough that no product of
// them overflows int64 (tensor sizes, parameter counts, tokens per step).
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxWidth = int64_t(1) << 16;  // hidden_size
constexpr int64_t kMaxExpand = 16;               // expand_k, expand_v, hidden_ratio
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxSeqLen = int64_t(1) << 24;
constexpr int64_t kMaxBatch = int64_t(1) << 20;
constexpr double kMaxElements = double(int64_t(1) << 40);  // in one model, or in one activation
constexpr double kMaxSeconds = 366.0 * 24 * 3600;           // max_time

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

std::string schedule_name(Schedule s) {
  return s == Schedule::cosine ? "cosine" : s == Schedule::linear ? "linear" : "constant";
}

// A number as both YAML 1.1 (PyYAML) and 1.2 read it: 15 significant digits (every decimal written
// in a config round-trips, and 0.003 stays 0.003), with a '.' in the mantissa of an exponent form
// ("1.0e-06", not "1e-06", which YAML 1.1 reads as a string).
std::string yaml_number(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  std::string s = os.str();
  size_t e = s.find('e');
  if (e != std::string::npos && s.find('.') == std::string::npos) s.insert(e, ".0");
  return s;
}

// expand_k as it runs: the value every linear mixer of the schedule resolves to, or -1 (each
// mixer's default) when they differ, as in a GLA + DeltaNet hybrid left at the defaults.
double emitted_expand_k(const ModelConfig& m) {
  std::optional<double> common;
  for (const LayerSpec& l : m.layers) {
    if (mixer_descriptor(l.mixer).attention) continue;  // attention does not use expand_k
    double ek = m.resolved_expand_k(l.mixer);
    if (common && *common != ek) return m.expand_k;
    common = ek;
  }
  return common.value_or(m.expand_k);
}

std::string emit(const Config& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  const ModelConfig& m = c.model;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "vocab_size" << YAML::Value << m.vocab_size;
  out << YAML::Key << "hidden_size" << YAML::Value << m.hidden_size;
  out << YAML::Key << "num_hidden_layers" << YAML::Value << m.num_hidden_layers;
  out << YAML::Key << "num_heads" << YAML::Value << m.num_heads;
  out << YAML::Key << "num_kv_heads" << YAML::Value << m.num_kv_heads;
  out << YAML::Key << "expand_k" << YAML::Value << yaml_number(emitted_expand_k(m));
  out << YAML::Key << "expand_v" << YAML::Value << yaml_number(m.expand_v);
  out << YAML::Key << "hidden_ratio" << YAML::Value << yaml_number(m.hidden_ratio);
  out << YAML::Key << "intermediate_size" << YAML::Value << m.resolved_intermediate_size();
  out << YAML::Key << "norm_eps" << YAML::Value << yaml_number(m.norm_eps);
  out << YAML::Key << "use_short_conv" << YAML::Value << m.use_short_conv;
  out << YAML::Key << "conv_size" << YAML::Value << m.conv_size;
  out << YAML::Key << "tie_word_embeddings" << YAML::Value << m.tie_word_embeddings;
  out << YAML::Key << "initializer_range" << YAML::Value << yaml_number(m.initializer_range);
  out << YAML::Key << "mixer" << YAML::Value << m.mixer;
  out << YAML::Key << "feature_map" << YAML::Value << m.feature_map;
  out << YAML::Key << "normalize" << YAML::Value << m.normalize;
  out << YAML::Key << "chunk_size" << YAML::Value << m.chunk_size;
  out << YAML::Key << "window_size" << YAML::Value << m.window_size;
  out << YAML::Key << "rope_theta" << YAML::Value << yaml_number(m.rope_theta);
  out << YAML::Key << "gated_deltanet_decay" << YAML::Value << gdn_decay_name(m.gated_deltanet_decay);
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginSeq;
  for (const LayerSpec& l : m.layers) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "mixer" << YAML::Value << l.mixer;
    out << YAML::Key << "num_heads" << YAML::Value << l.num_heads;
    if (mixer_descriptor(l.mixer).attention) {
      out << YAML::Key << "num_kv_heads" << YAML::Value << l.num_kv_heads;
      out << YAML::Key << "window_size" << YAML::Value << l.window_size;
      out << YAML::Key << "rope_theta" << YAML::Value << yaml_number(l.rope_theta);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  const DataConfig& d = c.data;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "path" << YAML::Value << d.path;
  out << YAML::Key << "seq_len" << YAML::Value << d.seq_len;
  out << YAML::Key << "val_tokens" << YAML::Value << d.val_tokens;
  out << YAML::Key << "document_boundaries" << YAML::Value << document_boundaries_name(d.document_boundaries);
  if (d.source == "mqar") {  // token runs keep the text they always had
    out << YAML::Key << "source" << YAML::Value << d.source;
    out << YAML::Key << "mqar" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "vocab_size" << YAML::Value << d.mqar.vocab_size;
    out << YAML::Key << "num_kv_pairs" << YAML::Value << d.mqar.num_kv_pairs;
    out << YAML::Key << "power_a" << YAML::Value << yaml_number(d.mqar.power_a);
    out << YAML::Key << "num_train_examples" << YAML::Value << d.mqar.num_train_examples;
    out << YAML::Key << "num_val_examples" << YAML::Value << d.mqar.num_val_examples;
    out << YAML::Key << "seed" << YAML::Value << d.mqar.seed;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "batch_size" << YAML::Value << t.batch_size;
  out << YAML::Key << "micro_batch_size" << YAML::Value << t.micro_batch_size;
  out << YAML::Key << "lr" << YAML::Value << yaml_number(t.lr);
  out << YAML::Key << "lr_min" << YAML::Value << yaml_number(t.lr_min);
  out << YAML::Key << "warmup_steps" << YAML::Value << t.warmup_steps;
  out << YAML::Key << "schedule" << YAML::Value << schedule_name(t.schedule);
  out << YAML::Key << "weight_decay" << YAML::Value << yaml_number(t.weight_decay);
  out << YAML::Key << "beta1" << YAML::Value << yaml_number(t.beta1);
  out << YAML::Key << "beta2" << YAML::Value << yaml_number(t.beta2);
  out << YAML::Key << "adam_eps" << YAML::Value << yaml_number(t.adam_eps);
  out << YAML::Key << "grad_clip" << YAML::Value << yaml_number(t.grad_clip);
  out << YAML::Key << "max_steps" << YAML::Value << t.max_steps;
  out << YAML::Key << "max_tokens" << YAML::Value << t.max_tokens;
  out << YAML::Key << "max_time" << YAML::Value << yaml_number(t.max_time);
  out << YAML::Key << "seed" << YAML::Value << t.seed;
  out << YAML::Key << "threads" << YAML::Value << t.threads;
  out << YAML::Key << "eval_every" << YAML::Value << t.eval_every;
  out << YAML::Key << "log_every" << YAML::Value << t.log_every;
  out << YAML::Key << "dtype" << YAML::Value << t.dtype;
  out << YAML::Key << "out_dir" << YAML::Value << t.out_dir;
  out << YAML::Key << "max_bad_steps" << YAML::Value << t.max_bad_steps;
  out << YAML::Key << "sample_every" << YAML::Value << t.sample_every;
  out << YAML::Key << "sample_tokens" << YAML::Value << t.sample_tokens;
  out << YAML::Key << "sample_prompt" << YAML::Value << YAML::DoubleQuoted << t.sample_prompt;
  out << YAML::Key << "device" << YAML::Value << t.device;
  out << YAML::Key << "precision" << YAML::Value << t.precision;
  out << YAML::Key << "tf32" << YAML::Value << t.tf32;
  out << YAML::EndMap;
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "every" << YAML::Value << c.checkpoint.every;
  out << YAML::Key << "keep_last" << YAML::Value << c.checkpoint.keep_last;
  out << YAML::EndMap;
  out << YAML::Key << "distributed" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "bucket_mb" << YAML::Value << yaml_number(c.distributed.bucket_mb);
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// max_time accepts seconds or a string with a unit: "90s", "10m", "1.5h".
double parse_duration(const Reader& r, const YAML::Node& train, const std::string& path) {
  if (!train || !train.IsMap() || !train["max_time"]) return 0;
  YAML::Node n = train["max_time"];
  std::string s = n.as<std::string>();
  double scale = 1;
  if (!s.empty() && std::string("smh").find(s.back()) != std::string::npos) {
    scale = s.back() == 's' ? 1 : s.back() == 'm' ? 60 : 3600;
    s.pop_back();
  }
  try {
    size_t used = 0;
    double v = std::stod(s, &used) * scale;
    if (used == s.size() && v >= 0 && v <= kMaxSeconds) return v;
  } catch (const std::exception&) {
  }
  r.fail(n, path + ".max_time", "'max_time' must be a duration up to a year (8784h), like 600, \"90s\", \"10m\" or \"1.5h\", got '" +
                                    n.as<std::string>() + "'");
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw Error(source + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": YAML syntax error: " + e.msg);
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
  r.check_keys(root, "", {"model", "data", "train", "checkpoint", "distributed"});

  // ---- model
  YAML::Node m = root["model"];
  ModelConfig& mc = c.model;
  r.check_keys(m, "model",
               {"vocab_size", "hidden_size", "num_hidden_layers", "num_heads", "num_kv_heads", "expand_k", "expand_v",
                "hidden_ratio", "intermediate_size", "norm_eps", "use_short_conv", "conv_size", "tie_word_embeddings",
                "initializer_range", "mixer", "feature_map", "normalize", "chunk_size", "window_size", "rope_theta",
                "attn", "layers", "gated_deltanet_decay"});
  r.get(m, "model", "vocab_size", mc.vocab_size);
  r.get(m, "model", "hidden_size", mc.hidden_size);
  r.get(m, "model", "num_hidden_layers", mc.num_hidden_layers);
  r.get(m, "model", "num_heads", mc.num_heads);
  r.get(m, "model", "num_kv_heads", mc.num_kv_heads);
  r.get(m, "model", "expand_k", mc.expand_k);
  r.get(m, "model", "expand_v", mc.expand_v);
  r.get(m, "model", "hidden_ratio", mc.hidden_ratio);
  r.get(m, "model", "intermediate_size", mc.intermediate_size);
  r.get(m, "model", "norm_eps", mc.norm_eps);
  r.get(m, "model", "use_short_conv", mc.use_short_conv);
  r.get(m, "model", "conv_size", mc.conv_size);
  r.get(m, "model", "tie_word_embeddings", mc.tie_word_embeddings);
  r.get(m, "model", "initializer_range", mc.initializer_range);
  r.get(m, "model", "feature_map", mc.feature_map);
  r.get(m, "model", "normalize", mc.normalize);
  r.get(m, "model", "chunk_size", mc.chunk_size);
  r.get(m, "model", "window_size", mc.window_size);
  r.get(m, "model", "rope_theta", mc.rope_theta);
  if (m && m.IsMap() && m["mixer"]) mc.mixer = parse_mixer(r, m["mixer"], "model.mixer");
  std::string decay = gdn_decay_name(mc.gated_deltanet_decay);
  r.get(m, "model", "gated_deltanet_decay", decay);
  r.require(decay == "fla" || decay == "logsigmoid", m, "model", "gated_deltanet_decay",
            "'gated_deltanet_decay' must be fla (-exp(A_log) * softplus(a_proj(x) + dt_bias), as fla computes it) "
            "or logsigmoid (logsigmoid(a_proj(x) + bias), linattn's first form), got '" + decay + "'");
  mc.gated_deltanet_decay = decay == "fla" ? GdnDecay::fla : GdnDecay::logsigmoid;

  r.require(mc.vocab_size >= 2 && mc.vocab_size <= kMaxVocab, m, "model", "vocab_size",
            "'vocab_size' must be in [2, " + std::to_string(kMaxVocab) + "]");
  r.require(mc.hidden_size >= 1 && mc.hidden_size <= kMaxWidth, m, "model", "hidden_size",
            "'hidden_size' must be in [1, " + std::to_string(kMaxWidth) + "]");
  r.require(mc.num_hidden_layers >= 1 && mc.num_hidden_layers <= kMaxLayers, m, "model", "num_hidden_layers",
            "'num_hidden_layers' must be in [1, " + std::to_string(kMaxLayers) + "]");
  r.require(mc.num_heads >= 1, m, "model", "num_heads", "'num_heads' must be at least 1");
  r.require(mc.hidden_size % mc.num_heads == 0, m, "model", "num_heads",
            "'hidden_size' (" + std::to_string(mc.hidden_size) + ") is not divisible by 'num_heads' (" +
                std::to_string(mc.num_heads) + ")");
  if (mc.num_kv_heads == 0) mc.num_kv_heads = mc.num_heads;
  r.require(mc.num_kv_heads >= 1 && mc.num_heads % mc.num_kv_heads == 0, m, "model", "num_kv_heads",
            "'num_heads' (" + std::to_string(mc.num_heads) + ") must be a multiple of 'num_kv_heads' (" +
                std::to_string(mc.num_kv_heads) + ")");
  r.require(mc.expand_k == -1 || (mc.expand_k > 0 && mc.expand_k <= kMaxExpand), m, "model", "expand_k",
            "'expand_k' must be in (0, 16] (or -1: the mixer's default)");
  r.require(mc.expand_v > 0 && mc.expand_v <= kMaxExpand, m, "model", "expand_v", "'expand_v' must be in (0, 16]");
  r.require(mc.hidden_ratio > 0 && mc.hidden_ratio <= kMaxExpand, m, "model", "hidden_ratio",
            "'hidden_ratio' must be in (0, 16]");
  r.require(mc.intermediate_size >= 0 && mc.intermediate_size <= kMaxExpand * kMaxWidth, m, "model",
            "intermediate_size",
            "'intermediate_size' must be in [0, " + std::to_string(kMaxExpand * kMaxWidth) + "] (0 = derived)");
  r.require(mc.norm_eps > 0, m, "model", "norm_eps", "'norm_eps' must be positive");
  r.require(mc.conv_size >= 1 && mc.conv_size <= 16, m, "model", "conv_size", "'conv_size' must be in [1, 16]");
  r.require(mc.initializer_range > 0, m, "model", "initializer_range", "'initializer_range' must be positive");
  r.require(mc.feature_map == "identity" || mc.feature_map == "elu1" || mc.feature_map == "relu", m, "model",
            "feature_map", "'feature_map' must be identity, elu1 or relu, got '" + mc.feature_map + "'");
  r.require(mc.chunk_size >= 1 && mc.chunk_size <= 256, m, "model", "chunk_size",
            "'chunk_size' must be in [1, 256] (16, 32 or 64 are the usual choices)");
  r.require(mc.window_size >= 0 && mc.window_size <= kMaxSeqLen, m, "model", "window_size",
            "'window_size' must be in [0, " + std::to_string(kMaxSeqLen) + "] (0 = global attention)");
  r.require(mc.rope_theta > 0, m, "model", "rope_theta", "'rope_theta' must be positive");

  // ---- the layer schedule (resolved in layers/model_config.cpp): the YAML's values, then the rules
  const LayerSpec base = mc.default_layer();
  auto read_attention_fields = [&](const YAML::Node& node, const std::string& path, LayerSpec& spec) {
    r.get(node, path, "num_heads", spec.num_heads);
    r.get(node, path, "num_kv_heads", spec.num_kv_heads);
    r.get(node, path, "window_size", spec.window_size);
    r.get(node, path, "rope_theta", spec.rope_theta);
    r.require(spec.num_heads >= 1 && mc.hidden_size % spec.num_heads == 0, node, path, "num_heads",
              "'num_heads' must divide hidden_size (" + std::to_string(mc.hidden_size) + ")");
    r.require(spec.num_kv_heads >= 1 && spec.num_heads % spec.num_kv_heads == 0, node, path, "num_kv_heads",
              "'num_heads' (" + std::to_string(spec.num_heads) + ") must be a multiple of 'num_kv_heads' (" +
                  std::to_string(spec.num_kv_heads) + ")");
    r.require(spec.window_size >= 0 && spec.window_size <= kMaxSeqLen, node, path, "window_size",
              "'window_size' must be in [0, " + std::to_string(kMaxSeqLen) + "] (0 = global)");
    r.require(spec.rope_theta > 0, node, path, "rope_theta", "'rope_theta' must be positive");
  };

  std::optional<AttnBlock> attn;
  if (m.IsMap() && m["attn"]) {
    YAML::Node a = m["attn"];
    r.check_keys(a, "model.attn", {"layers", "every", "num_heads", "num_kv_heads", "window_size", "rope_theta"});
    attn.emplace();
    attn->spec = base;
    attn->spec.mixer = "attention";
    attn->spec.window_size = 0;  // no window_size in the attn block = global
    read_attention_fields(a, "model.attn", attn->spec);
    if (a.IsMap() && a["layers"]) {
      YAML::Node list = a["layers"];
      if (!list.IsSequence()) r.fail(list, "model.attn.layers", "'layers' must be a list of layer indices, e.g. [1, 3]");
      attn->layers.emplace();
      for (const auto& item : list) {
        try {
          attn->layers->push_back(item.as<int64_t>());
        } catch (const YAML::Exception&) {
          r.fail(item, "model.attn.layers", "layer indices must be integers, got '" + item.as<std::string>() + "'");
        }
      }
    }
    if (a.IsMap() && a["every"]) r.get(a, "model.attn", "every", attn->every.emplace());
  }

  std::optional<std::vector<LayerSpec>> layers;
  if (m.IsMap() && m["layers"]) {
    YAML::Node list = m["layers"];
    if (!list.IsSequence()) r.fail(list, "model.layers", "'layers' must be a list with one entry per layer");
    layers.emplace();
    for (size_t i = 0; i < list.size(); ++i) {
      YAML::Node item = list[i];
      std::string path = "model.layers." + std::to_string(i);
      LayerSpec spec = base;
      if (item.IsScalar()) {
        spec.mixer = parse_mixer(r, item, path);
      } else {
        r.check_keys(item, path, {"mixer", "num_heads", "num_kv_heads", "window_size", "rope_theta"});
        if (!item.IsMap() || !item["mixer"]) r.fail(item, path, "each entry of 'layers' needs a 'mixer'");
        spec.mixer = parse_mixer(r, item["mixer"], path + ".mixer");
        read_attention_fields(item, path, spec);
      }
      layers->push_back(spec);
    }
  }
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

  // ---- data
  YAML::Node d = root["data"];
  r.check_keys(d, "data", {"path", "seq_len", "val_tokens", "document_boundaries", "source", "mqar"});
  r.get(d, "data", "path", c.data.path);
  r.get(d, "data", "seq_len", c.data.seq_len);
  r.get(d, "data", "val_tokens", c.data.val_tokens);
  r.require(c.data.seq_len >= 1 && c.data.seq_len <= kMaxSeqLen, d, "data", "seq_len",
            "'seq_len' must be in [1, " + std::to_string(kMaxSeqLen) + "]");
  r.require(c.data.val_tokens >= 0, d, "data", "val_tokens", "'val_tokens' must be >= 0 (0 = the whole split)");
  r.get(d, "data", "source", c.data.source);
  std::string boundaries = c.data.source == "mqar" ? "cross" : "reset";
  r.get(d, "data", "document_boundaries", boundaries);
  r.require(boundaries == "cross" || boundaries == "reset", d, "data", "document_boundaries",
            "'document_boundaries' must be cross or reset, got '" + boundaries + "'");
  c.data.document_boundaries = boundaries == "reset" ? DocumentBoundaries::reset : DocumentBoundaries::cross;

  // ---- data.source and data.mqar
  r.require(c.data.source == "tokens" || c.data.source == "mqar", d, "data", "source",
            "'source' must be tokens (the prepared folder at data.path) or mqar (generated associative recall, "
            "data.mqar), got '" + c.data.source + "'");
  const bool has_mqar = d && d.IsMap() && d["mqar"];
  YAML::Node q = has_mqar ? d["mqar"] : YAML::Node();
  r.require(!has_mqar || c.data.source == "mqar", d, "data", "mqar",
            "'mqar' is set but data.source is '" + c.data.source + "': set data.source: mqar to train on it");
  r.check_keys(q, "data.mqar",
               {"vocab_size", "num_kv_pairs", "power_a", "num_train_examples", "num_val_examples", "seed"});
  data::MqarTask& task = c.data.mqar;
  r.get(q, "data.mqar", "vocab_size", task.vocab_size);
  r.get(q, "data.mqar", "num_kv_pairs", task.num_kv_pairs);
  r.get(q, "data.mqar", "power_a", task.power_a);
  r.get(q, "data.mqar", "num_train_examples", task.num_train_examples);
  r.get(q, "data.mqar", "num_val_examples", task.num_val_examples);
  r.get(q, "data.mqar", "seed", task.seed);
  if (c.data.source == "mqar") {
    r.require(c.data.document_boundaries == DocumentBoundaries::cross, d, "data", "document_boundaries",
              "MQAR examples are one per row, with no documents inside to cut: set data.document_boundaries: cross");
    const data::MqarProblem problem = data::mqar_problem(task, c.data.seq_len);
    r.require(problem.key != "seq_len", d, "data", "seq_len", problem.message);
    r.require(problem.key.empty(), q, "data.mqar", problem.key, problem.message);
    r.require(task.vocab_size <= mc.vocab_size, m, "model", "vocab_size",
              "vocab_size " + std::to_string(mc.vocab_size) + " is smaller than the MQAR task's vocabulary " +
                  std::to_string(task.vocab_size) + " (data.mqar.vocab_size, " + c.where("data.mqar.vocab_size") +
                  "): set model.vocab_size to at least " + std::to_string(task.vocab_size) +
                  " or lower data.mqar.vocab_size");
  }

  // ---- train
  YAML::Node t = root["train"];
  TrainConfig& tc = c.train;
  r.check_keys(t, "train",
               {"batch_size", "micro_batch_size", "lr", "lr_min", "warmup_steps", "schedule", "weight_decay", "beta1",
                "beta2", "adam_eps", "grad_clip", "max_steps", "max_tokens", "max_time", "seed", "threads",
                 "eval_every", "log_every", "dtype", "out_dir", "max_bad_steps",
                 "sample_every", "sample_tokens", "sample_prompt", "device", "precision", "tf32"});
  r.get(t, "train", "batch_size", tc.batch_size);
  r.get(t, "train", "micro_batch_size", tc.micro_batch_size);
  r.get(t, "train", "lr", tc.lr);
  r.get(t, "train", "lr_min", tc.lr_min);
  r.get(t, "train", "warmup_steps", tc.warmup_steps);
  std::string schedule = schedule_name(tc.schedule);
  r.get(t, "train", "schedule", schedule);
  r.require(schedule == "cosine" || schedule == "linear" || schedule == "constant", t, "train", "schedule",
            "'schedule' must be cosine, linear or constant, got '" + schedule + "'");
  tc.schedule = schedule == "cosine" ? Schedule::cosine : schedule == "linear" ? Schedule::linear : Schedule::constant;
  r.get(t, "train", "weight_decay", tc.weight_decay);
  r.get(t, "train", "beta1", tc.beta1);
  r.get(t, "train", "beta2", tc.beta2);
  r.get(t, "train", "adam_eps", tc.adam_eps);
  r.get(t, "train", "grad_clip", tc.grad_clip);
  r.get(t, "train", "max_steps", tc.max_steps);
  r.get(t, "train", "max_tokens", tc.max_tokens);
  tc.max_time = parse_duration(r, t, "train");
  r.get(t, "train", "seed", tc.seed);
  r.get(t, "train", "threads", tc.threads);
  r.get(t, "train", "eval_every", tc.eval_every);
  r.get(t, "train", "log_every", tc.log_every);
  r.get(t, "train", "dtype", tc.dtype);
  r.get(t, "train", "out_dir", tc.out_dir);
  r.get(t, "train", "max_bad_steps", tc.max_bad_steps);
  r.get(t, "train", "sample_every", tc.sample_every);
  r.get(t, "train", "sample_tokens", tc.sample_tokens);
  r.get(t, "train", "sample_prompt", tc.sample_prompt);
  r.require(tc.batch_size >= 1 && tc.batch_size <= kMaxBatch, t, "train", "batch_size",
            "'batch_size' must be in [1, " + std::to_string(kMaxBatch) + "]");
  r.require(tc.micro_batch_size == 0 || (tc.micro_batch_size >= 1 && tc.batch_size % tc.micro_batch_size == 0), t,
            "train", "micro_batch_size",
            "'batch_size' (" + std::to_string(tc.batch_size) + ") must be a multiple of 'micro_batch_size' (" +
                std::to_string(tc.micro_batch_size) + ")");
  r.require(tc.lr > 0, t, "train", "lr", "'lr' must be positive");
  r.require(tc.lr_min >= 0 && tc.lr_min <= tc.lr, t, "train", "lr_min", "'lr_min' must be in [0, lr]");
  r.require(tc.warmup_steps >= 0, t, "train", "warmup_steps", "'warmup_steps' must be >= 0");
  r.require(tc.weight_decay >= 0, t, "train", "weight_decay", "'weight_decay' must be >= 0");
  r.require(tc.beta1 >= 0 && tc.beta1 < 1, t, "train", "beta1", "'beta1' must be in [0, 1)");
  r.require(tc.beta2 >= 0 && tc.beta2 < 1, t, "train", "beta2", "'beta2' must be in [0, 1)");
  r.require(tc.adam_eps > 0, t, "train", "adam_eps", "'adam_eps' must be positive");
  r.require(tc.grad_clip >= 0, t, "train", "grad_clip", "'grad_clip' must be >= 0 (0 = no clipping)");
  r.require(tc.max_steps >= 0, t, "train", "max_steps", "'max_steps' must be >= 0");
  r.require(tc.max_tokens >= 0, t, "train", "max_tokens", "'max_tokens' must be >= 0");
  r.require(tc.max_steps > 0 || tc.max_tokens > 0 || tc.max_time > 0, t, "train", "max_steps",
            "the run has no bound: set 'max_steps', 'max_tokens' or 'max_time'");
  r.require(tc.threads >= 0 && tc.threads <= 65536, t, "train", "threads", "'threads' must be in [0, 65536] (0 = all cores)");
  r.require(tc.eval_every >= 0, t, "train", "eval_every", "'eval_every' must be >= 0 (0 = only at the end)");
  r.require(tc.log_every >= 1, t, "train", "log_every", "'log_every' must be at least 1");
  r.require(tc.dtype == "f32" || tc.dtype == "f64", t, "train", "dtype", "'dtype' must be f32 or f64");
  r.require(tc.max_bad_steps >= 1, t, "train", "max_bad_steps", "'max_bad_steps' must be at least 1");
  r.require(tc.sample_every >= 0, t, "train", "sample_every", "'sample_every' must be >= 0 (0 = no samples)");
  r.require(tc.sample_tokens >= 1 && tc.sample_tokens <= 100000, t, "train", "sample_tokens",
            "'sample_tokens' must be in [1, 100000]");
  // The device keys. Whether a GPU is there is checked when training starts (Trainer), not here.
  r.get(t, "train", "device", tc.device);
  r.get(t, "train", "precision", tc.precision);
  r.get(t, "train", "tf32", tc.tf32);
  r.require(tc.device == "cpu" || tc.device == "cuda", t, "train", "device",
            "'device' must be cpu or cuda, got '" + tc.device + "'");
  r.require(tc.precision == "fp32" || tc.precision == "bf16", t, "train", "precision",
            "'precision' must be fp32 or bf16, got '" + tc.precision + "'");
  r.require(tc.precision == "fp32", t, "train", "precision",
            "'precision: bf16' (mixed precision) is not implemented yet; use fp32");
  r.require(tc.device == "cpu" || tc.dtype == "f32", t, "train", "dtype",
            "'dtype: f64' runs on the CPU only (the CUDA kernels are float32): set train.dtype: f32 or "
            "train.device: cpu");

  const double micro = double(tc.micro_batch_size > 0 ? tc.micro_batch_size : tc.batch_size);
  const double widest = std::max({double(mc.vocab_size), double(mc.resolved_intermediate_size()),
                                  widest_expand(mc) * double(mc.hidden_size)});
  r.require(micro * double(c.data.seq_len) * widest <= kMaxElements, d, "data", "seq_len",
            "one micro-batch's activations would hold more than 2^40 values (batch_size or micro_batch_size x "
            "seq_len x the widest layer, up to vocab_size " + std::to_string(mc.vocab_size) +
                "): lower seq_len, or set train.micro_batch_size");

  // ---- checkpoint
  YAML::Node k = root["checkpoint"];
  r.check_keys(k, "checkpoint", {"every", "keep_last"});
  r.get(k, "checkpoint", "every", c.checkpoint.every);
  r.get(k, "checkpoint", "keep_last", c.checkpoint.keep_last);
  r.require(c.checkpoint.every >= 0, k, "checkpoint", "every", "'every' must be >= 0 (0 = only at the end)");
  r.require(c.checkpoint.keep_last >= 1, k, "checkpoint", "keep_last", "'keep_last' must be at least 1");

  // ---- distributed
  YAML::Node dp = root["distributed"];
  r.check_keys(dp, "distributed", {"bucket_mb"});
  r.get(dp, "distributed", "bucket_mb", c.distributed.bucket_mb);
  r.require(c.distributed.bucket_mb > 0 && c.distributed.bucket_mb <= 65536, dp, "distributed", "bucket_mb",
            "'bucket_mb' (MiB of gradients per all-reduce) must be in (0, 65536]; the default is 4");

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
