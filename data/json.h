// JSON through nlohmann-json, with syntax errors that say where in the user's file they are.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace linattn::data {

using Json = nlohmann::json;

// Parses one JSON document (strings must be UTF-8; \u escapes, surrogate pairs included, become
// UTF-8). A syntax error throws linattn::Error naming `source`, the line, the column and the byte
// offset: "encoder.json:3:17 (byte 41): syntax error while parsing object separator - ...".
Json parse_json(std::string_view text, const std::string& source);

}  // namespace linattn::data
