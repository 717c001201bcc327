#include "data/json.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace linattn::data {

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : object)
    if (k == key) return &v;
  return nullptr;
}

namespace {

constexpr int max_depth = 256;

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  JsonValue document() {
    JsonValue v = value(0);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, column = 1;
      else ++column;
    }
    LINATTN_FAIL(source_, ":", line, ":", column, " (byte ", i_, "): ", what);
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  bool consume(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  JsonValue value(int depth) {
    if (depth > max_depth) fail("nesting deeper than 256 levels");
    skip_space();
    if (i_ == s_.size()) fail("unexpected end of input, expected a value");
    JsonValue v;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = JsonValue::Kind::object;
      ++i_;
      skip_space();
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return v;
      }
      while (true) {
        skip_space();
        if (i_ == s_.size() || s_[i_] != '"') fail("expected a string key in an object");
        std::string key = string();
        skip_space();
        if (i_ == s_.size() || s_[i_] != ':') fail("expected ':' after an object key");
        ++i_;
        v.object.emplace_back(std::move(key), value(depth + 1));
        skip_space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return v;
        }
        fail("expected ',' or '}' in an object");
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::array;
      ++i_;
      skip_space();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.array.push_back(value(depth + 1));
        skip_space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return v;
        }
        fail("expected ',' or ']' in an array");
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.string = string();
      return v;
    }
    if (consume("true")) {
      v.kind = JsonValue::Kind::boolean;
      v.boolean = true;
      return v;
    }
    if (consume("false")) {
      v.kind = JsonValue::Kind::boolean;
      return v;
    }
    if (consume("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = JsonValue::Kind::number;
      v.number = number();
      return v;
    }
    fail("expected a value (object, array, string, number, true, false or null)");
  }

  // number = [ minus ] int [ frac ] [ exp ]
  double number() {
    const size_t start = i_;
    auto digits = [&] {
      const size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (digits() == 0) {
      fail("expected digits in a number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (digits() == 0) fail("expected digits after '.' in a number");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("expected digits in a number's exponent");
    }
    const std::string text(s_.substr(start, i_ - start));
    return std::strtod(text.c_str(), nullptr);
  }

  uint32_t hex4() {
    if (s_.size() - i_ < 4) fail("truncated \\u escape");
    uint32_t u = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char h = s_[i_];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') u |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') u |= uint32_t(h - 'A' + 10);
      else fail("expected 4 hex digits after \\u");
    }
    return u;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ == s_.size()) fail("unterminated string");
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string (escape it)");
      if (c != '\\') {
        out += c;
        ++i_;
        continue;
      }
      ++i_;
      if (i_ == s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate must be followed by a low one
            if (!consume("\\u")) fail("a high surrogate \\u escape without its low surrogate");
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate \\u escape without its low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("a low surrogate \\u escape without a high one");
          }
          append_utf8(out, cp);
          break;
        }
        default: --i_; fail("unknown escape in a string");
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  size_t i_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text, const std::string& source) { return Parser(text, source).document(); }

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace linattn::data
