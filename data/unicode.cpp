#include "data/unicode.h"

#include <algorithm>

namespace linattn::data {

namespace {

bool in_ranges(const CodeRange* ranges, size_t count, uint32_t cp) {
  const CodeRange* end = ranges + count;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

}  // namespace

bool is_letter(uint32_t cp) {
  if (cp < 128) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(unicode_tables::letter, unicode_tables::letter_count, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 128) return cp >= '0' && cp <= '9';
  return in_ranges(unicode_tables::number, unicode_tables::number_count, cp);
}

bool is_space(uint32_t cp) {
  if (cp < 128) return cp == ' ' || (cp >= '\t' && cp <= '\r');
  return in_ranges(unicode_tables::space, unicode_tables::space_count, cp);
}

int decode_utf8(const unsigned char* s, size_t n, uint32_t& cp) {
  if (n == 0) return 0;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  int len;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;  // a continuation byte or 0xF8..0xFF where a code point should start
  }
  if (n < size_t(len)) return 0;
  for (int i = 1; i < len; ++i) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    const int len = decode_utf8(s + i, n - i, cp);
    if (len == 0) return i;
    i += size_t(len);
  }
  return std::string_view::npos;
}

}  // namespace linattn::data
