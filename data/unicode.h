// UTF-8 decoding and the Unicode classes GPT-2's pre-tokenizer needs: letters (\p{L}), numbers (\p{N})
// and whitespace (JavaScript's \s, the reference encoder's). The tables cover every code point
// (data/unicode_tables.cpp, generated from node's Unicode data by data/unicode_tables.gen.js).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace linattn::data {

struct CodeRange {
  uint32_t first, last;  // inclusive
};

namespace unicode_tables {
extern const CodeRange letter[];
extern const size_t letter_count;
extern const CodeRange number[];
extern const size_t number_count;
extern const CodeRange space[];
extern const size_t space_count;
extern const char* const version;  // the Unicode version the tables were generated from
}  // namespace unicode_tables

bool is_letter(uint32_t cp);  // general category L
bool is_number(uint32_t cp);  // general category N
bool is_space(uint32_t cp);   // JavaScript's \s: White_Space less U+0085, plus U+FEFF

// Decodes the code point starting at s[0] (n bytes available). Returns its length in bytes, or 0 when
// the bytes there are not well-formed UTF-8 (overlong forms, surrogates and values above U+10FFFF are
// not well-formed).
int decode_utf8(const unsigned char* s, size_t n, uint32_t& cp);

// The byte offset of the first byte that is not well-formed UTF-8, or std::string_view::npos.
size_t find_invalid_utf8(std::string_view text);

}  // namespace linattn::data
