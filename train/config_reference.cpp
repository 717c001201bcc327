// README.md's config reference, printed from the declarations of config_keys.cpp.
#include <sstream>

#include "train/config.h"
#include "train/config_keys.h"

namespace linattn {

namespace {

// Markdown table cells hold no bare '|'.
std::string cell(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

template <class S>
std::string shown_default(const ConfigKey<S>& key) {
  if (!key.shown_default.empty()) return key.shown_default;
  const ConfigValue v = key.get(S{});
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) return config_number(*d);
  const std::string& s = std::get<std::string>(v);
  return s.empty() ? "`\"\"`" : "`" + s + "`";
}

template <class S>
std::string shown_values(const ConfigKey<S>& key) {
  std::string values;
  switch (key.type) {
    case ConfigType::boolean: return "`true`, `false`";
    case ConfigType::count: return "integer >= 0";
    case ConfigType::text: return "text";
    case ConfigType::duration: return "seconds, or `90s`, `10m`, `1.5h` (at most 8784h)";
    case ConfigType::custom: return key.shown_values;
    case ConfigType::choice:
      for (const ConfigChoice& c : key.choices) values.append(values.empty() ? "`" : ", `").append(c.name).append("`");
      return values;
    case ConfigType::integer: values = "integer"; break;
    case ConfigType::number: values = "number"; break;
  }
  if (!key.bound.empty()) values.append(key.bound.min && key.bound.max ? " in " : " ").append(key.bound.summary());
  return values;
}

// The rows of a section's keys, each name after `prefix`; a custom key that is a nested section
// gives the nested section's rows in its place.
template <class S>
void rows(std::ostream& out, const std::string& path, const std::string& prefix, const std::vector<ConfigKey<S>>& keys) {
  for (const ConfigKey<S>& key : keys) {
    bool nested = false;
    for_each_section([&](const auto& section) {
      if (section.path != path + "." + key.name) return;
      rows(out, section.path, prefix + key.name + ".", section.keys);
      nested = true;
    });
    if (nested) continue;
    out << "| `" << prefix << key.name << "` | " << cell(shown_default(key)) << " | " << cell(shown_values(key))
        << " | " << cell(key.doc) << " |\n";
  }
}

template <class S>
void table(std::ostream& out, const std::string& heading, const std::string& path,
           const std::vector<ConfigKey<S>>& keys) {
  out << heading << "\n\n| key | default | values | meaning |\n|---|---|---|---|\n";
  rows(out, path, "", keys);
  out << "\n";
}

}  // namespace

std::string config_reference_markdown() {
  std::ostringstream out;
  for_each_section([&](const auto& section) {
    const std::string path = section.path;
    if (path.find('.') != std::string::npos) return;  // in its parent's table
    const std::string note = section.note;
    table(out, "**" + path + "**" + (note.empty() ? "" : " (" + note + ")"), path, section.keys);
    if (path == "model")
      table(out, "**model.layers[i]** (each entry of `model.layers`; `model.attn` takes them all but `mixer`)",
            "model.layers[i]", layer_keys());
  });
  return out.str();
}

}  // namespace linattn
