// UTF-8 decoding and the Unicode data the tokenizers need: general categories (\p{L}, \p{Lu}, \p{N},
// ... of pre-tokenizer patterns), whitespace (JavaScript's \s, the reference tokenizers'), and NFC.
// The tables cover every code point (data/unicode_tables.cpp, generated from node's Unicode data by
// data/unicode_tables.gen.js, so they agree with the node references).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace linattn::data {

struct CodeRange {
  uint32_t first, last;  // inclusive
};
struct CategoryRange {
  uint32_t first, last;  // inclusive
  uint8_t value;
};
struct Decomposition {
  uint32_t cp, offset, length;  // the code points decomposition_pool[offset, offset + length)
};
struct Composition {
  uint32_t first, second, composite;
};

namespace unicode_tables {
extern const CategoryRange category[];
extern const size_t category_count;
extern const char* const category_names[];
extern const CodeRange space[];
extern const size_t space_count;
extern const Decomposition decomposition[];
extern const size_t decomposition_count;
extern const uint32_t decomposition_pool[];
extern const CategoryRange ordering[];
extern const size_t ordering_count;
extern const Composition composition[];
extern const size_t composition_count;
extern const char* const version;  // the Unicode version the tables were generated from
}  // namespace unicode_tables

// The general categories, in the order of unicode_tables::category_names (Cn: unassigned).
enum class Category : uint8_t {
  Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe,
  Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co
};
constexpr int category_total = 30;

Category category(uint32_t cp);
// The categories a property name of a pattern stands for, as a bit set (bit k: Category k): "L",
// "Letter", "Lu", "Uppercase_Letter", ...; 0 when the name is not a general category.
uint32_t category_mask(std::string_view name);

bool is_letter(uint32_t cp);  // general category L
bool is_number(uint32_t cp);  // general category N
bool is_space(uint32_t cp);   // JavaScript's \s: White_Space less U+0085, plus U+FEFF

// Decodes the code point starting at s[0] (n bytes available). Returns its length in bytes, or 0 when
// the bytes there are not well-formed UTF-8 (overlong forms, surrogates and values above U+10FFFF are
// not well-formed).
int decode_utf8(const unsigned char* s, size_t n, uint32_t& cp);

// As decode_utf8, but never fails: an ill-formed sequence decodes to U+FFFD, and the length returned
// is that of its maximal subpart (at least 1), as the WHATWG decoder (node's, a browser's) and
// Python's errors="replace" read it.
int decode_utf8_lossy(const unsigned char* s, size_t n, uint32_t& cp);

void append_utf8(uint32_t cp, std::string& out);

// The byte offset of the first byte that is not well-formed UTF-8, or std::string_view::npos.
size_t find_invalid_utf8(std::string_view text);

// The text with every ill-formed sequence replaced by U+FFFD (see decode_utf8_lossy).
std::string replace_invalid_utf8(std::string_view text);

// Appends the Unicode Normalization Form C of well-formed UTF-8 text: canonical decomposition,
// canonical ordering, canonical composition. Text that NFC leaves as it is (all of ASCII, for one) is
// copied with one pass of table look-ups.
void append_nfc(std::string_view text, std::string& out);

}  // namespace linattn::data
