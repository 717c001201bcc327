#include "data/unicode.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace linattn::data {

namespace {

constexpr uint32_t max_cp = 0x110000;

// A byte per code point, stored in two stages: blocks of 256 code points, identical blocks shared.
class ByteTable {
 public:
  template <class F>
  explicit ByteTable(F value_of) {
    std::vector<uint8_t> block(256);
    for (uint32_t b = 0; b < max_cp / 256; ++b) {
      for (uint32_t k = 0; k < 256; ++k) block[k] = value_of(b * 256 + k);
      size_t found = blocks_.size() / 256;
      for (size_t s = 0; s < blocks_.size() / 256; ++s)
        if (std::equal(block.begin(), block.end(), blocks_.begin() + long(s * 256))) {
          found = s;
          break;
        }
      if (found == blocks_.size() / 256) blocks_.insert(blocks_.end(), block.begin(), block.end());
      index_[b] = uint16_t(found);
    }
  }
  uint8_t operator[](uint32_t cp) const { return cp < max_cp ? blocks_[size_t(index_[cp >> 8]) * 256 + (cp & 255)] : 0; }

 private:
  uint16_t index_[max_cp / 256];
  std::vector<uint8_t> blocks_;
};

// The value of the range holding each code point, walking the sorted ranges once.
template <class Range>
auto ranges_value(const Range* ranges, size_t count) {
  return [ranges, count, k = size_t(0)](uint32_t cp) mutable -> uint8_t {
    while (k < count && ranges[k].last < cp) ++k;
    return k < count && ranges[k].first <= cp ? ranges[k].value : 0;
  };
}

const ByteTable& category_table() {
  static const auto table =
      std::make_unique<ByteTable>(ranges_value(unicode_tables::category, unicode_tables::category_count));
  return *table;
}

bool in_ranges(const CodeRange* ranges, size_t count, uint32_t cp) {
  const CodeRange* end = ranges + count;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

constexpr uint32_t bit(Category c) { return 1u << uint32_t(c); }
constexpr uint32_t letters = bit(Category::Lu) | bit(Category::Ll) | bit(Category::Lt) | bit(Category::Lm) | bit(Category::Lo);
constexpr uint32_t marks = bit(Category::Mn) | bit(Category::Mc) | bit(Category::Me);
constexpr uint32_t numbers = bit(Category::Nd) | bit(Category::Nl) | bit(Category::No);
constexpr uint32_t punctuation = bit(Category::Pc) | bit(Category::Pd) | bit(Category::Ps) | bit(Category::Pe) |
                                 bit(Category::Pi) | bit(Category::Pf) | bit(Category::Po);
constexpr uint32_t symbols = bit(Category::Sm) | bit(Category::Sc) | bit(Category::Sk) | bit(Category::So);
constexpr uint32_t separators = bit(Category::Zs) | bit(Category::Zl) | bit(Category::Zp);
constexpr uint32_t others = bit(Category::Cc) | bit(Category::Cf) | bit(Category::Cs) | bit(Category::Co) | bit(Category::Cn);

// ---- NFC ----

// Hangul syllables compose and decompose by arithmetic (Unicode 3.12).
constexpr uint32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
constexpr uint32_t l_count = 19, v_count = 21, t_count = 28, n_count = v_count * t_count, s_count = l_count * n_count;

// Per code point: its canonical ordering rank (bits 0-5), whether it decomposes (bit 6), whether it is
// the second of a composition (bit 7). A code point with none of these (NFC's "inert" characters here)
// starts a stretch NFC cannot join to what comes before.
constexpr uint8_t decomposes = 0x40, composes_second = 0x80, rank_bits = 0x3F;

const ByteTable& nfc_table() {
  static const auto table = [] {
    std::vector<uint8_t> flags(max_cp, 0);
    auto ordering = ranges_value(unicode_tables::ordering, unicode_tables::ordering_count);
    for (uint32_t cp = 0; cp < max_cp; ++cp) flags[cp] = ordering(cp);
    for (size_t k = 0; k < unicode_tables::decomposition_count; ++k) flags[unicode_tables::decomposition[k].cp] |= decomposes;
    for (size_t k = 0; k < unicode_tables::composition_count; ++k) flags[unicode_tables::composition[k].second] |= composes_second;
    for (uint32_t cp = s_base; cp < s_base + s_count; ++cp) flags[cp] |= decomposes;
    for (uint32_t cp = v_base; cp < v_base + v_count; ++cp) flags[cp] |= composes_second;
    for (uint32_t cp = t_base + 1; cp < t_base + t_count; ++cp) flags[cp] |= composes_second;
    return std::make_unique<ByteTable>([&](uint32_t cp) { return flags[cp]; });
  }();
  return *table;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= s_base && cp < s_base + s_count) {
    const uint32_t s = cp - s_base;
    out.push_back(l_base + s / n_count);
    out.push_back(v_base + (s % n_count) / t_count);
    if (s % t_count) out.push_back(t_base + s % t_count);
    return;
  }
  const Decomposition* begin = unicode_tables::decomposition;
  const Decomposition* end = begin + unicode_tables::decomposition_count;
  const Decomposition* it = std::lower_bound(begin, end, cp, [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), unicode_tables::decomposition_pool + it->offset,
             unicode_tables::decomposition_pool + it->offset + it->length);
}

// The primary composite of (first, second), or 0.
uint32_t compose(uint32_t first, uint32_t second) {
  if (first >= l_base && first < l_base + l_count && second >= v_base && second < v_base + v_count)
    return s_base + ((first - l_base) * v_count + (second - v_base)) * t_count;
  if (first >= s_base && first < s_base + s_count && (first - s_base) % t_count == 0 && second > t_base &&
      second < t_base + t_count)
    return first + (second - t_base);
  const Composition* begin = unicode_tables::composition;
  const Composition* end = begin + unicode_tables::composition_count;
  const Composition* it = std::lower_bound(begin, end, std::pair{first, second}, [](const Composition& c, std::pair<uint32_t, uint32_t> key) {
    return c.first != key.first ? c.first < key.first : c.second < key.second;
  });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

// NFC of a stretch of code points (Unicode 3.11: decomposition, canonical ordering, composition).
void nfc_stretch(const std::vector<uint32_t>& cps, std::string& out) {
  const ByteTable& table = nfc_table();
  thread_local std::vector<uint32_t> d, composed;
  d.clear();
  for (const uint32_t cp : cps) decompose(cp, d);
  auto rank = [&](uint32_t cp) { return table[cp] & rank_bits; };
  for (size_t i = 1; i < d.size(); ++i)  // a stable insertion sort of each run of marks
    for (size_t j = i; j > 0 && rank(d[j]) && rank(d[j - 1]) > rank(d[j]); --j) std::swap(d[j - 1], d[j]);
  composed.clear();
  long starter = -1;
  int last_rank = 0;
  for (const uint32_t c : d) {
    const int r = rank(c);
    // c joins the last starter unless something between blocks it: a starter, or a mark of rank >= its own.
    if (starter >= 0 && (long(composed.size()) - 1 == starter || (last_rank != 0 && last_rank < r)))
      if (const uint32_t p = compose(composed[size_t(starter)], c)) {
        composed[size_t(starter)] = p;
        continue;
      }
    if (r == 0) starter = long(composed.size()), last_rank = 0;
    else last_rank = r;
    composed.push_back(c);
  }
  for (const uint32_t cp : composed) append_utf8(cp, out);
}

}  // namespace

Category category(uint32_t cp) { return Category(category_table()[cp]); }

uint32_t category_mask(std::string_view name) {
  struct Alias {
    const char *short_name, *long_name;
    uint32_t mask;
  };
  static const Alias aliases[] = {
      {"L", "Letter", letters},          {"LC", "Cased_Letter", bit(Category::Lu) | bit(Category::Ll) | bit(Category::Lt)},
      {"M", "Mark", marks},              {"N", "Number", numbers},
      {"P", "Punctuation", punctuation}, {"S", "Symbol", symbols},
      {"Z", "Separator", separators},    {"C", "Other", others},
      {"Lu", "Uppercase_Letter", bit(Category::Lu)}, {"Ll", "Lowercase_Letter", bit(Category::Ll)},
      {"Lt", "Titlecase_Letter", bit(Category::Lt)}, {"Lm", "Modifier_Letter", bit(Category::Lm)},
      {"Lo", "Other_Letter", bit(Category::Lo)},     {"Mn", "Nonspacing_Mark", bit(Category::Mn)},
      {"Mc", "Spacing_Mark", bit(Category::Mc)},     {"Me", "Enclosing_Mark", bit(Category::Me)},
      {"Nd", "Decimal_Number", bit(Category::Nd)},   {"Nl", "Letter_Number", bit(Category::Nl)},
      {"No", "Other_Number", bit(Category::No)},     {"Pc", "Connector_Punctuation", bit(Category::Pc)},
      {"Pd", "Dash_Punctuation", bit(Category::Pd)}, {"Ps", "Open_Punctuation", bit(Category::Ps)},
      {"Pe", "Close_Punctuation", bit(Category::Pe)}, {"Pi", "Initial_Punctuation", bit(Category::Pi)},
      {"Pf", "Final_Punctuation", bit(Category::Pf)}, {"Po", "Other_Punctuation", bit(Category::Po)},
      {"Sm", "Math_Symbol", bit(Category::Sm)},      {"Sc", "Currency_Symbol", bit(Category::Sc)},
      {"Sk", "Modifier_Symbol", bit(Category::Sk)},  {"So", "Other_Symbol", bit(Category::So)},
      {"Zs", "Space_Separator", bit(Category::Zs)},  {"Zl", "Line_Separator", bit(Category::Zl)},
      {"Zp", "Paragraph_Separator", bit(Category::Zp)}, {"Cc", "Control", bit(Category::Cc)},
      {"Cf", "Format", bit(Category::Cf)},           {"Cs", "Surrogate", bit(Category::Cs)},
      {"Co", "Private_Use", bit(Category::Co)},      {"Cn", "Unassigned", bit(Category::Cn)},
  };
  for (const Alias& a : aliases)
    if (name == a.short_name || name == a.long_name) return a.mask;
  return 0;
}

bool is_letter(uint32_t cp) {
  if (cp < 128) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return (letters >> uint32_t(category(cp))) & 1;
}

bool is_number(uint32_t cp) {
  if (cp < 128) return cp >= '0' && cp <= '9';
  return (numbers >> uint32_t(category(cp))) & 1;
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

int decode_utf8_lossy(const unsigned char* s, size_t n, uint32_t& cp) {
  if (const int len = decode_utf8(s, n, cp)) return len;
  cp = 0xFFFD;
  // The maximal subpart: the lead byte and the continuation bytes that could still have led to a
  // well-formed sequence (Unicode 3.9, table 3-7: the second byte's range depends on the lead).
  const unsigned char b0 = s[0];
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) need = 1;
  else if (b0 >= 0xE0 && b0 <= 0xEF) need = 2, lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
  else if (b0 >= 0xF0 && b0 <= 0xF4) need = 3, lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
  else return 1;
  int len = 1;
  for (int k = 0; k < need && size_t(len) < n; ++k, lo = 0x80, hi = 0xBF) {
    if (s[len] < lo || s[len] > hi) break;
    ++len;
  }
  return len;
}

void append_utf8(uint32_t cp, std::string& out) {
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

std::string replace_invalid_utf8(std::string_view text) {
  size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return std::string(text);
  std::string out(text.substr(0, bad));
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = bad; i < text.size();) {
    uint32_t cp;
    const int len = decode_utf8_lossy(s + i, text.size() - i, cp);
    append_utf8(cp, out);
    i += size_t(len);
  }
  return out;
}

void append_nfc(std::string_view text, std::string& out) {
  const ByteTable& table = nfc_table();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  thread_local std::vector<uint32_t> stretch;
  // Copies text verbatim up to a code point NFC may change or join; that one, the inert code point
  // before it (it may compose with what follows) and what follows up to the next inert code point go
  // through nfc_stretch. An inert code point (rank 0, no decomposition, never a second) cannot take
  // part in anything before it, so the stretches are independent.
  size_t copied = 0, i = 0, prev = 0;  // prev: where the code point before i starts
  while (i < n) {
    uint32_t cp;
    int len = s[i] < 0x80 ? (cp = s[i], 1) : decode_utf8(s + i, n - i, cp);
    if (len == 0) cp = 0xFFFD, len = decode_utf8_lossy(s + i, n - i, cp);
    if (s[i] < 0xCC || table[cp] == 0) {  // below U+0300 nothing decomposes, reorders or composes as a second
      prev = i;
      i += size_t(len);
      continue;
    }
    const size_t start = i > copied ? prev : i;
    out.append(text.substr(copied, start - copied));
    stretch.clear();
    size_t j = start;
    while (j < n) {
      uint32_t c;
      int l = decode_utf8(s + j, n - j, c);
      if (l == 0) c = 0xFFFD, l = decode_utf8_lossy(s + j, n - j, c);
      if (j > i && table[c] == 0) break;
      stretch.push_back(c);
      j += size_t(l);
    }
    nfc_stretch(stretch, out);
    copied = i = prev = j;
  }
  out.append(text.substr(copied));
}

}  // namespace linattn::data
