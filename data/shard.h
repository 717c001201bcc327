// Token shards: linattn's own format and llm.c's .bin format (read as is). See docs/data-format.md.
//
// linattn shard, little-endian, a 256-byte header then the tokens:
//   offset  size  field
//        0     8  magic "LATOKENS"
//        8     4  version (1)
//       12     4  token width in bytes: 1, 2 or 4 (unsigned)
//       16     8  token count
//       24     8  text bytes the tokens cover (end-of-text tokens cover none)
//       32     8  document count
//       40     4  vocabulary size (every token id is below it)
//       44     4  end-of-text id (0xFFFFFFFF when the tokenizer has none)
//       48    32  tokenizer name, NUL-padded ("bytes", "gpt2", "hf")
//       80    32  sha256 of the tokenizer's file ("hf": its tokenizer.json); zero for bytes and gpt2
//      112   144  zero
//      256     -  token count x token width bytes
//
// llm.c shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens; GPT-2
// vocabulary (50257) assumed; it does not record text bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "data/mapped_file.h"

namespace linattn::data {

constexpr char shard_magic[8] = {'L', 'A', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t shard_version = 1;
constexpr size_t shard_header_bytes = 256;
constexpr uint32_t no_eot = 0xFFFFFFFFu;

constexpr int32_t llmc_magic = 20240520;
constexpr size_t llmc_header_bytes = 256 * 4;
constexpr uint32_t llmc_vocab_size = 50257;  // GPT-2's

enum class ShardFormat { linattn, llmc };

struct ShardInfo {
  std::string path;
  ShardFormat format = ShardFormat::linattn;
  uint32_t version = shard_version;
  uint32_t token_width = 2;
  uint64_t token_count = 0;
  bool has_text_bytes = true;  // false for llm.c shards
  uint64_t text_bytes = 0;
  uint64_t document_count = 0;  // 0 when unknown (llm.c)
  uint32_t vocab_size = 0;
  uint32_t eot = no_eot;
  std::string tokenizer;
  std::string tokenizer_sha256;  // 64 hex digits; "" when the header records none
  size_t data_offset = shard_header_bytes;  // where the tokens start in the file
};

// The smallest width (1, 2 or 4 bytes) that holds every id below vocab_size.
uint32_t token_width_for(uint32_t vocab_size);

// A shard mapped into memory (mmap): tokens are read from the map, never copied whole.
class TokenShard {
 public:
  // Opens and checks a shard of either format: magic, version, width, size against the header and,
  // when validate_tokens is set, that every token id is below the vocabulary size. Errors name the file
  // and the byte offset of the problem.
  explicit TokenShard(const std::string& path, bool validate_tokens = true);

  const ShardInfo& info() const { return info_; }
  uint64_t size() const { return info_.token_count; }
  uint32_t operator[](uint64_t i) const;
  // out[k] = token begin + k for k < count; begin + count <= size().
  void read(uint64_t begin, uint64_t count, int32_t* out) const;

 private:
  MappedFile file_;
  ShardInfo info_;
  const unsigned char* tokens_ = nullptr;
};

// Streams tokens into a linattn shard. The header is written by finish(); the file appears under its
// name only then (it is written to PATH.tmp and renamed), so an interrupted run leaves no half shard.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, const std::string& tokenizer, uint32_t vocab_size, uint32_t eot,
              uint32_t token_width = 0 /* 0: token_width_for(vocab_size) */,
              const std::string& tokenizer_sha256 = "" /* 64 hex digits, or none */);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends one document's tokens and the number of text bytes they cover.
  void add_document(const uint32_t* ids, size_t count, uint64_t text_bytes);
  // Appends tokens that are not a whole document (document count unchanged).
  void add_tokens(const uint32_t* ids, size_t count, uint64_t text_bytes = 0);
  ShardInfo finish();

  uint64_t token_count() const { return info_.token_count; }

 private:
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  ShardInfo info_;
  std::vector<unsigned char> buffer_;
};

// Writes a shard's 256-byte header (exposed for tests that build damaged files).
std::vector<unsigned char> encode_shard_header(const ShardInfo& info);

}  // namespace linattn::data
