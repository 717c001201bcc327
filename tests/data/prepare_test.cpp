// linattn-data prepare: documents, splits, shards, bad input; the default corpus; scripts/fetch-data.
#include "data/prepare.h"

#include <sys/wait.h>

#include <cstring>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "data_testing.h"
#include "testing.h"

namespace linattn::data {
namespace {

using testing::error_of;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos ? "" : "message lacks '" + part + "': " + msg;
}

std::vector<int32_t> all_tokens(const std::string& path) {
  const TokenShard s(path);
  std::vector<int32_t> out(s.size());
  s.read(0, s.size(), out.data());
  return out;
}

std::vector<int32_t> bytes_doc(const std::string& text) {  // end-of-text, then the bytes
  std::vector<int32_t> out = {256};
  for (const char c : text) out.push_back(static_cast<unsigned char>(c));
  return out;
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(Prepare, WritesDocumentsWithEndOfTextSplitByFileName) {
  TempDir dir;
  write_file(dir / "in/1999_a.txt", "one");
  write_file(dir / "in/2011_b.txt", "two!");
  write_file(dir / "in/sub/1800_c.txt", std::string("\xFF\x00z", 3));  // any bytes under the byte tokenizer
  write_file(dir / "in/.hidden", "skipped");
  write_file(dir / "extra.txt", "five5");
  PrepareOptions o;
  o.inputs = {dir / "in", dir / "extra.txt"};
  o.out_dir = dir / "out";
  o.val_globs = split_patterns("201*,202*");
  int progress_lines = 0;
  o.progress = [&](const std::string&) { ++progress_lines; };
  const PrepareResult r = prepare(o);

  ASSERT_EQ(r.documents.size(), 4u);  // in/ sorted by path, then extra.txt
  EXPECT_EQ(r.documents[0].path, dir / "in/1999_a.txt");
  EXPECT_EQ(r.documents[1].path, dir / "in/2011_b.txt");
  EXPECT_EQ(r.documents[2].path, dir / "in/sub/1800_c.txt");
  EXPECT_EQ(r.documents[3].path, dir / "extra.txt");
  EXPECT_TRUE(r.documents[1].val);
  EXPECT_GE(progress_lines, 1);

  EXPECT_EQ(all_tokens(dir / "out/train.bin"),
            concat({bytes_doc("one"), bytes_doc(std::string("\xFF\x00z", 3)), bytes_doc("five5")}));
  EXPECT_EQ(all_tokens(dir / "out/val.bin"), bytes_doc("two!"));
  EXPECT_EQ(r.train.document_count, 3u);
  EXPECT_EQ(r.train.text_bytes, 3u + 3u + 5u);
  EXPECT_EQ(r.train.token_count, 3u + 11u);
  EXPECT_EQ(r.val.text_bytes, 4u);
  const TokenShard val(dir / "out/val.bin");
  EXPECT_EQ(val.info().tokenizer, "bytes");
  EXPECT_EQ(val.info().vocab_size, 257u);
  EXPECT_EQ(val.info().eot, 256u);
  const std::string listing = read_file(dir / "out/documents.tsv");
  EXPECT_EQ(has(listing, "val\t4\t5\t" + dir / "in/2011_b.txt"), "");
  EXPECT_EQ(has(listing, "train\t5\t6\t" + dir / "extra.txt"), "");

  const auto data = Dataset::open(dir / "out", "val");
  EXPECT_DOUBLE_EQ(data->bytes_per_token(), 4.0 / 5.0);
}

// A binary file among the inputs is prepared as given (any bytes are tokens), with a warning naming
// it; text is not warned about, UTF-8 or not (Latin-1 bytes here), nor is a binary file too short to judge.
TEST(Prepare, BinaryFilesAreWarnedAbout) {
  TempDir dir;
  std::string random(4096, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : random) x ^= x << 13, x ^= x >> 7, x ^= x << 17, c = char(x);
  write_file(dir / "in/a.txt", "Plain text, with a tab\tand\r\nlines, \xe2\x80\x94 and UTF-8.\n" + std::string(200, 'x'));
  write_file(dir / "in/b.txt", "Caf\xe9 cr\xe8me in Latin-1, which is no UTF-8 but is text: a byte here and there.\n");
  write_file(dir / "in/c.bin", random);
  write_file(dir / "in/d.bin", std::string("\x00\x01\x02", 3));
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "out";
  const PrepareResult r = prepare(o);
  EXPECT_EQ(r.documents.size(), 4u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].rfind(dir / "in/c.bin" + ": ", 0), 0u) << r.warnings[0];
  EXPECT_NE(r.warnings[0].find("% of its 4096 bytes are control bytes or not UTF-8: it looks like a binary file"),
            std::string::npos)
      << r.warnings[0];
  EXPECT_EQ(r.train.text_bytes, r.documents[0].bytes + r.documents[1].bytes + 4096 + 3);  // all prepared
}

TEST(Prepare, ValidationFractionTakesTheLastDocuments) {
  TempDir dir;
  for (int k = 0; k < 10; ++k) write_file(dir / ("in/d" + std::to_string(k) + ".txt"), std::string(size_t(k + 1), 'x'));
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "out";
  o.val_fraction = 0.25;  // ceil(2.5) = 3 documents: d7, d8, d9
  const PrepareResult r = prepare(o);
  EXPECT_EQ(r.val.document_count, 3u);
  EXPECT_EQ(r.val.text_bytes, 8u + 9u + 10u);
  EXPECT_EQ(r.train.document_count, 7u);

  // Without a split everything trains, and a val.bin from before is removed.
  o.val_fraction = 0;
  const PrepareResult all = prepare(o);
  EXPECT_FALSE(all.has_val);
  EXPECT_EQ(all.train.document_count, 10u);
  EXPECT_FALSE(std::filesystem::exists(dir / "out/val.bin"));
}

TEST(Prepare, BadInputIsAnErrorNamingIt) {
  TempDir dir;
  write_file(dir / "ok.txt", "text");
  write_file(dir / "empty.txt", "");
  std::filesystem::create_directories(dir / "no_files/sub");
  PrepareOptions o;
  o.out_dir = dir / "out";
  auto run = [&](std::vector<std::string> inputs) {
    o.inputs = std::move(inputs);
    return error_of([&] { prepare(o); });
  };
  EXPECT_EQ(has(run({dir / "missing.txt"}), dir / "missing.txt: input does not exist"), "");
  EXPECT_EQ(has(run({dir / "ok.txt", dir / "empty.txt"}), dir / "empty.txt: input file is empty"), "");
  EXPECT_EQ(has(run({dir / "no_files"}), dir / "no_files: input folder holds no files"), "");
  EXPECT_EQ(has(run({}), "no input"), "");

  o.val_globs = {"20*"};
  EXPECT_EQ(has(run({dir / "ok.txt"}), "--val-glob '20*' matches no input file name"), "");
  o.val_globs = {"*.txt"};
  EXPECT_EQ(has(run({dir / "ok.txt"}), "matches every input file"), "");
  o.val_globs = {"ok*"};
  o.val_fraction = 0.5;
  EXPECT_EQ(has(run({dir / "ok.txt"}), "not both"), "");
  o.val_globs = {};
  write_file(dir / "x.txt", "x");
  EXPECT_EQ(has(run({dir / "x.txt"}), dir / "x.txt: --val-fraction on a single file needs at least two characters"),
            "");
  o.val_fraction = 0;
  o.tokenizer = "words";
  EXPECT_EQ(has(run({dir / "ok.txt"}), "unknown tokenizer 'words'"), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "out/train.bin"));
}

// A corpus that is one file: --val-fraction splits it at the line break nearest its last fraction.
TEST(Prepare, ValidationFractionSplitsASingleFileAtALineBreak) {
  TempDir dir;
  std::string text;
  for (int k = 0; k < 10; ++k) text += "line " + std::to_string(k) + "\n";  // 7 bytes a line, 70 in all
  write_file(dir / "book.txt", text);
  PrepareOptions o;
  o.inputs = {dir / "book.txt"};
  o.out_dir = dir / "out";
  o.val_fraction = 0.25;  // the last ceil(17.5) bytes start at byte 52; the nearest line break ends at 49
  const PrepareResult r = prepare(o);
  ASSERT_TRUE(r.has_val);
  EXPECT_EQ(all_tokens(dir / "out/train.bin"), bytes_doc(text.substr(0, 49)));
  EXPECT_EQ(all_tokens(dir / "out/val.bin"), bytes_doc(text.substr(49)));
  EXPECT_EQ(r.train.text_bytes + r.val.text_bytes, 70u);
  const std::string listing = read_file(dir / "out/documents.tsv");
  EXPECT_EQ(has(listing, "train\t49\t50\t" + dir / "book.txt"), "");
  EXPECT_EQ(has(listing, "val\t21\t22\t" + dir / "book.txt"), "");
}

// A single file without line breaks (text8-style corpora are one line) splits after the nearest
// space, and without spaces before the nearest UTF-8 character, never inside one.
TEST(Prepare, ValidationFractionSplitsAOneLineFileAtASpaceOrACharacter) {
  TempDir dir;
  PrepareOptions o;
  o.out_dir = dir / "out";
  o.val_fraction = 0.25;
  const std::string words = "aaaa bbbb cccc dddd eeee ffff gggg hhhh";  // 39 bytes: the last 10 start at 29
  write_file(dir / "words.txt", words);
  o.inputs = {dir / "words.txt"};
  ASSERT_TRUE(prepare(o).has_val);
  EXPECT_EQ(all_tokens(dir / "out/train.bin"), bytes_doc(words.substr(0, 30)));  // the space ends at 29
  EXPECT_EQ(all_tokens(dir / "out/val.bin"), bytes_doc(words.substr(30)));

  std::string accents;
  for (int k = 0; k < 8; ++k) accents += "\xc3\xa9";  // 8 x 'é', 2 bytes each: the last 4 bytes start at 12
  write_file(dir / "accents.txt", accents);
  o.inputs = {dir / "accents.txt"};
  o.out_dir = dir / "out2";
  o.val_fraction = 0.2;  // the last ceil(3.2) = 4 bytes start at 12, a character's first byte
  ASSERT_TRUE(prepare(o).has_val);
  EXPECT_EQ(all_tokens(dir / "out2/train.bin"), bytes_doc(accents.substr(0, 12)));
  o.out_dir = dir / "out3";
  o.val_fraction = 0.3;  // the last ceil(4.8) = 5 bytes start at 11, inside a character: cut at 10 (a tie with 12)
  ASSERT_TRUE(prepare(o).has_val);
  EXPECT_EQ(all_tokens(dir / "out3/train.bin"), bytes_doc(accents.substr(0, 10)));
}

// The output folder is never read as input: inside an input folder it is skipped, and as the input
// folder itself it is refused (a second run would read the first one's shards as text).
TEST(Prepare, OutputFolderIsNeverReadAsInput) {
  TempDir dir;
  write_file(dir / "in/a.txt", "alpha");
  write_file(dir / "in/b.txt", "beta");
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "in/shards";
  for (int run = 0; run < 2; ++run) {  // the second run finds the first one's output inside in/
    const PrepareResult r = prepare(o);
    ASSERT_EQ(r.documents.size(), 2u);
    EXPECT_EQ(all_tokens(dir / "in/shards/train.bin"), concat({bytes_doc("alpha"), bytes_doc("beta")}));
  }
  o.out_dir = dir / "in";
  EXPECT_EQ(has(error_of([&] { prepare(o); }), "--out " + dir / "in" + " is the input folder"), "");
  o.out_dir = dir / "in/";  // the same folder, spelled otherwise
  EXPECT_EQ(has(error_of([&] { prepare(o); }), "give an --out outside the input folder"), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "in/train.bin"));
}

TEST(Prepare, TokenShardsAreRefusedAsText) {
  // Given its own output as input, prepare would read the binary shard as text and overwrite it.
  TempDir dir;
  write_file(dir / "in/a.txt", "alpha");
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "data";
  prepare(o);
  const std::vector<int32_t> tokens = all_tokens(dir / "data/train.bin");
  o.inputs = {dir / "data/train.bin"};
  EXPECT_EQ(has(error_of([&] { prepare(o); }), dir / "data/train.bin" + ": a token shard (the output of a prepare, "
                                                                          "or llm.c's), not text"),
            "");
  EXPECT_EQ(all_tokens(dir / "data/train.bin"), tokens);
  // An llm.c shard, inside a folder of text, too.
  std::string llmc(1024, '\0');
  const int32_t magic = 20240520;
  std::memcpy(llmc.data(), &magic, 4);
  write_file(dir / "in/llmc.bin", llmc);
  o.inputs = {dir / "in"};
  EXPECT_EQ(has(error_of([&] { prepare(o); }), dir / "in/llmc.bin" + ": a token shard"), "");
}

// GPT-2 refuses text that is not UTF-8, naming the file and the offset; the shards are not written.
TEST(Prepare, NonUtf8UnderGpt2IsAnErrorNamingFileAndOffset) {
  LINATTN_REQUIRE_DATA(testing::gpt2_dir() / "encoder.json");
  TempDir dir;
  write_file(dir / "in/a.txt", "fine text");
  write_file(dir / "in/b.txt", "caf\xE9 latin-1");
  PrepareOptions o;
  o.inputs = {dir / "in"};
  o.out_dir = dir / "out";
  o.tokenizer = "gpt2";
  o.gpt2_dir = testing::gpt2_dir().string();
  EXPECT_EQ(has(error_of([&] { prepare(o); }), dir / "in/b.txt: byte offset 3: not valid UTF-8"), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "out/train.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out/train.bin.tmp"));
}

// The default corpus with the default split: the figures the issue gives.
TEST(Prepare, DefaultCorpusSplitsByDocument) {
  LINATTN_REQUIRE_DATA(testing::corpus_dir());
  TempDir dir;
  PrepareOptions o;
  o.inputs = {testing::corpus_dir().string()};
  o.out_dir = dir / "sotu-bytes";
  o.val_globs = split_patterns("201*,202*");
  const PrepareResult r = prepare(o);
  EXPECT_EQ(r.documents.size(), 233u);
  EXPECT_EQ(r.val.document_count, 12u);
  EXPECT_EQ(r.val.text_bytes, 451085u);
  EXPECT_EQ(r.train.document_count, 221u);
  EXPECT_EQ(r.train.text_bytes + r.val.text_bytes, 10761413u);
  EXPECT_EQ(r.val.token_count, 451085u + 12u);  // one byte a token, one end-of-text a speech
  for (const Document& d : r.documents) {
    const std::string name = std::filesystem::path(d.path).filename().string();
    EXPECT_EQ(d.val, name >= "2010") << name;
  }
  // The validation speeches are never in the training shard: its first tokens are Washington's 1790.
  const auto train = Dataset::open(o.out_dir, "train");
  std::vector<int32_t> head(8);
  train->read(0, 8, head.data());
  EXPECT_EQ(head, bytes_doc("Fellow-"));
}

// ---- the linattn-data tool and scripts/fetch-data ----

// Runs a shell command; returns its exit status and leaves its output (stdout and stderr) in `output`.
int run(const std::string& command, std::string& output) {
  ::linattn::testing::CommandResult r = ::linattn::testing::run_command(command);
  output = r.output;
  return r.status;
}

std::string tool() {
  const char* build = std::getenv("LINATTN_BUILD_DIR");
  return (build ? std::filesystem::path(build) : testing::repo_root() / "build").string() + "/linattn-data";
}

TEST(Tool, PreparesStatsAndReportsErrors) {
  ASSERT_TRUE(std::filesystem::exists(tool())) << tool() << " is not built";
  TempDir dir;
  write_file(dir / "in/1.txt", "hello");
  write_file(dir / "in/2.txt", "world");
  std::string out;
  EXPECT_EQ(run(tool() + " --help", out), 0);
  EXPECT_EQ(has(out, "prepare INPUT..."), "");
  EXPECT_EQ(run(tool() + " prepare '" + (dir / "in") + "' --out '" + (dir / "out") + "' --val-glob '2*'", out), 0) << out;
  EXPECT_EQ(has(out, "val.bin: 1 document, 5 text bytes, 6 tokens"), "");
  EXPECT_EQ(has(out, "prepared 2 documents with the bytes tokenizer"), "");
  EXPECT_EQ(run(tool() + " stats '" + (dir / "out") + "'", out), 0) << out;
  EXPECT_EQ(has(out, "tokens 6, documents 1, text bytes 5"), "");
  // Errors say what and where in the user's files, not in our sources; LINATTN_DEBUG=1 adds the latter.
  EXPECT_EQ(run(tool() + " prepare '" + (dir / "nope") + "' --out '" + (dir / "out") + "'", out), 1);
  EXPECT_EQ(out, "linattn-data: error: " + dir / "nope: input does not exist\n");
  write_file(dir / "bad.bin", "garbage that is no shard");
  EXPECT_EQ(run(tool() + " stats '" + (dir / "bad.bin") + "'", out), 1);
  EXPECT_EQ(out.rfind("linattn-data: error: " + dir / "bad.bin: byte offset 0: wrong magic", 0), 0u) << out;
  EXPECT_EQ(out.find(".cpp"), std::string::npos) << out;
  EXPECT_EQ(run("LINATTN_DEBUG=1 " + tool() + " stats '" + (dir / "bad.bin") + "'", out), 1);
  EXPECT_EQ(has(out, "[at data/shard.cpp:"), "");
  EXPECT_EQ(run(tool() + " encode '" + (dir / "in/1.txt") + "'", out), 0);
  EXPECT_EQ(out, "104 101 108 108 111\n");
  EXPECT_EQ(run(tool() + " decode 104 105 256", out), 0);
  EXPECT_EQ(out, "hi<|endoftext|>");
  EXPECT_EQ(run(tool() + " prepare -q '" + (dir / "in") + "' --out '" + (dir / "out2") + "'", out), 0);
  EXPECT_EQ(out, "");
  EXPECT_TRUE(std::filesystem::exists(dir / "out2/train.bin"));
  EXPECT_EQ(run(tool() + " prepare --frobnicate", out), 1);
  EXPECT_EQ(out, "linattn-data prepare: error: unknown option '--frobnicate' (see linattn-data prepare --help)\n");
  EXPECT_EQ(run(tool() + " frobnicate", out), 2);
  EXPECT_EQ(has(out, "linattn-data: error: unknown command 'frobnicate'"), "");
}

// A tarball whose sha256 is not the pinned one is refused, and nothing is unpacked.
TEST(FetchData, RefusesATarballWithTheWrongChecksum) {
  TempDir dir;
  write_file(dir / "pkg/package/data/1790_x_n.txt", "forged speech");
  std::string out;
  ASSERT_EQ(run("tar -czf '" + (dir / "forged.tgz") + "' -C '" + (dir / "pkg") + "' package", out), 0) << out;
  const std::string script = (testing::repo_root() / "scripts/fetch-data").string();
  const int status = run("LINATTN_NO_DATA=0 LINATTN_DATA_DIR='" + (dir / "data") + "' LINATTN_SOTU_TARBALL='" + (dir / "forged.tgz") +
                             "' bash '" + script + "'",
                         out);
  EXPECT_NE(status, 0);
  EXPECT_EQ(has(out, "does not match the expected ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"), "");
  EXPECT_EQ(has(out, "refusing to use it"), "");
  EXPECT_FALSE(std::filesystem::exists(dir / "data/corpus/sotu"));
}

// With everything present, scripts/fetch-data prints nothing (it downloads nothing: a download reports
// its progress).
TEST(FetchData, IsQuietWhenEverythingIsPresent) {
  LINATTN_REQUIRE_DATA(testing::corpus_dir(), testing::gpt2_dir() / "encoder.json", testing::gpt2_reference());
  std::string out;
  EXPECT_EQ(run("bash '" + (testing::repo_root() / "scripts/fetch-data").string() + "'", out), 0);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace linattn::data
