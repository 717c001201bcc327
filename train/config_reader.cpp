#include "train/config_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "train/config_keys.h"

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

}  // namespace

std::string did_you_mean(const std::string& key, const std::vector<std::string>& known, const std::string& kinds) {
  std::string best;
  size_t best_d = 4;
  for (const std::string& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  if (!best.empty()) return " (did you mean '" + best + "'?)";
  std::string all;
  for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
  return " (known " + kinds + ": " + all + ")";
}

std::string yaml_tab_hint(const std::string& text, int line) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  for (int at : {line, line - 1}) {
    if (at < 0 || at >= int(lines.size())) continue;
    const std::string& l = lines[size_t(at)];
    const size_t indent = l.find_first_not_of(" \t");
    if (l.substr(0, indent).find('\t') != std::string::npos)
      return "; line " + std::to_string(at + 1) + " is indented with a tab: YAML indents with spaces only (replace "
             "the tab with spaces)";
  }
  return "";
}

std::string Reader::location(const YAML::Node& node, const std::string& path) const {
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

void Reader::fail(const YAML::Node& node, const std::string& path, const std::string& msg) const {
  throw Error(location(node, path) + ": " + msg);
}

void Reader::check_keys(const YAML::Node& map, const std::string& path, const std::vector<std::string>& known) const {
  if (!map || map.IsNull()) return;
  if (!map.IsMap()) fail(map, path, "'" + path + "' must be a mapping of keys to values");
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(kv.first, path.empty() ? key : path + "." + key,
           "unknown key '" + key + "'" + (path.empty() ? "" : " in '" + path + "'") + did_you_mean(key, known));
  }
}

void Reader::require(bool ok, const YAML::Node& map, const std::string& path, const std::string& key,
             const std::string& msg) const {
  if (ok) return;
  YAML::Node at = map && map.IsMap() && map[key] ? map[key] : map;
  fail(at, path + "." + key, msg);
}

ConfigValue Reader::value(const YAML::Node& node, const std::string& full, const std::string& name, ConfigType type) const {
  if (type == ConfigType::duration) return duration(node, full, name);
  if (type == ConfigType::text || type == ConfigType::choice) {
    if (!node.IsScalar()) wrong_type(node, full, name, "a string");
    return node.as<std::string>();
  }
  if (type == ConfigType::boolean) {
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
      wrong_type(node, full, name, "true or false");
    }
  }
  double d = 0;
  try {
    d = node.as<double>();
  } catch (const YAML::Exception&) {
    wrong_type(node, full, name, type == ConfigType::number ? "a number" : "an integer");
  }
  const std::string given = node.as<std::string>();
  if (type == ConfigType::number) {
    if (!std::isfinite(d)) fail(node, full, "'" + name + "' must be a finite number, got " + given);
    return d;
  }
  // The text read again with a 64-bit mantissa where long double has one (x86-64: 80-bit): a double
  // rounds 9007199254740993 to 2^53 and 4503599627370496.5 to a whole number, without a word.
  char* end = nullptr;
  const long double exact = std::strtold(given.c_str(), &end);
  const long double whole = !given.empty() && *end == '\0' ? exact : (long double)d;
  if (whole != std::floor(whole)) fail(node, full, "'" + name + "' must be a whole number, got " + given);
  // Whole numbers up to 2^53 convert exactly; beyond, no key means anything.
  if (!(std::fabs(whole) <= 9007199254740992.0L))
    fail(node, full, "'" + name + "' is too large: " + given + " (at most 2^53 = 9007199254740992)");
  if (type == ConfigType::count && d < 0) fail(node, full, "'" + name + "' must not be negative, got " + given);
  return int64_t(whole);
}

void Reader::wrong_type(const YAML::Node& node, const std::string& full, const std::string& name,
                             const char* expected) const {
  fail(node, full, "'" + name + "' has the wrong type: expected " + expected + ", got '" +
                       (node.IsScalar() ? node.as<std::string>() : std::string("a list or mapping")) + "'");
}

void Reader::check_choice(const YAML::Node& node, const std::string& full, const std::string& name,
                  const std::vector<ConfigChoice>& choices, const std::string& unknown_as,
                  const std::string& given) const {
  std::vector<std::string> names;
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    names.push_back(choices[i].name);
    list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i].name;
    if (!choices[i].doc.empty()) list += " (" + choices[i].doc + ")";
  }
  if (std::find(names.begin(), names.end(), given) != names.end()) return;
  if (!unknown_as.empty()) fail(node, full, "unknown " + unknown_as + " '" + given + "'" + did_you_mean(given, names, unknown_as + "s"));
  fail(node, full, "'" + name + "' must be " + list + ", got '" + given + "'");
}

double Reader::duration(const YAML::Node& node, const std::string& full, const std::string& name) const {
  std::string s = node.IsScalar() ? node.as<std::string>() : "";
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
  fail(node, full, "'" + name + "' must be a duration up to a year (8784h), like 600, \"90s\", \"10m\" or \"1.5h\", got '" +
                       (node.IsScalar() ? node.as<std::string>() : std::string("a list or mapping")) + "'");
}

YAML::Node node_at(const YAML::Node& node, const std::string& path) {
  if (path.empty()) return node;
  size_t dot = path.find('.');
  std::string part = path.substr(0, dot), rest = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (node.IsMap() && node[part]) return node_at(node[part], rest);
  bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (node.IsSequence() && index && std::stoul(part) < node.size()) return node_at(node[std::stoul(part)], rest);
  return node;
}

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

YAML::Node section_node(const YAML::Node& root, const std::string& path) {
  YAML::Node node = root;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '.');) {
    if (!node || !node.IsMap() || !node[part]) return YAML::Node();
    node.reset(node[part]);  // (operator= would overwrite the node it refers to)
  }
  return node;
}

}  // namespace linattn
