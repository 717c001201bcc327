// Hugging Face tokenizer.json files (the `tokenizers` library's format, which Llama 2, Mistral, Llama 3,
// Qwen and most published models ship): a BPE model and the steps around it, read with nlohmann-json.
// See docs/tokenizers.md for what is read and how each step behaves.
//
// Encoding a text: added tokens (special or not) are found in the raw text first, leftmost and longest;
// each stretch between them is normalized, pre-tokenized into words, and each word is merged by the
// BPE model. Text that is not well-formed UTF-8 is read as the reference does (node's decoder): each
// ill-formed sequence becomes U+FFFD.
//
// Supported: model BPE (merges as "a b" strings or ["a", "b"] pairs, byte_fallback and <0xNN> tokens,
// unk_token and fuse_unk, ignore_merges); normalizers Prepend, Replace, NFC, Sequence; pre-tokenizers
// ByteLevel, Split, Metaspace, Sequence; decoders ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace, Sequence; post-processors TemplateProcessing (its BOS and EOS), ByteLevel, Sequence.
// Anything else is refused with the field and its value.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/bpe.h"
#include "data/regex.h"
#include "data/string_table.h"
#include "data/tokenizer.h"

namespace linattn::data {

// s with every occurrence of `from` replaced by `to` (the Replace and Metaspace steps).
void replace_all(std::string& s, std::string_view from, std::string_view to);

class HfTokenizer final : public Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder that holds one; tokenizer_config.json beside it, when
  // present, names the BOS and EOS tokens the file itself does not.
  static std::unique_ptr<HfTokenizer> load(const std::string& path);

  std::string name() const override { return "hf"; }
  uint32_t vocab_size() const override { return uint32_t(token_bytes_.size()); }
  // The token that separates documents: the BOS of the post-processor's template, else
  // tokenizer_config.json's bos_token, else the added token "<|endoftext|>", else the EOS.
  uint32_t eot() const override { return eot_; }
  bool stops(uint32_t id) const override;
  std::string_view token_bytes(uint32_t id) const override;
  void encode(std::string_view text, std::vector<uint32_t>& ids, const std::string& source) const override;
  using Tokenizer::encode;
  std::string decode(const std::vector<uint32_t>& ids) const override;
  std::string file_sha256() const override { return sha256_; }

  const std::string& path() const { return path_; }
  std::optional<uint32_t> bos() const { return bos_; }
  std::optional<uint32_t> eos() const { return eos_; }
  // One line: the file, vocabulary, model options and steps, e.g. for linattn-data's output.
  const std::string& summary() const { return summary_; }

  // The parts of the pipeline (filled by load, in data/hf_load.cpp).
  struct Normalizer {
    enum Kind { prepend, replace, nfc } kind;
    explicit Normalizer(Kind k, std::string t = "", std::string c = "") : kind(k), text(std::move(t)), content(std::move(c)) {}
    std::string text, content;      // prepend: text; replace: a String pattern and its replacement
    std::shared_ptr<Regex> pattern;  // replace: a Regex pattern
  };
  struct PreTokenizer {
    enum Kind { byte_level, split, metaspace } kind;
    explicit PreTokenizer(Kind k) : kind(k) {}
    bool add_prefix_space = false, use_regex = false;  // byte_level
    std::shared_ptr<Regex> pattern;                    // split (a String pattern is compiled as a literal)
    enum Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous } behavior = isolated;
    std::string replacement;                           // metaspace
    enum Prepend { always, first, never } prepend = always;
    bool split_words = true;                           // metaspace
  };
  struct DecodeStep {
    enum Kind { replace, byte_fallback, byte_level, metaspace, fuse, strip } kind;
    explicit DecodeStep(Kind k, std::string p = "", std::string c = "") : kind(k), pattern(std::move(p)), content(std::move(c)) {}
    std::string pattern, content;  // replace (a String pattern); strip: content
    int start = 0, stop = 0;       // strip
    bool prepend = false;          // metaspace: the first token loses a leading space
  };
  struct AddedToken {
    std::string content;
    uint32_t id;
    bool lstrip = false, rstrip = false, special = false;
  };

 private:
  friend struct HfLoader;
  HfTokenizer() = default;

  // The steps of one stretch of text between added tokens.
  void encode_section(std::string_view text, bool first_section, std::vector<uint32_t>& ids) const;
  void pre_tokenize(std::string& text, std::vector<std::pair<uint32_t, uint32_t>>& spans, bool first_section) const;
  void encode_word(std::string_view word, std::vector<uint32_t>& ids) const;
  void merge_word(std::string_view word, std::vector<uint32_t>& ids) const;
  size_t match_added(std::string_view text, size_t at, const AddedToken*& token) const;

  std::string path_, sha256_, summary_;
  uint64_t instance_ = 0;  // tells this tokenizer's cached words from another's

  std::vector<Normalizer> normalizers_;
  std::vector<PreTokenizer> pre_tokenizers_;
  std::vector<DecodeStep> decode_steps_;

  // The BPE model. Tokens are kept in the domain the model merges in: their bytes after a ByteLevel
  // pre-tokenizer (which maps each byte to a character), else the UTF-8 of their strings.
  bool byte_level_ = false;
  StringTable vocab_;
  std::unordered_map<uint32_t, uint32_t> char_id_;  // single-character tokens by code point
  uint32_t ascii_id_[128];                          // the same below 128; UINT32_MAX: none
  uint32_t byte_id_[256] = {};                      // byte_level_: each byte's token
  uint32_t fallback_id_[256] = {};                  // byte_fallback: <0xNN>
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::optional<uint32_t> unk_;
  BpeMerges merges_;
  // A section with no pre-tokenizer is one word; it may be merged in pieces cut before each "▁"
  // that follows another character when no merge joins such neighbours (the result is then the same).
  bool cut_at_metaspace_ = false;

  std::vector<AddedToken> added_;
  std::vector<uint32_t> added_by_first_byte_[256];  // indexes into added_, longest first
  std::vector<std::string> token_bytes_;            // decoded bytes of each id, in the middle of a text
  std::vector<bool> is_added_;
  uint32_t eot_ = 0;
  std::optional<uint32_t> bos_, eos_;
  std::vector<uint32_t> stop_ids_;
};

}  // namespace linattn::data
