// Reading a config's YAML against the key declarations (core/config_key.h): the --set items
// applied to the tree, the keys of a mapping checked (with a did-you-mean), each value read and
// checked against its declaration (type, bound, choices). Every problem is reported at
// FILE:LINE:COL of the value, or as "--set KEY=VALUE" when a --set gave it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "core/config_key.h"

namespace linattn {

// --set items by the dotted path they set ("train.lr" -> "train.lr=1e-4").
using Overrides = std::map<std::string, std::string>;

// Applies "a.b.c=value" to the tree; the value is parsed as YAML (numbers, booleans, lists).
void apply_override(YAML::Node root, const std::string& item, Overrides& overridden);
// YAML keeps the first of two equal keys and drops the other without a word: refuse them.
void check_duplicate_keys(const YAML::Node& node, const std::string& path, const std::string& source);
// The node at a dotted path below `node` ("attn.layers.1"), or the deepest one that exists.
YAML::Node node_at(const YAML::Node& node, const std::string& path);
// The mapping of a section ("data.mqar") in the file, or a null node.
YAML::Node section_node(const YAML::Node& root, const std::string& path);
// " (did you mean 'hidden_size'?)", or the list of known `kinds` when none is close: " (known keys:
// ...)", " (known mixers: ...)".
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known,
                         const std::string& kinds = "keys");

// After a YAML syntax error at `line` (from 0) of `text`: "; line N is indented with a tab: YAML
// indents with spaces only" when that line (or the one before) is, else "".
std::string yaml_tab_hint(const std::string& text, int line);

class Reader {
 public:
  // `locations` receives "FILE:LINE:COL" (or "--set KEY=VALUE") of every key read, by dotted path.
  Reader(const std::string& source, const Overrides& overridden, std::map<std::string, std::string>& locations)
      : source_(source), overridden_(overridden), locations_(locations) {}

  // Where `node`, at dotted path `path`, came from: the file's line and column, or the --set that
  // holds it (or created its section, which then has no position in the file).
  std::string location(const YAML::Node& node, const std::string& path) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& msg) const;
  // Every key of `map` (the section at `path`) must be one of `known`.
  void check_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) const;
  // A check of several keys: reported at `key`'s value in `map` when it is there, else at the section.
  void require(bool ok, const YAML::Node& map, const std::string& path, const std::string& key,
               const std::string& msg) const;

  // The value of `node` (at dotted path `full`) as a value of `type`, or an error naming `name`.
  ConfigValue value(const YAML::Node& node, const std::string& full, const std::string& name, ConfigType type) const;

  // Reads `key` from `map` (the section at `path`) into `into`; a key the map lacks keeps its default.
  template <class S>
  void read(const YAML::Node& map, const std::string& path, const ConfigKey<S>& key, S& into) const {
    if (key.type == ConfigType::custom || !map || !map.IsMap() || !map[key.name]) return;
    const std::string full = path + "." + key.name;
    locations_[full] = location(map[key.name], full);
    read_node(map[key.name], full, key, into);
  }

  // Reads `node`, the value of `key`, into `into`, checking its type and its bound or choices.
  template <class S>
  void read_node(const YAML::Node& node, const std::string& full, const ConfigKey<S>& key, S& into) const {
    const ConfigValue v = value(node, full, key.name, key.type);
    if (key.type == ConfigType::choice)
      check_choice(node, full, key.name, key.choices, key.unknown_choice, std::get<std::string>(v));
    const double* d = std::get_if<double>(&v);
    const int64_t* i = std::get_if<int64_t>(&v);
    if ((d || i) && !key.bound.holds(d ? *d : double(*i)))
      fail(node, full, "'" + key.name + "' must be " + key.bound.message());
    key.set(into, v);
  }

 private:
  [[noreturn]] void wrong_type(const YAML::Node& node, const std::string& full, const std::string& name,
                               const char* expected) const;
  // "'schedule' must be cosine, linear or constant, got 'x'", or with `unknown_as` ("mixer"):
  // "unknown mixer 'x' (did you mean ...)".
  void check_choice(const YAML::Node& node, const std::string& full, const std::string& name,
                    const std::vector<ConfigChoice>& choices, const std::string& unknown_as,
                    const std::string& given) const;
  // Seconds, or a string with a unit: "90s", "10m", "1.5h"; at most a year.
  double duration(const YAML::Node& node, const std::string& full, const std::string& name) const;

  std::string source_;
  const Overrides& overridden_;
  std::map<std::string, std::string>& locations_;
};

}  // namespace linattn
