// Token shards: the linattn format round trip, llm.c's format, and damaged files.
#include "data/shard.h"

#include <cstring>

#include "data/dataset.h"
#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos ? "" : "message lacks '" + part + "': " + msg;
}

TEST(Shard, RoundTripsEveryTokenWidth) {
  TempDir dir;
  for (const uint32_t width : {1u, 2u, 4u}) {
    const uint32_t vocab = width == 1 ? 256 : width == 2 ? 50257 : 100000;
    const std::vector<uint32_t> doc1 = {0, 1, vocab - 1, 7}, doc2 = {vocab - 2, 255, 3};
    const std::string path = dir / ("w" + std::to_string(width) + ".bin");
    ShardWriter w(path, "test", vocab, vocab - 1, width);
    w.add_document(doc1.data(), doc1.size(), 10);
    w.add_document(doc2.data(), doc2.size(), 5);
    const ShardInfo written = w.finish();
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(std::filesystem::file_size(path), shard_header_bytes + 7 * width);

    const TokenShard shard(path);
    const ShardInfo& info = shard.info();
    EXPECT_EQ(info.format, ShardFormat::linattn);
    EXPECT_EQ(info.version, 1u);
    EXPECT_EQ(info.token_width, width);
    EXPECT_EQ(info.token_count, 7u);
    EXPECT_EQ(info.text_bytes, 15u);
    EXPECT_EQ(info.document_count, 2u);
    EXPECT_EQ(info.vocab_size, vocab);
    EXPECT_EQ(info.eot, vocab - 1);
    EXPECT_EQ(info.tokenizer, "test");
    EXPECT_TRUE(info.has_text_bytes);
    EXPECT_EQ(written.token_count, info.token_count);
    std::vector<int32_t> got(7);
    shard.read(0, 7, got.data());
    const std::vector<int32_t> want = {0, 1, int32_t(vocab - 1), 7, int32_t(vocab - 2), 255, 3};
    EXPECT_EQ(got, want) << "width " << width;
    for (uint64_t i = 0; i < 7; ++i) EXPECT_EQ(shard[i], uint32_t(want[i]));
    shard.read(3, 2, got.data());
    EXPECT_EQ(got[0], 7);
    EXPECT_EQ(got[1], int32_t(vocab - 2));
  }
  EXPECT_EQ(token_width_for(256), 1u);
  EXPECT_EQ(token_width_for(257), 2u);
  EXPECT_EQ(token_width_for(65536), 2u);
  EXPECT_EQ(token_width_for(65537), 4u);
}

TEST(Shard, HeaderBytesAreTheDocumentedLayout) {
  TempDir dir;
  const std::string path = dir / "x.bin";
  ShardWriter w(path, "bytes", 257, 256);
  const std::vector<uint32_t> ids = {256, 'h', 'i'};
  w.add_document(ids.data(), ids.size(), 2);
  w.finish();
  const std::string f = read_file(path);
  ASSERT_EQ(f.size(), 256u + 6u);
  auto u32 = [&](size_t at) { uint32_t v; std::memcpy(&v, f.data() + at, 4); return v; };  // little-endian host
  auto u64 = [&](size_t at) { uint64_t v; std::memcpy(&v, f.data() + at, 8); return v; };
  EXPECT_EQ(f.substr(0, 8), "LATOKENS");
  EXPECT_EQ(u32(8), 1u);      // version
  EXPECT_EQ(u32(12), 2u);     // token width
  EXPECT_EQ(u64(16), 3u);     // tokens
  EXPECT_EQ(u64(24), 2u);     // text bytes
  EXPECT_EQ(u64(32), 1u);     // documents
  EXPECT_EQ(u32(40), 257u);   // vocabulary
  EXPECT_EQ(u32(44), 256u);   // end-of-text
  EXPECT_EQ(std::string(f.data() + 48), "bytes");
  EXPECT_EQ(f.substr(80, 176), std::string(176, '\0'));
  EXPECT_EQ(f.substr(256), std::string("\x00\x01h\x00i\x00", 6));
}

TEST(Shard, WriterRefusesIdsOutsideTheVocabulary) {
  TempDir dir;
  ShardWriter w(dir / "x.bin", "bytes", 257, 256);
  const std::vector<uint32_t> ids = {1, 257};
  EXPECT_EQ(has(error_of([&] { w.add_tokens(ids.data(), ids.size()); }), "token id 257 at token 1"), "");
}

TEST(Shard, AnUnfinishedWriterLeavesNoFile) {
  TempDir dir;
  {
    ShardWriter w(dir / "x.bin", "bytes", 257, 256);
    const uint32_t id = 5;
    w.add_tokens(&id, 1);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.bin.tmp"));
}

// A valid 2-byte shard of `n` tokens 0, 1, 2, ... as bytes.
std::string make_shard_bytes(uint32_t n, uint32_t vocab = 257) {
  ShardInfo info;
  info.token_width = 2;
  info.token_count = n;
  info.vocab_size = vocab;
  info.eot = 256;
  info.tokenizer = "bytes";
  const std::vector<unsigned char> h = encode_shard_header(info);
  std::string s(h.begin(), h.end());
  for (uint32_t i = 0; i < n; ++i) s += char(i & 0xFF), s += char(i >> 8);
  return s;
}

TEST(Shard, DamagedFilesAreErrorsNamingFileAndOffset) {
  TempDir dir;
  const std::string path = dir / "damaged.bin";

  EXPECT_EQ(has(error_of([&] { TokenShard s(dir / "absent.bin"); }), "absent.bin: cannot open"), "");

  write_file(path, "");
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), path + ": truncated shard: 0 bytes"), "");

  std::string bytes = make_shard_bytes(10);
  bytes.replace(0, 8, "NOTATOKN");
  write_file(path, bytes);
  const std::string magic = error_of([&] { TokenShard s(path); });
  EXPECT_EQ(has(magic, path + ": byte offset 0: wrong magic 'NOTATOKN'"), "");

  write_file(path, make_shard_bytes(10).substr(0, 256 + 15));  // 7.5 of 10 tokens
  const std::string truncated = error_of([&] { TokenShard s(path); });
  EXPECT_EQ(has(truncated, path + ": truncated shard: the header promises 10 tokens"), "");
  EXPECT_EQ(has(truncated, "ends at byte offset 271 after 7 tokens"), "");

  write_file(path, make_shard_bytes(10).substr(0, 100));  // inside the header
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "the header alone is 256"), "");

  write_file(path, make_shard_bytes(10) + "xy");
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "2 unexpected bytes after the last token at byte offset 276"), "");

  write_file(path, make_shard_bytes(300, 280));  // tokens 0..299 in a vocabulary of 280
  const std::string outside = error_of([&] { TokenShard s(path); });
  EXPECT_EQ(has(outside, path + ": byte offset " + std::to_string(256 + 2 * 280) + " (token 280): token id 280"), "");
  EXPECT_EQ(has(outside, "outside the vocabulary (size 280)"), "");
  EXPECT_NO_THROW(TokenShard(path, /*validate_tokens=*/false));

  bytes = make_shard_bytes(4);
  bytes[8] = 9;  // version 9
  write_file(path, bytes);
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "byte offset 8: shard version 9 is not supported"), "");

  bytes = make_shard_bytes(4);
  bytes[12] = 3;  // 3-byte tokens
  write_file(path, bytes);
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "byte offset 12: token width 3"), "");

  bytes = make_shard_bytes(4);
  bytes[12] = 1;  // 1-byte tokens cannot hold a vocabulary of 257
  write_file(path, bytes);
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "vocabulary size 257 does not fit 1-byte tokens"), "");
}

// llm.c's shards: int32 header[256] = {20240520, 1, token count, 0...}, then uint16 tokens.
std::string make_llmc_bytes(const std::vector<uint16_t>& tokens, int32_t version = 1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = int32_t(tokens.size());
  std::string s(reinterpret_cast<const char*>(header.data()), 1024);
  s.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return s;
}

TEST(Shard, ReadsLlmcShardsAsTheyAre) {
  TempDir dir;
  const std::string path = dir / "tiny_val.bin";
  const std::vector<uint16_t> tokens = {50256, 15496, 995, 0, 50255};
  write_file(path, make_llmc_bytes(tokens));
  const TokenShard shard(path);
  EXPECT_EQ(shard.info().format, ShardFormat::llmc);
  EXPECT_EQ(shard.info().token_count, 5u);
  EXPECT_EQ(shard.info().vocab_size, 50257u);
  EXPECT_EQ(shard.info().eot, 50256u);
  EXPECT_EQ(shard.info().tokenizer, "gpt2");
  EXPECT_FALSE(shard.info().has_text_bytes);
  std::vector<int32_t> got(5);
  shard.read(0, 5, got.data());
  EXPECT_EQ(got, (std::vector<int32_t>{50256, 15496, 995, 0, 50255}));

  const Dataset data({path});
  EXPECT_FALSE(data.has_text_bytes());
  EXPECT_TRUE(std::isnan(data.bytes_per_token()));

  write_file(path, make_llmc_bytes({1, 50257}));
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), path + ": byte offset 1026 (token 1): token id 50257"), "");
  write_file(path, make_llmc_bytes({1, 2, 3}).substr(0, 1024 + 4));
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), path + ": truncated shard: the header promises 3 tokens"), "");
  write_file(path, make_llmc_bytes({1, 2}).substr(0, 500));
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "truncated llm.c shard: 500 bytes"), "");
  write_file(path, make_llmc_bytes({1, 2}, 2));
  EXPECT_EQ(has(error_of([&] { TokenShard s(path); }), "llm.c shard version 2 is not supported"), "");
}

TEST(Dataset, ReadsAcrossShardsAndFindsSplitsByName) {
  TempDir dir;
  auto shard = [&](const std::string& name, std::vector<uint32_t> ids, uint64_t text_bytes) {
    ShardWriter w(dir / name, "bytes", 257, 256);
    w.add_document(ids.data(), ids.size(), text_bytes);
    w.finish();
  };
  shard("corpus_train_000001.bin", {1, 2, 3}, 2);
  shard("corpus_train_000000.bin", {10, 11}, 1);
  shard("val.bin", {20, 21, 22, 23}, 3);
  write_file(dir / "trainer-notes.txt", "not a shard");
  shard("retrain.bin", {9}, 1);  // "retrain" is not the word "train"

  const auto train = Dataset::open(dir.path().string(), "train");
  ASSERT_EQ(train->shards().size(), 2u);
  EXPECT_EQ(train->num_tokens(), 5u);
  EXPECT_EQ(train->text_bytes(), 3u);
  EXPECT_DOUBLE_EQ(train->bytes_per_token(), 3.0 / 5.0);
  std::vector<int32_t> got(5);
  train->read(0, 5, got.data());  // sorted by name: 000000 then 000001
  EXPECT_EQ(got, (std::vector<int32_t>{10, 11, 1, 2, 3}));
  train->read(1, 3, got.data());  // across the boundary
  EXPECT_EQ(got[0], 11);
  EXPECT_EQ(got[1], 1);
  EXPECT_EQ(got[2], 2);
  EXPECT_EQ(has(error_of([&] { train->read(3, 3, got.data()); }), "past the end (5 tokens)"), "");

  const auto val = Dataset::open(dir.path().string(), "val");
  EXPECT_EQ(val->num_tokens(), 4u);
  EXPECT_EQ(val->vocab_size(), 257u);
  EXPECT_EQ(val->tokenizer(), "bytes");

  EXPECT_EQ(has(error_of([&] { Dataset::open(dir.path().string(), "test"); }), "no shard of the 'test' split"), "");
  EXPECT_EQ(has(error_of([&] { Dataset::open(dir / "absent", "train"); }), "data folder does not exist"), "");
  EXPECT_EQ(has(error_of([&] { Dataset::open(dir / "val.bin", "val"); }),
                dir / "val.bin: not a folder; give the data folder that holds train.bin and val.bin"),
            "");

  ShardWriter other(dir / "gpt2.bin", "gpt2", 50257, 50256);
  const uint32_t id = 5;
  other.add_tokens(&id, 1);
  other.finish();
  EXPECT_EQ(has(error_of([&] { Dataset d({dir / "val.bin", dir / "gpt2.bin"}); }), "tokenizer gpt2 (vocabulary 50257) differs"), "");
}

TEST(Dataset, CountsTextBytesWithTheTokenizer) {
  TempDir dir;
  const ByteTokenizer bytes;
  ShardWriter w(dir / "train.bin", "bytes", 257, 256);
  const std::vector<uint32_t> ids = {256, 'a', 'b', 256, 'c'};
  w.add_tokens(ids.data(), ids.size(), 3);
  w.finish();
  const Dataset data({dir / "train.bin"});
  EXPECT_EQ(count_text_bytes(data, bytes), data.text_bytes());
  EXPECT_EQ(data.text_bytes(), 3u);
  write_file(dir / "llmc.bin", make_llmc_bytes({1, 2}));
  EXPECT_EQ(has(error_of([&] { count_text_bytes(Dataset({dir / "llmc.bin"}), bytes); }), "did not make these shards"), "");
}

// llm.c's shards do not record text bytes; GPT-2's vocabulary recovers them exactly.
TEST(Dataset, CountsTheTextBytesOfLlmcShardsWithGpt2) {
  LINATTN_REQUIRE_DATA(testing::gpt2_dir() / "encoder.json");
  const auto gpt2 = Gpt2Tokenizer::load(testing::gpt2_dir().string());
  const std::string text = "Fellow-Citizens of the Senate \u2014 and \u00e9l\u00e8ves\n\n";
  std::vector<uint16_t> tokens = {50256};
  for (const uint32_t id : gpt2->encode(text)) tokens.push_back(uint16_t(id));
  TempDir dir;
  write_file(dir / "llmc_val.bin", make_llmc_bytes(tokens));
  const Dataset data({dir / "llmc_val.bin"});
  EXPECT_EQ(count_text_bytes(data, *gpt2), text.size());
}

TEST(Dataset, BitsPerByte) {
  // 2 nats per token at 4 bytes per token: 2 / ln 2 / 4 bits per byte.
  EXPECT_NEAR(bits_per_byte(2.0, 4.0), 2.0 / std::log(2.0) / 4.0, 1e-15);
  EXPECT_NEAR(bits_per_byte(std::log(2.0), 1.0), 1.0, 1e-15);
}

}  // namespace
}  // namespace linattn::data
