// The regular expressions of tokenizer.json pre-tokenizers (Split, Replace), matched on UTF-8 text by
// code point with the project's Unicode tables (data/unicode.h), as JavaScript's /u expressions match
// (node runs the reference tokenizer): leftmost match, alternatives tried in order, greedy or lazy
// quantifiers with backtracking.
//
// Syntax: literals and escapes (\r \n \t \f \v \0 \xHH \uHHHH \u{H...}; a backslash before any other
// punctuation is the punctuation itself), `.` (anything but \n \r U+2028 U+2029), classes `[...]` and
// `[^...]` with ranges, \s \S \d \D \w \W (JavaScript's: \d and \w are ASCII), \p{..} \P{..} with a
// general category (L, Lu, Letter, N, Nd, P, ...), groups `(...)` `(?:...)`, case-insensitive groups
// `(?i:...)` (ASCII letters only, as the reference rewrites Llama 3's), lookaheads `(?=...)` `(?!...)`,
// alternation, `? * + {n} {n,} {n,m}` and their lazy forms, `^` and `$` (start and end of the text).
// Anything else (lookbehind, backreferences, \b, possessive quantifiers, a repeated group that can
// match nothing) is refused with the pattern and the position.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/unicode.h"

namespace linattn::data {

class Regex {
 public:
  // `source` names the pattern in errors (e.g. "tokenizer.json: pre_tokenizer.pattern.Regex").
  Regex(std::string_view pattern, const std::string& source);

  // The leftmost match that starts at or after byte offset `from` of well-formed UTF-8 text: true and
  // its byte range [begin, end), or false.
  bool search(std::string_view text, size_t from, size_t& begin, size_t& end) const;

  // A set of code points: the union of its items, complemented when negated.
  struct Item {
    enum Kind : uint8_t { range, categories, space } kind = range;
    bool negated = false;
    uint32_t first = 0, last = 0;  // range
    uint32_t mask = 0;             // categories
  };
  struct Class {
    std::vector<Item> items;
    bool negated = false;
    uint64_t ascii[2] = {0, 0};  // the answer for code points below 128
    bool contains(uint32_t cp) const;
    void finish();               // fills ascii from the items
    bool in_items(uint32_t cp) const;  // some item holds cp (before `negated`)
  };

  struct Inst {
    enum Op : uint8_t { match, char_class, repeat, split, jump, look, begin, end } op = match;
    bool greedy = true, negate = false;
    uint32_t cls = 0;          // char_class, repeat: index into classes_
    uint32_t min = 0, max = 0; // repeat
    uint32_t x = 0, y = 0;     // split: first x then y; jump: x; look: sub-program x, continue at y
  };

 private:
  bool run(uint32_t pc, std::string_view text, size_t pos, size_t& end) const;

  std::vector<Inst> prog_;
  std::vector<Class> classes_;
};

}  // namespace linattn::data
