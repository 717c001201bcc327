// A config key declared once: its name, type, bound or choices, one-line doc, and the field of its
// section's struct that holds the value (the field's initializer is the default). The run
// configuration (train/config.cpp) reads, checks, writes back and documents every key from these
// declarations alone; a module below train (a mixer, say) declares its keys with the same type.
//
//   config_key("hidden_size", &ModelConfig::hidden_size, "model width").in(1, 65536)
//   config_key("feature_map", &ModelConfig::feature_map, "...").one_of({{"identity"}, {"elu1"}, {"relu"}})
//   config_choice("schedule", &TrainConfig::schedule, {{Schedule::cosine, {"cosine"}}, ...}, "...")
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace linattn {

// A value as a config file gives it: true/false, a whole number, a number, or text (a choice's name too).
using ConfigValue = std::variant<bool, int64_t, double, std::string>;

enum class ConfigType {
  boolean,
  integer,   // a whole number, at most 2^53 in size
  count,     // a whole number >= 0 (an unsigned field: seeds, example counts)
  number,    // a finite number
  text,
  choice,    // one of the key's choices
  duration,  // seconds, or text with a unit: "90s", "10m", "1.5h"
  custom,    // read and written by code of its own: the layer schedule, a nested section
};

struct ConfigChoice {
  std::string name;
  std::string doc;  // said in the error for a value that is none of them: "fla (-exp(A_log) * ...)"
};

// Where a number must lie: [min, max] with either end open or absent, plus one special value
// outside it ("-1: the mixer's default"); `note` follows the message ("0 = all cores").
struct ConfigBound {
  std::optional<double> min, max;
  bool min_open = false, max_open = false;
  std::optional<double> special;
  std::string special_doc;
  std::string note;

  bool empty() const { return !min && !max; }
  bool holds(double v) const;
  // What the error says after "'key' must be ": "in [1, 65536]", "at least 1", "positive", ">= 0",
  // then the special value and the note.
  std::string message() const;
  // The reference's form: "[1, 2^16]", "> 0", ">= 0", "(0, 16] or -1".
  std::string summary() const;
};

// A number as people write it in a config: 15 significant digits ("0.003", "1e-06", "16777216").
std::string config_number(double v);

// What a key is, whatever struct holds its value.
struct ConfigKeyInfo {
  std::string name;
  ConfigType type = ConfigType::custom;
  std::string doc;
  ConfigBound bound;
  std::vector<ConfigChoice> choices;
  std::string unknown_choice;  // set ("mixer"): a value outside the choices is "unknown mixer 'x'", with a did-you-mean
  std::string shown_default;   // the reference's default where the field's initial value does not say it
  std::string shown_values;    // the reference's values column of a custom key ("a list")
  bool quoted = false;         // written back in double quotes (free text)
};

template <class S>
struct ConfigKey : ConfigKeyInfo {
  std::function<ConfigValue(const S&)> get;  // none for custom keys
  std::function<void(S&, const ConfigValue&)> set;
  std::function<ConfigValue(const S&)> written;  // what config.yaml holds when it is not `get` (a resolved value)
  std::function<bool(const S&)> written_if;      // config.yaml holds the key only where this is true

  // This key as a key of a struct P that holds an S, reached by of(p) (const P& -> const S&, and
  // P& -> S&): how a mixer's settings struct becomes part of the model section (layers/mixer.h).
  template <class P, class Of>
  ConfigKey<P> inside(Of of) const {
    ConfigKey<P> k;
    static_cast<ConfigKeyInfo&>(k) = *this;
    if (get) k.get = [f = get, of](const P& p) { return f(of(p)); };
    if (set) k.set = [f = set, of](P& p, const ConfigValue& v) { f(of(p), v); };
    if (written) k.written = [f = written, of](const P& p) { return f(of(p)); };
    if (written_if) k.written_if = [f = written_if, of](const P& p) { return f(of(p)); };
    return k;
  }

  // Builders, chained after config_key / config_choice.
  ConfigKey& in(double lo, double hi) { return range(lo, false, hi, false); }
  ConfigKey& range(double lo, bool lo_open, double hi, bool hi_open) {
    bound.min = lo;
    bound.min_open = lo_open;
    bound.max = hi;
    bound.max_open = hi_open;
    return *this;
  }
  ConfigKey& at_least(double lo) {
    bound.min = lo;
    return *this;
  }
  ConfigKey& positive() {
    bound.min = 0;
    bound.min_open = true;
    return *this;
  }
  ConfigKey& or_special(double value, std::string what) {
    bound.special = value;
    bound.special_doc = std::move(what);
    return *this;
  }
  ConfigKey& note(std::string text) {
    bound.note = std::move(text);
    return *this;
  }
  ConfigKey& one_of(std::vector<ConfigChoice> names) {
    type = ConfigType::choice;
    choices = std::move(names);
    return *this;
  }
  ConfigKey& unknown_as(std::string noun) {
    unknown_choice = std::move(noun);
    return *this;
  }
  ConfigKey& shown(std::string text) {
    shown_default = std::move(text);
    return *this;
  }
  ConfigKey& duration() {
    type = ConfigType::duration;
    return *this;
  }
  ConfigKey& in_quotes() {
    quoted = true;
    return *this;
  }
  ConfigKey& writes(std::function<ConfigValue(const S&)> value) {
    written = std::move(value);
    return *this;
  }
  ConfigKey& written_only_if(std::function<bool(const S&)> condition) {
    written_if = std::move(condition);
    return *this;
  }
};

// A key bound to field `field` of section struct S: bool, int64_t, uint64_t, double or std::string.
template <class S, class T>
ConfigKey<S> config_key(std::string name, T S::*field, std::string doc) {
  ConfigKey<S> k;
  k.name = std::move(name);
  k.doc = std::move(doc);
  if constexpr (std::is_same_v<T, bool>) k.type = ConfigType::boolean;
  else if constexpr (std::is_same_v<T, int64_t>) k.type = ConfigType::integer;
  else if constexpr (std::is_same_v<T, uint64_t>) k.type = ConfigType::count;
  else if constexpr (std::is_same_v<T, double>) k.type = ConfigType::number;
  else if constexpr (std::is_same_v<T, std::string>) k.type = ConfigType::text;
  else static_assert(sizeof(T) == 0, "a config key is bool, int64_t, uint64_t, double or std::string");
  k.get = [field](const S& s) -> ConfigValue {
    if constexpr (std::is_same_v<T, uint64_t>) return int64_t(s.*field);
    else return s.*field;
  };
  k.set = [field](S& s, const ConfigValue& v) {
    if constexpr (std::is_same_v<T, uint64_t>) s.*field = uint64_t(std::get<int64_t>(v));
    else s.*field = std::get<T>(v);
  };
  return k;
}

// A key whose field is an enum, written as the name of its value: `choices` pairs each value with
// its name (and a doc for the error message).
template <class S, class E>
ConfigKey<S> config_choice(std::string name, E S::*field, std::vector<std::pair<E, ConfigChoice>> choices,
                           std::string doc) {
  static_assert(std::is_enum_v<E>);
  ConfigKey<S> k;
  k.name = std::move(name);
  k.doc = std::move(doc);
  k.type = ConfigType::choice;
  for (const auto& c : choices) k.choices.push_back(c.second);
  k.get = [field, choices](const S& s) -> ConfigValue {
    for (const auto& [value, choice] : choices)
      if (s.*field == value) return choice.name;
    return std::string("?");
  };
  k.set = [field, choices](S& s, const ConfigValue& v) {
    for (const auto& [value, choice] : choices)
      if (std::get<std::string>(v) == choice.name) s.*field = value;
  };
  return k;
}

// A key that code of its own reads and writes (a list, a nested section): declared so that the
// reference documents it and the reader accepts it.
template <class S>
ConfigKey<S> config_custom(std::string name, std::string values, std::string doc) {
  ConfigKey<S> k;
  k.name = std::move(name);
  k.doc = std::move(doc);
  k.shown_default = "none";
  k.shown_values = std::move(values);
  return k;
}

}  // namespace linattn
