// A small JSON reader (RFC 8259): enough for tokenizer files such as GPT-2's encoder.json.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace linattn::data {

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  double number = 0;
  std::string string;                                     // UTF-8
  std::vector<JsonValue> array;
  std::vector<std::pair<std::string, JsonValue>> object;  // members in file order

  const JsonValue* find(std::string_view key) const;  // first member named key, or nullptr
};

// Parses one JSON document. Errors throw linattn::Error naming `source`, the line, the column and the
// byte offset (e.g. "encoder.json:3:17 (byte 41): expected ':' after an object key").
JsonValue parse_json(std::string_view text, const std::string& source);

// `s` (UTF-8) as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

}  // namespace linattn::data
