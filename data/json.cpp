#include "data/json.h"

#include "core/error.h"

namespace linattn::data {

Json parse_json(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included.
    const size_t at = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const size_t line_start = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
    size_t line = 1;
    for (size_t k = 0; k < at; ++k) line += text[k] == '\n';
    const size_t column = line_start == std::string_view::npos ? at + 1 : at - line_start;
    // e.what(): "[json.exception.parse_error.101] parse error at line 2, column 6: syntax error ...".
    const std::string what = e.what();
    const size_t detail = what.find(": ", what.find("parse error"));
    LINATTN_FAIL(source, ":", line, ":", column, " (byte ", at, "): ",
                 detail == std::string::npos ? what : what.substr(detail + 2));
  }
}

}  // namespace linattn::data
