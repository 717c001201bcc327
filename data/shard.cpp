#include "data/shard.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/sha256.h"

namespace linattn::data {

namespace {

uint32_t get_u32(const unsigned char* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint64_t get_u64(const unsigned char* p) { return uint64_t(get_u32(p)) | uint64_t(get_u32(p + 4)) << 32; }
void put_u32(unsigned char* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<unsigned char>(v >> (8 * k));
}
void put_u64(unsigned char* p, uint64_t v) {
  put_u32(p, uint32_t(v));
  put_u32(p + 4, uint32_t(v >> 32));
}

uint32_t load_token(const unsigned char* p, uint32_t width) {
  switch (width) {
    case 1: return p[0];
    case 2: return uint32_t(p[0]) | uint32_t(p[1]) << 8;
    default: return get_u32(p);
  }
}

}  // namespace

uint32_t token_width_for(uint32_t vocab_size) { return vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4; }

std::vector<unsigned char> encode_shard_header(const ShardInfo& info) {
  std::vector<unsigned char> h(shard_header_bytes, 0);
  std::memcpy(h.data(), shard_magic, 8);
  put_u32(&h[8], info.version);
  put_u32(&h[12], info.token_width);
  put_u64(&h[16], info.token_count);
  put_u64(&h[24], info.text_bytes);
  put_u64(&h[32], info.document_count);
  put_u32(&h[40], info.vocab_size);
  put_u32(&h[44], info.eot);
  LINATTN_CHECK(info.tokenizer.size() < 32, "tokenizer name '", info.tokenizer, "' is longer than 31 bytes");
  std::memcpy(&h[48], info.tokenizer.data(), info.tokenizer.size());
  const std::string& sha = info.tokenizer_sha256;
  LINATTN_CHECK(sha.empty() || sha.size() == 64, "tokenizer sha256 '", sha, "' is not 64 hexadecimal digits");
  for (size_t k = 0; k < sha.size(); k += 2) {
    auto digit = [&](char c) {
      LINATTN_CHECK(std::isxdigit(static_cast<unsigned char>(c)), "tokenizer sha256 '", sha, "' is not hexadecimal");
      return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    };
    h[80 + k / 2] = static_cast<unsigned char>(digit(sha[k]) * 16 + digit(sha[k + 1]));
  }
  return h;
}

TokenShard::TokenShard(const std::string& path, bool validate_tokens) : file_(path) {
  info_.path = path;
  const unsigned char* p = file_.data();
  const size_t n = file_.size();
  LINATTN_CHECK(n >= 8, path, ": truncated shard: ", n, " bytes, shorter than any header");
  if (int32_t(get_u32(p)) == llmc_magic) {
    LINATTN_CHECK(n >= llmc_header_bytes, path, ": truncated llm.c shard: ", n, " bytes, the header alone is ",
                  llmc_header_bytes);
    info_.format = ShardFormat::llmc;
    info_.version = get_u32(p + 4);
    LINATTN_CHECK(info_.version == 1, path, ": byte offset 4: llm.c shard version ", info_.version,
                  " is not supported (only version 1, uint16 GPT-2 tokens)");
    info_.token_width = 2;
    info_.token_count = get_u32(p + 8);
    info_.has_text_bytes = false;
    info_.document_count = 0;
    info_.vocab_size = llmc_vocab_size;
    info_.eot = 50256;
    info_.tokenizer = "gpt2";
    info_.data_offset = llmc_header_bytes;
  } else {
    if (std::memcmp(p, shard_magic, 8) != 0) {
      char shown[9] = {};
      for (int k = 0; k < 8; ++k) shown[k] = (p[k] >= 32 && p[k] < 127) ? char(p[k]) : '?';
      LINATTN_FAIL(path, ": byte offset 0: wrong magic '", shown, "': not a linattn token shard (magic 'LATOKENS') "
                   "nor an llm.c shard (int32 ", llmc_magic, ")");
    }
    LINATTN_CHECK(n >= shard_header_bytes, path, ": truncated shard: ", n, " bytes, the header alone is ",
                  shard_header_bytes);
    info_.version = get_u32(p + 8);
    LINATTN_CHECK(info_.version == shard_version, path, ": byte offset 8: shard version ", info_.version,
                  " is not supported (this build reads version ", shard_version, ")");
    info_.token_width = get_u32(p + 12);
    LINATTN_CHECK(info_.token_width == 1 || info_.token_width == 2 || info_.token_width == 4, path,
                  ": byte offset 12: token width ", info_.token_width, " is not 1, 2 or 4");
    info_.token_count = get_u64(p + 16);
    info_.text_bytes = get_u64(p + 24);
    info_.document_count = get_u64(p + 32);
    info_.vocab_size = get_u32(p + 40);
    info_.eot = get_u32(p + 44);
    const char* name = reinterpret_cast<const char*>(p + 48);
    info_.tokenizer.assign(name, strnlen(name, 32));
    if (std::any_of(p + 80, p + 112, [](unsigned char c) { return c != 0; })) info_.tokenizer_sha256 = to_hex(p + 80, 32);
    LINATTN_CHECK(info_.vocab_size > 0, path, ": byte offset 40: vocabulary size is 0");
    LINATTN_CHECK(token_width_for(info_.vocab_size) <= info_.token_width, path, ": byte offset 40: vocabulary size ",
                  info_.vocab_size, " does not fit ", info_.token_width, "-byte tokens");
    info_.data_offset = shard_header_bytes;
  }
  const uint64_t available = n - info_.data_offset;  // bytes after the header
  LINATTN_CHECK(info_.token_count <= available / info_.token_width, path, ": truncated shard: the header promises ",
                info_.token_count, " tokens of ", info_.token_width, " bytes but the file ends at byte offset ", n,
                " after ", available / info_.token_width, " tokens (an interrupted copy or write: prepare it again)");
  const uint64_t expected = info_.data_offset + info_.token_count * info_.token_width;
  LINATTN_CHECK(n == expected, path, ": ", n - expected, " unexpected bytes after the last token at byte offset ",
                expected, " (the header says ", info_.token_count, " tokens; prepare it again)");
  tokens_ = p + info_.data_offset;
  if (validate_tokens) {
    const uint32_t w = info_.token_width;
    for (uint64_t i = 0; i < info_.token_count; ++i) {
      const uint32_t id = load_token(tokens_ + i * w, w);
      if (id >= info_.vocab_size)
        LINATTN_FAIL(path, ": byte offset ", info_.data_offset + i * w, " (token ", i, "): token id ", id,
                     " is outside the vocabulary (size ", info_.vocab_size, ")");
    }
  }
}

uint32_t TokenShard::operator[](uint64_t i) const { return load_token(tokens_ + i * info_.token_width, info_.token_width); }

void TokenShard::read(uint64_t begin, uint64_t count, int32_t* out) const {
  LINATTN_CHECK(begin + count <= info_.token_count, info_.path, ": read of tokens [", begin, ", ", begin + count,
                ") past the end (", info_.token_count, " tokens)");
  const unsigned char* p = tokens_ + begin * info_.token_width;
  switch (info_.token_width) {
    case 1:
      for (uint64_t k = 0; k < count; ++k) out[k] = int32_t(p[k]);
      break;
    case 2:
      for (uint64_t k = 0; k < count; ++k) out[k] = int32_t(uint32_t(p[2 * k]) | uint32_t(p[2 * k + 1]) << 8);
      break;
    default:
      for (uint64_t k = 0; k < count; ++k) out[k] = int32_t(get_u32(p + 4 * k));
  }
}

ShardWriter::ShardWriter(const std::string& path, const std::string& tokenizer, uint32_t vocab_size, uint32_t eot,
                         uint32_t token_width, const std::string& tokenizer_sha256)
    : tmp_path_(path + ".tmp") {
  info_.path = path;
  info_.tokenizer = tokenizer;
  info_.tokenizer_sha256 = tokenizer_sha256;
  encode_shard_header(info_);  // checks the name and the sha256 now, before any work
  info_.vocab_size = vocab_size;
  info_.eot = eot;
  info_.token_width = token_width ? token_width : token_width_for(vocab_size);
  LINATTN_CHECK(info_.token_width == 1 || info_.token_width == 2 || info_.token_width == 4, "token width ",
                info_.token_width, " is not 1, 2 or 4");
  LINATTN_CHECK(info_.token_width >= token_width_for(vocab_size), "a vocabulary of ", vocab_size, " does not fit ",
                info_.token_width, "-byte tokens");
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  LINATTN_CHECK(file_, tmp_path_, ": cannot create (", std::strerror(errno), ")");
  const std::vector<unsigned char> placeholder(shard_header_bytes, 0);
  LINATTN_CHECK(std::fwrite(placeholder.data(), 1, placeholder.size(), file_) == placeholder.size(), tmp_path_,
                ": write failed (", std::strerror(errno), ")");
}

ShardWriter::~ShardWriter() {
  if (file_) {  // finish() was not reached: leave nothing behind
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void ShardWriter::add_tokens(const uint32_t* ids, size_t count, uint64_t text_bytes) {
  LINATTN_CHECK(file_, info_.path, ": shard already finished");
  const uint32_t w = info_.token_width;
  buffer_.resize(count * w);
  for (size_t k = 0; k < count; ++k) {
    LINATTN_CHECK(ids[k] < info_.vocab_size, info_.path, ": token id ", ids[k], " at token ",
                  info_.token_count + k, " is outside the vocabulary (size ", info_.vocab_size, ")");
    for (uint32_t b = 0; b < w; ++b) buffer_[k * w + b] = static_cast<unsigned char>(ids[k] >> (8 * b));
  }
  LINATTN_CHECK(std::fwrite(buffer_.data(), 1, buffer_.size(), file_) == buffer_.size(), tmp_path_,
                ": write failed (", std::strerror(errno), ")");
  info_.token_count += count;
  info_.text_bytes += text_bytes;
}

void ShardWriter::add_document(const uint32_t* ids, size_t count, uint64_t text_bytes) {
  add_tokens(ids, count, text_bytes);
  info_.document_count += 1;
}

ShardInfo ShardWriter::finish() {
  LINATTN_CHECK(file_, info_.path, ": shard already finished");
  const std::vector<unsigned char> header = encode_shard_header(info_);
  const bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
                  std::fwrite(header.data(), 1, header.size(), file_) == header.size() && std::fflush(file_) == 0;
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (!ok || closed != 0) {
    std::remove(tmp_path_.c_str());
    LINATTN_FAIL(tmp_path_, ": write failed (", std::strerror(errno), ")");
  }
  std::error_code ec;
  std::filesystem::rename(tmp_path_, info_.path, ec);
  LINATTN_CHECK(!ec, info_.path, ": cannot rename from ", tmp_path_, " (", ec.message(), ")");
  return info_;
}

}  // namespace linattn::data
