// Encoding and decoding with a tokenizer.json (data/hf_load.cpp reads the file).
#include "data/hf_tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "data/unicode.h"

namespace linattn::data {

namespace {

using Spans = std::vector<std::pair<uint32_t, uint32_t>>;  // [begin, end) byte ranges of the text

// Words merged recently, per thread: most words of a text recur, and a look-up is far cheaper than a
// merge. Filled up to a bound, then started afresh.
struct WordCache {
  uint64_t owner = 0;
  StringTable words;                               // word -> its index in spans
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // [offset, offset + count) of ids
  std::vector<uint32_t> ids;

  void reset(uint64_t new_owner) {
    owner = new_owner;
    words.clear();
    spans.clear();
    ids.clear();
  }
};
constexpr size_t cache_words = 1 << 18, cache_word_bytes = 256;

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The length of the whitespace (JavaScript's \s) that starts or ends s.
size_t space_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    const int len = decode_utf8(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i, cp);
    if (len == 0 || !is_space(cp)) break;
    i += size_t(len);
  }
  return i;
}
size_t space_suffix(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    uint32_t cp;
    if (decode_utf8(reinterpret_cast<const unsigned char*>(s.data()) + start, end - start, cp) != int(end - start) ||
        !is_space(cp))
      break;
    end = start;
  }
  return s.size() - end;
}

}  // namespace

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  for (size_t at = 0;;) {
    const size_t hit = s.find(from, at);
    out.append(s, at, hit == std::string::npos ? std::string::npos : hit - at);
    if (hit == std::string::npos) break;
    out += to;
    at = hit + from.size();
  }
  s.swap(out);
}

bool HfTokenizer::stops(uint32_t id) const {
  return id == eot_ || std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

std::string_view HfTokenizer::token_bytes(uint32_t id) const {
  LINATTN_CHECK(id < token_bytes_.size(), path_, ": id ", id, " is outside the vocabulary (size ", token_bytes_.size(), ")");
  return token_bytes_[id];
}

// The longest added token at text[at], or 0.
size_t HfTokenizer::match_added(std::string_view text, size_t at, const AddedToken*& token) const {
  for (const uint32_t k : added_by_first_byte_[static_cast<unsigned char>(text[at])]) {
    const std::string& c = added_[k].content;
    if (text.compare(at, c.size(), c) == 0) {
      token = &added_[k];
      return c.size();
    }
  }
  return 0;
}

void HfTokenizer::encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const {
  std::string repaired;
  if (find_invalid_utf8(text) != std::string_view::npos) {  // as node reads such bytes: U+FFFD
    repaired = replace_invalid_utf8(text);
    text = repaired;
  }
  try {
    // The stretches between added tokens, found leftmost and longest; lstrip and rstrip take the
    // whitespace beside a token away from its neighbours.
    size_t start = 0, at = 0;
    bool strip_next = false;
    auto section = [&](size_t end, bool strip_end) {
      std::string_view s = text.substr(start, end - start);
      if (strip_next) s.remove_prefix(space_prefix(s));
      if (strip_end) s.remove_suffix(space_suffix(s));
      if (!s.empty()) encode_section(s, start == 0, ids);
    };
    while (at < text.size()) {
      const AddedToken* token = nullptr;
      const size_t len = added_by_first_byte_[static_cast<unsigned char>(text[at])].empty() ? 0 : match_added(text, at, token);
      if (len == 0) {
        ++at;
        continue;
      }
      section(at, token->lstrip);
      ids.push_back(token->id);
      at += len;
      start = at;
      strip_next = token->rstrip;
    }
    section(text.size(), false);
  } catch (const Error& e) {
    LINATTN_REQUIRE(false, source, ": ", e.what());
  }
}

void HfTokenizer::encode_section(std::string_view section, bool first_section, std::vector<uint32_t>& ids) const {
  thread_local std::string text;
  text.assign(section);
  for (const Normalizer& n : normalizers_) {
    switch (n.kind) {
      case Normalizer::prepend:
        if (!text.empty()) text.insert(0, n.text);
        break;
      case Normalizer::replace:
        if (!n.pattern) {
          replace_all(text, n.text, n.content);
          break;
        }
        {
          std::string out;
          size_t from = 0, begin, end;
          while (from <= text.size() && n.pattern->search(text, from, begin, end)) {
            out.append(text, from, begin - from);
            out += n.content;
            if (end == begin) {  // an empty match: keep the next character, search after it
              if (begin == text.size()) {
                from = begin + 1;
                break;
              }
              size_t next = begin + 1;
              while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) ++next;
              out.append(text, begin, next - begin);
              end = next;
            }
            from = end;
          }
          if (from < text.size()) out.append(text, from, std::string::npos);
          text.swap(out);
        }
        break;
      case Normalizer::nfc: {
        std::string out;
        append_nfc(text, out);
        text.swap(out);
        break;
      }
    }
  }
  if (text.empty()) return;
  thread_local Spans spans;
  spans.assign(1, {0, uint32_t(text.size())});
  pre_tokenize(text, spans, first_section);
  if (!cut_at_metaspace_) {
    for (const auto& [b, e] : spans) encode_word(std::string_view(text).substr(b, e - b), ids);
    return;
  }
  // Without a pre-tokenizer the section is one word; merged in pieces cut before each "▁" that
  // follows another character, it gives the same tokens (HfTokenizer::cut_at_metaspace_).
  const std::string_view all = text;
  const std::string_view meta = "\xE2\x96\x81";
  size_t piece = 0;
  for (size_t at = all.find(meta, 1); at != std::string_view::npos; at = all.find(meta, at + meta.size())) {
    if (at >= meta.size() && all.substr(at - meta.size(), meta.size()) == meta) continue;
    encode_word(all.substr(piece, at - piece), ids);
    piece = at;
  }
  encode_word(all.substr(piece), ids);
}

// Each pre-tokenizer in turn cuts the spans further (and may rewrite the text).
void HfTokenizer::pre_tokenize(std::string& text, Spans& spans, bool first_section) const {
  thread_local Spans next;
  thread_local std::vector<std::string_view> pieces;
  for (const PreTokenizer& p : pre_tokenizers_) {
    next.clear();
    switch (p.kind) {
      case PreTokenizer::split: {
        for (const auto& [b, e] : spans) {
          const std::string_view s = std::string_view(text).substr(b, e - b);
          // The pieces between and at the matches, each with whether it is a match.
          std::vector<std::tuple<uint32_t, uint32_t, bool>> parts;
          size_t from = 0, prev = 0, mb, me;
          while (from <= s.size() && p.pattern->search(s, from, mb, me)) {
            if (mb > prev) parts.emplace_back(b + prev, b + mb, false);
            if (me > mb) parts.emplace_back(b + mb, b + me, true);
            prev = me;
            if (me > mb) from = me;
            else {  // an empty match (it still ends the piece before it): search again one character on
              if (mb == s.size()) break;
              from = mb + 1;
              while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
            }
          }
          if (prev < s.size()) parts.emplace_back(b + prev, e, false);
          const size_t first = next.size();
          bool last_was_match = false;
          for (const auto& [pb, pe, is_match] : parts) {
            switch (p.behavior) {
              case PreTokenizer::removed:
                if (!is_match) next.emplace_back(pb, pe);
                break;
              case PreTokenizer::isolated: next.emplace_back(pb, pe); break;
              case PreTokenizer::merged_with_previous:
                if (is_match && next.size() > first) next.back().second = pe;
                else next.emplace_back(pb, pe);
                break;
              case PreTokenizer::merged_with_next:
                if (next.size() > first && last_was_match) next.back().second = pe;
                else next.emplace_back(pb, pe);
                break;
              case PreTokenizer::contiguous:
                if (is_match && last_was_match && next.size() > first) next.back().second = pe;
                else next.emplace_back(pb, pe);
                break;
            }
            last_was_match = is_match;
          }
        }
        break;
      }
      case PreTokenizer::byte_level: {
        std::string rewritten;
        const bool prefix = p.add_prefix_space;
        for (const auto& [b, e] : spans) {
          std::string_view s = std::string_view(text).substr(b, e - b);
          uint32_t base = b;
          if (prefix && (s.empty() || s[0] != ' ')) {  // a space before every piece that lacks one
            if (rewritten.empty()) rewritten.assign(text, 0, b);
            base = uint32_t(rewritten.size());
            rewritten += ' ';
            rewritten.append(s);
            s = std::string_view(rewritten).substr(base, s.size() + 1);
          } else if (!rewritten.empty()) {
            base = uint32_t(rewritten.size());
            rewritten.append(s);
            s = std::string_view(rewritten).substr(base, s.size());
          }
          if (!p.use_regex) {
            next.emplace_back(base, base + uint32_t(s.size()));
            continue;
          }
          pieces.clear();
          gpt2_pretokenize(s, pieces);
          for (const std::string_view piece : pieces) {
            const auto off = uint32_t(base + (piece.data() - s.data()));
            next.emplace_back(off, off + uint32_t(piece.size()));
          }
        }
        if (!rewritten.empty()) text.swap(rewritten);
        break;
      }
      case PreTokenizer::metaspace: {
        std::string rewritten;
        for (const auto& [b, e] : spans) {
          std::string piece(text, b, e - b);
          replace_all(piece, " ", p.replacement);
          const bool prepend = p.prepend == PreTokenizer::always || (p.prepend == PreTokenizer::first && first_section && b == 0);
          if (prepend && !starts_with(piece, p.replacement)) piece.insert(0, p.replacement);
          const auto base = uint32_t(rewritten.size());
          rewritten += piece;
          if (!p.split_words) {
            next.emplace_back(base, uint32_t(rewritten.size()));
            continue;
          }
          size_t word = 0;  // cut before each replacement, which starts the next word
          for (size_t at = piece.find(p.replacement, 1); at != std::string::npos; at = piece.find(p.replacement, at + 1)) {
            next.emplace_back(base + word, base + at);
            word = at;
          }
          next.emplace_back(base + word, uint32_t(rewritten.size()));
        }
        text.swap(rewritten);
        break;
      }
    }
    spans.swap(next);
  }
}

void HfTokenizer::encode_word(std::string_view word, std::vector<uint32_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {  // a word that is a token is that token, whatever the merges would make of it
    if (const uint32_t* id = vocab_.find(word)) {
      ids.push_back(*id);
      return;
    }
  }
  if (word.size() > cache_word_bytes) {
    merge_word(word, ids);
    return;
  }
  thread_local WordCache cache;
  if (cache.owner != instance_) cache.reset(instance_);
  if (const uint32_t* k = cache.words.find(word)) {
    const auto [offset, count] = cache.spans[*k];
    ids.insert(ids.end(), cache.ids.begin() + offset, cache.ids.begin() + offset + count);
    return;
  }
  const size_t begin = ids.size();
  merge_word(word, ids);
  if (cache.words.size() >= cache_words) cache.reset(instance_);
  cache.words.insert(word, uint32_t(cache.spans.size()));
  cache.spans.emplace_back(uint32_t(cache.ids.size()), uint32_t(ids.size() - begin));
  cache.ids.insert(cache.ids.end(), ids.begin() + long(begin), ids.end());
}

// BPE on one word: its characters (bytes after ByteLevel) as tokens, merged by rank. A character the
// vocabulary lacks becomes its <0xNN> byte tokens (byte_fallback) or the unknown token, and is not
// merged with its neighbours: the runs of known characters between such are merged each on its own.
void HfTokenizer::merge_word(std::string_view word, std::vector<uint32_t>& ids) const {
  size_t run = ids.size();
  if (byte_level_) {
    for (const char c : word) ids.push_back(byte_id_[static_cast<unsigned char>(c)]);
    merges_.apply(ids, run);
    return;
  }
  const auto* s = reinterpret_cast<const unsigned char*>(word.data());
  bool last_unknown = false;
  for (size_t i = 0; i < word.size();) {
    if (s[i] < 0x80 && ascii_id_[s[i]] != UINT32_MAX) {
      ids.push_back(ascii_id_[s[i++]]);
      last_unknown = false;
      continue;
    }
    uint32_t cp;
    const int len = decode_utf8_lossy(s + i, word.size() - i, cp);
    const auto known = char_id_.find(cp);
    if (known != char_id_.end()) {
      ids.push_back(known->second);
      last_unknown = false;
      i += size_t(len);
      continue;
    }
    merges_.apply(ids, run);
    bool fallback = byte_fallback_;
    for (int k = 0; k < len; ++k) fallback = fallback && fallback_id_[s[i + size_t(k)]] != UINT32_MAX;
    if (fallback) {
      for (int k = 0; k < len; ++k) ids.push_back(fallback_id_[s[i + size_t(k)]]);
    } else {
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", cp);
      LINATTN_REQUIRE(unk_.has_value(), "the character ", code, " is not in the vocabulary of ", path_,
                      ", which has neither byte_fallback nor an unk_token to stand for it");
      if (!(fuse_unk_ && last_unknown)) ids.push_back(*unk_);
      last_unknown = true;
    }
    i += size_t(len);
    run = ids.size();
  }
  merges_.apply(ids, run);
}

std::string HfTokenizer::decode(const std::vector<uint32_t>& ids) const {
  bool strip_first_space = false;  // a Metaspace decoder's prefix space
  for (const DecodeStep& d : decode_steps_) strip_first_space = strip_first_space || (d.kind == DecodeStep::metaspace && d.prepend);
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    LINATTN_CHECK(ids[k] < vocab_size(), "decode: token ", k, " has id ", ids[k], ", outside the vocabulary of ", path_,
                  " (size ", vocab_size(), ")");
    std::string_view piece = token_bytes_[ids[k]];
    if (k == 0 && strip_first_space && !is_added_[ids[k]] && starts_with(piece, " ")) piece.remove_prefix(1);
    out += piece;
  }
  bool fused = false;  // a Strip after Fuse applies to the whole text
  for (const DecodeStep& d : decode_steps_) {
    if (d.kind == DecodeStep::fuse) fused = true;
    if (d.kind != DecodeStep::strip || !fused) continue;
    size_t from = 0, to = out.size();
    for (int k = 0; k < d.start && out.compare(from, d.content.size(), d.content) == 0; ++k) from += d.content.size();
    for (int k = 0; k < d.stop && to >= from + d.content.size() &&
                    out.compare(to - d.content.size(), d.content.size(), d.content) == 0; ++k)
      to -= d.content.size();
    out = out.substr(from, to - from);
  }
  return out;
}

}  // namespace linattn::data
