#include "sweep/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "train/config.h"
#include "train/config_reader.h"

namespace linattn {

namespace {

namespace fs = std::filesystem;

std::string where(const std::string& path, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

[[noreturn]] void fail(const std::string& path, const YAML::Node& node, const std::string& message) {
  throw Error(where(path, node) + ": " + message);
}

// A value as --set reads it: YAML on one line.
std::string flow_yaml(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

// What a value means, to tell two values apart: a scalar that reads as a number by its value, as
// the config reads it (1, 01 and 1.0 alike; 1.0e-3, 0.001 and "0.001" alike; with long double's
// 64-bit mantissa, so that whole numbers up to 2^64 stay apart), anything else by its text; lists
// and mappings entry by entry.
std::string value_key(const YAML::Node& node) {
  if (node.IsScalar()) {
    const std::string text = node.Scalar();
    char* end = nullptr;
    const long double v = std::strtold(text.c_str(), &end);
    if (!text.empty() && *end == '\0' && std::isfinite(v)) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.21Lg", v);
      return buf;
    }
    return "'" + text + "'";
  }
  std::string key = node.IsMap() ? "{" : "[";
  for (const auto& entry : node)
    key += node.IsMap() ? value_key(entry.first) + ": " + value_key(entry.second) + ", " : value_key(entry) + ", ";
  return key + (node.IsMap() ? "}" : "]");
}

// The keys of a mapping, each once (YAML would keep the first of two equal keys without a word).
void check_mapping(const std::string& path, const YAML::Node& map, const std::string& what,
                   const std::vector<std::string>& known) {
  if (!map.IsMap()) fail(path, map, what + " must be a mapping of keys to values");
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (!seen.insert(key).second) fail(path, kv.first, "duplicate key '" + key + "' in " + what + "; remove one");
    if (known.empty() || std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string all;
    for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
    fail(path, kv.first, "unknown key '" + key + "' in " + what + " (known keys: " + all + ")");
  }
}

// A key given as an override must name a config value: "section.key".
void check_override_key(const std::string& path, const YAML::Node& key_node) {
  const std::string key = key_node.as<std::string>();
  if (key.find('.') == std::string::npos || key.front() == '.' || key.back() == '.')
    fail(path, key_node, "'" + key + "' is not a config key: give section.key, e.g. model.hidden_size");
}

// The overrides of a mapping; a runs entry's `name` is none.
std::vector<Override> overrides_of(const std::string& path, const YAML::Node& map, const std::string& what,
                                   bool runs_entry) {
  check_mapping(path, map, what, {});
  std::vector<Override> out;
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name" && runs_entry) continue;
    check_override_key(path, kv.first);
    if (!kv.second.IsDefined() || kv.second.IsNull()) fail(path, kv.first, "'" + key + "' has no value");
    out.push_back({key, flow_yaml(kv.second), where(path, kv.second)});
  }
  return out;
}

// The value at a dotted path of a YAML tree, as flow YAML; "" when there is none.
std::string value_at(YAML::Node node, const std::string& dotted) {
  std::stringstream ss(dotted);
  for (std::string part; std::getline(ss, part, '.');) {
    if (!node.IsMap() || !node[part]) return "";
    node.reset(node[part]);  // (operator= would overwrite the node it refers to)
  }
  return flow_yaml(node);
}

// The name template's {KEY}s filled in: {name} with the runs entry's name, {section.key} with the
// run's value, or else the base config's.
std::string templated_name(const std::string& path, const YAML::Node& name_node, const std::string& entry_name,
                           const std::vector<Override>& overrides, const Config& config) {
  const std::string name_template = name_node.as<std::string>();
  const YAML::Node resolved = YAML::Load(config.text);
  std::string name;
  for (size_t at = 0; at < name_template.size();) {
    const size_t open = name_template.find('{', at);
    name += name_template.substr(at, open - at);
    if (open == std::string::npos) break;
    const size_t close = name_template.find('}', open);
    if (close == std::string::npos) fail(path, name_node, "name: a '{' without its '}'");
    const std::string key = name_template.substr(open + 1, close - open - 1);
    std::string value = key == "name" ? entry_name : "";
    for (const Override& o : overrides)
      if (o.key == key) value = o.value;
    if (value.empty()) value = value_at(resolved, key);
    if (value.empty())
      fail(path, name_node, "name: {" + key + "} is no config key and no runs entry's name (known: {name}, {section.key})");
    name += value;
    at = close + 1;
  }
  return name;
}

// Without a template: the runs entry's name and the grid values ("gla-hidden_size=64"), or, for an
// entry without a name, its values.
std::string default_name(const std::string& entry_name, const std::vector<Override>& overrides,
                         const std::vector<Override>& point) {
  std::string name = entry_name;
  auto add = [&](const std::string& part) {
    if (!name.empty()) name += '-';
    name += part;
  };
  for (const Override& o : point) add(o.key.substr(o.key.rfind('.') + 1) + "=" + o.value);
  if (name.empty())
    for (const Override& o : overrides) add(o.value);
  return name;
}

// A runs entry: its name and its overrides.
struct Entry {
  std::string name;
  std::vector<Override> overrides;
};

// The combinations of `map`'s lists of values (grid or tune), the last key varying fastest; its keys
// go to `keys`. No map: one empty combination.
std::vector<std::vector<Override>> combinations(const std::string& path, const YAML::Node& map,
                                                const std::string& what, const std::string& example,
                                                std::vector<std::string>& keys) {
  std::vector<std::vector<Override>> points{{}};
  if (!map) return points;
  check_mapping(path, map, what, {});
  if (map.size() == 0)
    fail(path, map, what + " is empty: give each key its list of values, e.g. " + what + ": {" +
         (what == "tune" ? "train.lr" : "model.hidden_size") + ": " + example + "}, or leave " + what + " out");
  for (const auto& kv : map) {
    check_override_key(path, kv.first);
    const std::string key = kv.first.as<std::string>();
    if (kv.second.IsSequence() && kv.second.size() == 0)
      fail(path, kv.second, what + " '" + key + "' is an empty list: give its values, e.g. " + example);
    if (!kv.second.IsSequence())
      fail(path, kv.second, what + " '" + key + "' must be a list of values, e.g. " + example);
    // By value: 1.0e-3 and 0.001 would train the same run twice.
    std::map<std::string, std::string> seen;  // value_key -> the value as given
    for (const YAML::Node& v : kv.second) {
      const auto [earlier, fresh] = seen.emplace(value_key(v), flow_yaml(v));
      if (fresh) continue;
      fail(path, v, what + " '" + key + "' lists " + flow_yaml(v) +
           (earlier->second == flow_yaml(v) ? " twice" : ", the same value as " + earlier->second) + "; remove one");
    }
    keys.push_back(key);
    std::vector<std::vector<Override>> next;
    for (const auto& point : points)
      for (const YAML::Node& v : kv.second) {
        next.push_back(point);
        next.back().push_back({key, flow_yaml(v), where(path, v)});
      }
    points = std::move(next);
  }
  return points;
}

// `seeds:`: distinct whole numbers, each a train.seed override.
std::vector<Override> seeds_of(const std::string& path, const YAML::Node& list) {
  std::vector<Override> seeds;
  if (!list) return seeds;
  const std::string how = "seeds are train.seed values (initialization and data order), e.g. seeds: [1, 2, 3]";
  if (list.IsSequence() && list.size() == 0) fail(path, list, "seeds is an empty list: give at least one seed; " + how);
  if (!list.IsSequence()) fail(path, list, "seeds must be a list of whole numbers; " + how);
  std::map<uint64_t, std::string> seen;  // by value ("01" is seed 1), with the text first given
  for (const YAML::Node& v : list) {
    const std::string text = flow_yaml(v);
    // As train.seed reads it: a whole number up to 2^53, beyond which a double rounds neighbours together.
    const bool digits = v.IsScalar() && !text.empty() && text.size() <= 16 &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    const uint64_t value = digits ? std::stoull(text) : 0;
    if (!digits || value > (uint64_t(1) << 53))
      fail(path, v, "seed '" + text + "' is not a whole number from 0 to 2^53 = 9007199254740992; " + how);
    const auto [earlier, fresh] = seen.emplace(value, text);
    if (!fresh)
      fail(path, v, "seed " + text + (earlier->second == text ? " is listed twice" : " is seed " + earlier->second +
                                      " again") + "; remove one");
    seeds.push_back({"train.seed", text, where(path, v)});
  }
  return seeds;
}

// `tune:`: a mapping of keys to lists of values (every combination), or a list of override maps
// (each one tuned point: keys that go together, e.g. train.lr with train.lr_min). Its keys go to `keys`.
std::vector<std::vector<Override>> tune_points_of(const std::string& path, const YAML::Node& tune,
                                                  std::vector<std::string>& keys) {
  if (!tune || tune.IsMap()) return combinations(path, tune, "tune", "[3.0e-4, 1.0e-3, 3.0e-3]", keys);
  if (tune.IsSequence() && tune.size() == 0)
    fail(path, tune, "tune is an empty list: give the tuned points, e.g. tune: [{train.lr: 1.0e-3}, {train.lr: "
         "3.0e-3}], or leave tune out");
  if (!tune.IsSequence())
    fail(path, tune, "tune must map keys to lists of values, e.g. tune: {train.lr: [1.0e-3, 3.0e-3]}, or list "
         "override maps, e.g. tune: [{train.lr: 1.0e-3, train.lr_min: 1.0e-4}, "
         "{train.lr: 3.0e-3, train.lr_min: 3.0e-4}]");
  std::vector<std::vector<Override>> points;
  std::set<std::string> seen;  // each entry's keys and values, by value_key
  std::string first_keys;  // "train.lr train.lr_min ", as every entry must set them
  for (size_t i = 0; i < tune.size(); ++i) {
    const std::string what = "tune entry " + std::to_string(i + 1);
    points.push_back(overrides_of(path, tune[i], what, false));
    if (points.back().empty()) fail(path, tune[i], what + " sets nothing");
    std::string items, entry_keys;
    for (const auto& kv : tune[i]) items += kv.first.as<std::string>() + "=" + value_key(kv.second) + "\n";
    for (const Override& o : points.back()) entry_keys += o.key + " ";
    if (i == 0) first_keys = entry_keys;
    if (entry_keys != first_keys)
      fail(path, tune[i], what + " sets " + entry_keys + "but entry 1 sets " + first_keys +
           "(in that order): give every entry the same keys");
    if (!seen.insert(items).second) fail(path, tune[i], what + " repeats an earlier one; remove one");
  }
  for (const Override& o : points.front()) keys.push_back(o.key);
  return points;
}

// A tuned key, and train.seed under `seeds`, is set by nothing else: the search sets it.
void check_set_once(const std::string& path, const YAML::Node& top, const std::vector<Override>& tuned,
                    const std::vector<Override>& seeds, const std::vector<Override>& common,
                    const std::vector<Entry>& entries) {
  struct Searched {
    std::string what;  // what the search does
    Override at;       // the key, and where the sweep file says so
  };
  std::vector<Searched> searched;
  for (const Override& o : tuned) searched.push_back({"'" + o.key + "' is tuned", o});
  if (!seeds.empty()) searched.push_back({"seeds sets train.seed", seeds.front()});
  for (const Searched& x : searched) {
    const Override& at = x.at;
    auto clash = [&](const std::string& other) {
      throw Error(at.where + ": " + x.what + ", and " + other + " sets it too: remove one of them");
    };
    for (const Override& o : common)
      if (o.key == at.key) clash("set (" + o.where + ")");
    for (const Entry& e : entries)
      for (const Override& o : e.overrides)
        if (o.key == at.key) clash("a runs entry (" + o.where + ")");
    if (top["grid"])
      for (const auto& kv : top["grid"])
        if (kv.first.as<std::string>() == at.key) clash("grid (" + where(path, kv.first) + ")");
  }
  for (const Override& o : tuned)
    if (o.key == "train.seed" && !seeds.empty())
      throw Error(o.where + ": 'train.seed' is tuned, and seeds (" + seeds.front().where + ") sets it too: remove one "
                  "of them");
}

// A name template leaves out the tuned keys and the seed: the sweep adds them to each run's name.
void check_template(const std::string& path, const YAML::Node& top, const std::vector<std::string>& searched) {
  if (!top["name"]) return;
  const std::string name_template = top["name"].as<std::string>();
  for (const std::string& key : searched)
    if (name_template.find("{" + key + "}") != std::string::npos)
      fail(path, top["name"], "name: {" + key + "} is set by the search (tune or seeds): leave it out, the sweep "
           "adds it to every run's name (\"-" + key.substr(key.rfind('.') + 1) + "=VALUE\")");
}

}  // namespace

std::string folder_name(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool joint = c == '-' || c == '=';
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || joint) {
      if (joint && !out.empty() && out.back() == '_') out.pop_back();  // "[a, b]-w64": "a_b-w64"
      out += c;
    } else if (!out.empty() && out.back() != '_' && out.back() != '-' && out.back() != '=') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

std::vector<std::string> Sweep::set_items(size_t i) const {
  std::vector<std::string> items;
  for (const Override& o : common) items.push_back(o.item());
  for (const Override& o : runs.at(i).overrides) items.push_back(o.item());
  for (const Override& o : command_line) items.push_back(o.item());
  return items;
}

std::string Sweep::run_dir(size_t i) const { return (fs::path(out_dir) / runs.at(i).name).string(); }

std::string Sweep::in_sweep_terms(std::string message, size_t i) const {
  std::vector<Override> all = common;
  all.insert(all.end(), runs.at(i).overrides.begin(), runs.at(i).overrides.end());
  for (const Override& o : all) {
    const std::string flag = "--set " + o.item();
    for (size_t at; (at = message.find(flag)) != std::string::npos;)
      message.replace(at, flag.size(), o.where + " (" + o.key + ": " + o.value + ")");
  }
  return message;
}

Sweep load_sweep(const std::string& path, const std::vector<std::string>& command_line) {
  LINATTN_REQUIRE(fs::is_regular_file(path), "cannot read the sweep file '", path, "': no such file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    throw Error(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": not valid YAML: " + e.msg + yaml_tab_hint(text, e.mark.line));
  }
  const YAML::Node top = root.IsNull() ? YAML::Node(YAML::NodeType::Map) : root;
  check_mapping(path, top, "the sweep file",
                {"base", "out_dir", "name", "launcher", "set", "grid", "runs", "compare", "tune", "seeds"});
  Sweep s;
  s.path = path;
  for (const char* key : {"base", "out_dir"})
    if (!top[key] || !top[key].IsScalar())
      throw Error(path + ": no '" + key + "': give " +
                  (std::string(key) == "base" ? "base: CONFIG.yaml (relative to the sweep file)"
                                              : "out_dir: FOLDER (the sweep's runs and results go there)"));
  s.base = (fs::path(path).parent_path() / top["base"].as<std::string>()).lexically_normal().string();
  if (!fs::is_regular_file(s.base))
    fail(path, top["base"], "no config '" + s.base + "' (base is relative to the sweep file's folder)");
  s.out_dir = top["out_dir"].as<std::string>();
  if (fs::exists(s.out_dir) && !fs::is_directory(s.out_dir))
    fail(path, top["out_dir"], "out_dir '" + s.out_dir + "' is a file: give the folder the sweep's runs and results "
         "go to (one that does not exist yet is created)");
  if (top["launcher"]) {
    std::stringstream words(top["launcher"].as<std::string>());
    for (std::string w; words >> w;) s.launcher.push_back(w);
  }
  if (top["set"]) s.common = overrides_of(path, top["set"], "set", false);
  for (const std::string& item : command_line) {
    const size_t eq = item.find('=');
    LINATTN_REQUIRE(eq != std::string::npos && eq > 0, "--set ", item, ": give KEY=VALUE, e.g. --set train.device=cuda");
    s.command_line.push_back({item.substr(0, eq), item.substr(eq + 1), "--set " + item});
  }

  // The runs entries (or one empty one), each with its name and its overrides.
  std::vector<Entry> entries;
  const YAML::Node runs = top["runs"];
  if (runs) {
    if (runs.IsSequence() && runs.size() == 0)
      fail(path, runs, "runs is an empty list: give its override maps, e.g. runs: [{name: small, model.hidden_size: "
           "64}], or leave runs out");
    if (!runs.IsSequence()) fail(path, runs, "runs must be a list of override maps");
    for (size_t i = 0; i < runs.size(); ++i) {
      const std::string what = "runs entry " + std::to_string(i + 1);
      Entry e{runs[i].IsMap() && runs[i]["name"] ? runs[i]["name"].as<std::string>() : "",
              overrides_of(path, runs[i], what, true)};
      entries.push_back(e);
    }
  } else {
    entries.push_back({});
  }

  // The grid: its points in order, the last key varying fastest; the same for the tuned values.
  const std::vector<std::vector<Override>> points = combinations(path, top["grid"], "grid", "[64, 128]", s.grid_keys);
  const std::vector<std::vector<Override>> tune_points = tune_points_of(path, top["tune"], s.tune_keys);
  const std::vector<Override> seeds = seeds_of(path, top["seeds"]);
  for (const Override& seed : seeds) s.seeds.push_back(seed.value);
  check_set_once(path, top, tune_points.front(), seeds, s.common, entries);
  std::vector<std::string> searched = s.tune_keys;
  if (!seeds.empty()) searched.push_back("train.seed");
  check_template(path, top, searched);
  if (!runs && s.grid_keys.empty() && s.tune_keys.empty() && seeds.empty())
    throw Error(path + ": nothing to run: give runs, grid, tune or seeds");
  // Without runs and grid there is one configuration, the base config (its tune and seeds).
  s.compare = top["compare"]                 ? top["compare"].as<std::string>()
              : runs || s.grid_keys.empty() ? "runs"
                                            : s.grid_keys.back();
  if (top["compare"] && s.compare != "runs" &&
      std::find(s.grid_keys.begin(), s.grid_keys.end(), s.compare) == s.grid_keys.end())
    fail(path, top["compare"], "compare: '" + s.compare + "' is not a grid key; give one of them, or runs");

  // Run names carry the first tuned key alone when its values tell the tuned points apart
  // ("-lr=1.0e-3", not "-lr=1.0e-3-lr_min=1.0e-4").
  std::set<std::string> firsts;
  for (const auto& tuned : tune_points)
    if (!tuned.empty()) firsts.insert(tuned.front().value);
  const bool first_tells_apart = firsts.size() == tune_points.size();
  // One run: configuration (runs entry, grid point), tuned values, seed.
  std::set<std::string> names;
  auto add_run = [&](const Entry& e, const std::vector<Override>& point, const std::vector<Override>& tuned,
                     const Override& seed) {
    s.runs.emplace_back();
    SweepRun& r = s.runs.back();
    r.entry = e.name;
    if (e.name.empty())
      for (const Override& o : e.overrides) r.entry += (r.entry.empty() ? "" : " ") + o.value;
    r.point = point;
    r.overrides = e.overrides;
    r.overrides.insert(r.overrides.end(), point.begin(), point.end());
    const std::vector<Override> configuration = r.overrides;
    std::string suffix;
    for (const Override& o : tuned) {
      r.tuned += (r.tuned.empty() ? "" : ", ") + o.item();
      if (&o == &tuned.front() || !first_tells_apart)
        suffix += "-" + o.key.substr(o.key.rfind('.') + 1) + "=" + o.value;
    }
    r.overrides.insert(r.overrides.end(), tuned.begin(), tuned.end());
    if (!seed.key.empty()) {
      r.seed = seed.value;
      suffix += "-seed=" + seed.value;
      r.overrides.push_back(seed);
    }
    // The run's config must parse: any problem is reported at the sweep file's line.
    Config config;
    try {
      config = load_config(s.base, s.set_items(s.runs.size() - 1));
    } catch (const Error& err) {
      // A problem of the base config that an override brings out (lr_min above a tuned lr)
      // names the base's line: the run's overrides tell which run it is.
      const std::string message = s.in_sweep_terms(err.what(), s.runs.size() - 1);
      std::string made_by;
      for (const Override& o : r.overrides)
        made_by += (made_by.empty() ? "" : ", ") + o.key + ": " + o.value + " at " + o.where;
      if (message != err.what() || made_by.empty()) throw Error(message);
      throw Error(message + " (in the run of the sweep with " + made_by + ")");
    }
    r.config = folder_name(top["name"] ? templated_name(path, top["name"], e.name, configuration, config)
                                       : default_name(e.name, configuration, point));
    if (r.config.empty()) r.config = tuned.empty() && seed.key.empty() ? "run" + std::to_string(s.runs.size()) : "base";
    r.name = folder_name(r.config + suffix);
    if (!names.insert(r.name).second)
      throw Error(where(path, top["name"] ? top["name"] : top) + ": two runs are both named '" + r.name +
                  "': put the keys that tell them apart into the name template, e.g. name: \"{model.hidden_size}\"");
    for (const Override& o : configuration) {
      const bool from_entry = std::any_of(e.overrides.begin(), e.overrides.end(),
                                          [&](const Override& x) { return x.key == o.key; });
      if (!(s.compare == "runs" ? from_entry : o.key == s.compare))
        r.group += (r.group.empty() ? "" : ", ") + o.item();
    }
    for (const Override& o : r.overrides)
      if (std::find(s.keys.begin(), s.keys.end(), o.key) == s.keys.end()) s.keys.push_back(o.key);
  };
  // Seeds outermost: an interrupted sweep has every configuration's search at the first seeds.
  for (const Override& seed : seeds.empty() ? std::vector<Override>{{}} : seeds)
    for (const Entry& e : entries)
      for (const auto& point : points)
        for (const auto& tuned : tune_points) add_run(e, point, tuned, seed);
  // The command line sets what every run shares (`set:`, the base), not what tells runs apart.
  for (const Override& o : s.command_line)
    if (std::find(s.keys.begin(), s.keys.end(), o.key) != s.keys.end())
      throw Error(o.where + ": the runs of " + path + " differ in '" + o.key + "' (runs, grid, tune or seeds), and a "
                  "--set for every run would make them alike: leave it out, or change the sweep file");
  return s;
}

}  // namespace linattn
