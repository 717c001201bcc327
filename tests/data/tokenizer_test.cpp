// Tokenizers: byte-level, GPT-2's pre-tokenizer and BPE (on small files made here, and on GPT-2's own
// files against the reference JavaScript encoder: on the whole default corpus and on random Unicode text).
#include "data/tokenizer.h"

#include <map>
#include <sstream>

#include "core/rng.h"
#include "data/json.h"
#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_file;

TEST(ByteTokenizer, EncodesBytesAndReservesEndOfText) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 257u);
  EXPECT_EQ(tok.eot(), 256u);
  std::string all;
  for (int b = 0; b < 256; ++b) all += char(b);
  const std::vector<uint32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (uint32_t b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.decode(ids), all);
  // "<|endoftext|>" in text is text; encode_with_special makes it the token.
  EXPECT_EQ(tok.encode("a<|endoftext|>b").size(), 15u);
  EXPECT_EQ(tok.encode_with_special("a<|endoftext|>b"), (std::vector<uint32_t>{'a', 256, 'b'}));
  EXPECT_EQ(tok.decode({'h', 'i', 256}), "hi<|endoftext|>");
  EXPECT_EQ(tok.text_bytes(256), 0u);
  EXPECT_EQ(tok.text_bytes('x'), 1u);
  EXPECT_NE(error_of([&] { tok.decode({'a', 257}); }).find("id 257"), std::string::npos);
}

std::vector<std::string> pretokenize(const std::string& text) {
  std::vector<std::string_view> pieces;
  gpt2_pretokenize(text, pieces);
  return {pieces.begin(), pieces.end()};
}

// Expected pieces: what node's String.matchAll gives with GPT-2's pattern (the reference encoder's).
TEST(Gpt2Pretokenizer, SplitsLikeTheReferencePattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pretokenize("Hello, world!"), (V{"Hello", ",", " world", "!"}));
  EXPECT_EQ(pretokenize("I'm sure they'll say it's 'fine' DON'T"),
            (V{"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " '", "fine", "'", " DON", "'", "T"}));
  EXPECT_EQ(pretokenize("a  b   c\n\n\nd \n e "), (V{"a", " ", " b", "  ", " c", "\n\n", "\n", "d", " \n", " e", " "}));
  EXPECT_EQ(pretokenize("  leading"), (V{" ", " leading"}));
  EXPECT_EQ(pretokenize("trailing   "), (V{"trailing", "   "}));
  EXPECT_EQ(pretokenize("x.'s"), (V{"x", ".'", "s"}));
  EXPECT_EQ(pretokenize("  's"), (V{" ", " '", "s"}));
  EXPECT_EQ(pretokenize("1,000.50 and 2021"), (V{"1", ",", "000", ".", "50", " and", " 2021"}));
  EXPECT_EQ(pretokenize("caf\u00e9 na\u00efve \u4e2d\u6587\u5b57 \u0663\u0664\u0665 \u216b\u00b2 x\u3000y\u0085z\u00a0w\u200bq"),
            (V{"caf\u00e9", " na\u00efve", " \u4e2d\u6587\u5b57", " \u0663\u0664\u0665", " \u216b\u00b2", " x", "\u3000", "y",
               "\u0085", "z", "\u00a0", "w", "\u200b", "q"}));
  EXPECT_EQ(pretokenize("tab\there\r\nnew"), (V{"tab", "\t", "here", "\r", "\n", "new"}));
  EXPECT_EQ(pretokenize("\u2014\u201cquoted\u201d\u2014"), (V{"\u2014\u201c", "quoted", "\u201d\u2014"}));
  EXPECT_EQ(pretokenize("emoji \U0001F600\U0001F600 ok"), (V{"emoji", " \U0001F600\U0001F600", " ok"}));
  EXPECT_EQ(pretokenize(" \t x"), (V{" \t", " x"}));
  EXPECT_EQ(pretokenize(""), V{});
  EXPECT_EQ(pretokenize(" "), V{" "});
  EXPECT_EQ(pretokenize("'"), V{"'"});
}

// GPT-2's byte-to-character map, written out independently of the tokenizer's: printable Latin-1 bytes
// stand for themselves, the others take U+0100 onwards in byte order.
std::string byte_as_chars(unsigned char b) {
  static const std::vector<uint32_t> cps = [] {
    std::vector<uint32_t> m(256);
    uint32_t extra = 256;
    for (uint32_t c = 0; c < 256; ++c)
      m[c] = ((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE) ? c : extra++;
    return m;
  }();
  const uint32_t cp = cps[b];
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// `s` as a JSON string literal.
std::string json_quote(const std::string& s) { return Json(s).dump(); }

// A tiny tokenizer in GPT-2's file format: the 256 bytes, then the merges in rank order, then
// <|endoftext|>. With `ascii`, encoder.json spells every non-ASCII character as a \u escape, as
// GPT-2's own file does. Returns the folder.
std::string write_tiny_gpt2(const TempDir& dir, const std::vector<std::pair<std::string, std::string>>& merges,
                            bool ascii = false) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_as_chars(static_cast<unsigned char>(b)));
  std::string bpe = "#version: 0.2\n";
  auto chars = [](const std::string& bytes) {
    std::string s;
    for (const char c : bytes) s += byte_as_chars(static_cast<unsigned char>(c));
    return s;
  };
  for (const auto& [a, b] : merges) {
    bpe += chars(a) + " " + chars(b) + "\n";
    tokens.push_back(chars(a + b));
  }
  tokens.push_back("<|endoftext|>");
  Json encoder = Json::object();
  for (size_t k = 0; k < tokens.size(); ++k) encoder[tokens[k]] = k;
  write_file(dir / "tiny/encoder.json", encoder.dump(-1, ' ', ascii));
  write_file(dir / "tiny/vocab.bpe", bpe);
  return dir / "tiny";
}

TEST(Gpt2Tokenizer, MergesByRankOnTinyFiles) {
  TempDir dir;
  // ids: bytes 0..255, then 256 "ll", 257 "he", 258 "hell", 259 "hello", 260 " w", 261 "lo", 262 eot.
  const std::string path = write_tiny_gpt2(dir, {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"l", "o"}});
  const auto tok = Gpt2Tokenizer::load(path);
  EXPECT_EQ(tok->vocab_size(), 263u);
  EXPECT_EQ(tok->eot(), 262u);
  EXPECT_EQ(tok->encode("hello"), (std::vector<uint32_t>{259}));
  // "llo": (l,l) ranks before (l,o), so "ll" + "o", not "l" + "lo".
  EXPECT_EQ(tok->encode("llo"), (std::vector<uint32_t>{256, 'o'}));
  // "lllo": every (l,l) from the left in one pass: "ll", then "lo" merges the rest.
  EXPECT_EQ(tok->encode("lllo"), (std::vector<uint32_t>{256, 261}));
  EXPECT_EQ(tok->encode("hello world"), (std::vector<uint32_t>{259, 260, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tok->decode(tok->encode("hello world")), "hello world");
  EXPECT_EQ(tok->encode_with_special("hello<|endoftext|>"), (std::vector<uint32_t>{259, 262}));
  // Any byte has a token, so any UTF-8 text encodes and decodes back.
  const std::string text = "\xC3\xA9t\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80\t\n";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
}

// encoder.json as GPT-2 writes it (\u0120 for the space's character 'Ġ') reads as the same vocabulary
// as with the characters spelled in UTF-8; a token outside GPT-2's byte map is named in UTF-8.
TEST(Gpt2Tokenizer, EncoderJsonEscapesReadAsUtf8) {
  TempDir escaped_dir, plain_dir;
  const std::vector<std::pair<std::string, std::string>> merges = {{" ", "w"}, {"\xC3", "\xA9"}};
  const std::string escaped = write_tiny_gpt2(escaped_dir, merges, true), plain = write_tiny_gpt2(plain_dir, merges);
  ASSERT_NE(testing::read_file(escaped + "/encoder.json").find("\\u0120"), std::string::npos);
  const auto a = Gpt2Tokenizer::load(escaped), b = Gpt2Tokenizer::load(plain);
  ASSERT_EQ(a->vocab_size(), b->vocab_size());
  for (uint32_t id = 0; id < a->vocab_size(); ++id) EXPECT_EQ(a->token_bytes(id), b->token_bytes(id)) << "id " << id;
  EXPECT_EQ(a->encode(" w\xC3\xA9"), (std::vector<uint32_t>{256, 257}));

  // A surrogate pair is one character (U+1F600), and GPT-2's map has no byte for it.
  write_file(escaped + "/encoder.json", "{\"a\": 0,\n \"\\ud83d\\ude00\": 1}");
  std::string msg = error_of([&] { Gpt2Tokenizer::load(escaped); });
  EXPECT_NE(msg.find("token '\xF0\x9F\x98\x80' uses a character that stands for no byte"), std::string::npos) << msg;
  // A lone surrogate is no character: a syntax error at its place.
  write_file(escaped + "/encoder.json", "{\"a\": 0,\n \"\\ud83d\": 1}");
  msg = error_of([&] { Gpt2Tokenizer::load(escaped); });
  EXPECT_NE(msg.find("encoder.json:2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("surrogate"), std::string::npos) << msg;
}

TEST(Gpt2Tokenizer, RejectsNonUtf8NamingSourceAndOffset) {
  TempDir dir;
  const auto tok = Gpt2Tokenizer::load(write_tiny_gpt2(dir, {{"h", "e"}}));
  std::vector<uint32_t> ids;
  const std::string msg = error_of([&] { tok->encode("caf\xC3\xA9 \xE9t\xE9", ids, "speech.txt"); });
  EXPECT_NE(msg.find("speech.txt: byte offset 6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
}

TEST(Gpt2Tokenizer, BadFilesAreErrorsNamingThem) {
  TempDir dir;
  EXPECT_NE(error_of([&] { Gpt2Tokenizer::load(dir / "nowhere"); }).find("encoder.json"), std::string::npos);
  const std::string path = write_tiny_gpt2(dir, {{"h", "e"}});
  write_file(path + "/vocab.bpe", "#version: 0.2\nh e\nqq zz\n");
  const std::string msg = error_of([&] { Gpt2Tokenizer::load(path); });
  EXPECT_NE(msg.find("vocab.bpe:3"), std::string::npos) << msg;
  write_file(path + "/encoder.json", "{\"a\": 0,");
  EXPECT_NE(error_of([&] { Gpt2Tokenizer::load(path); }).find("encoder.json:1:"), std::string::npos);
}

TEST(Tokenizer, FactoryKnowsBothNames) {
  EXPECT_EQ(make_tokenizer("bytes", "")->name(), "bytes");
  EXPECT_NE(error_of([] { make_tokenizer("sentencepiece", ""); }).find("unknown tokenizer 'sentencepiece'"),
            std::string::npos);
}

// ---- GPT-2's own files (scripts/fetch-data) ----

TEST(Gpt2Tokenizer, KnownIdsWithGpt2Files) {
  LINATTN_REQUIRE_DATA(testing::gpt2_dir() / "encoder.json");
  const auto tok = Gpt2Tokenizer::load(testing::gpt2_dir().string());
  EXPECT_EQ(tok->vocab_size(), 50257u);
  EXPECT_EQ(tok->eot(), 50256u);
  // Ids from the reference encoder (gpt-3-encoder 1.1.4).
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<uint32_t>{15496, 995}));
  EXPECT_EQ(tok->encode("don't  stop\n\n  x"), (std::vector<uint32_t>{9099, 470, 220, 2245, 628, 220, 2124}));
  EXPECT_EQ(tok->encode("a,,b ,,, 1,000,000"), (std::vector<uint32_t>{64, 9832, 65, 837, 9832, 352, 11, 830, 11, 830}));
  EXPECT_EQ(tok->encode("<|endoftext|>"), (std::vector<uint32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(tok->encode_with_special("a<|endoftext|>"), (std::vector<uint32_t>{64, 50256}));
  EXPECT_EQ(tok->decode({15496, 995, 50256}), "Hello world<|endoftext|>");
}

// One 300,000-letter piece (no spaces) encodes and decodes back. (The quadratic all-pairs rescan this
// once guarded against took minutes here; a unit test does not time, so a slow build of BPE shows as a
// slow test, not a failure.)
TEST(Gpt2Tokenizer, LongPiecesRoundTrip) {
  LINATTN_REQUIRE_DATA(testing::gpt2_dir() / "encoder.json");
  const auto tok = Gpt2Tokenizer::load(testing::gpt2_dir().string());
  Rng rng(3);
  std::string text(300000, 'a');
  for (char& c : text) c = char('a' + rng.below(26));
  const std::vector<uint32_t> ids = tok->encode(text);
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_LT(ids.size(), text.size() * 3 / 4) << "no merges happened";
}

// The reference: one line per speech, "NAME \t COUNT \t IDS", written by data/gpt2_reference.js.
TEST(Gpt2Tokenizer, EqualsTheReferenceEncoderOnTheWholeCorpus) {
  LINATTN_REQUIRE_DATA(testing::corpus_dir(), testing::gpt2_dir() / "encoder.json", testing::gpt2_reference());
  const auto tok = Gpt2Tokenizer::load(testing::gpt2_dir().string());
  const std::string reference = testing::read_file(testing::gpt2_reference().string());
  size_t documents = 0, tokens = 0;
  for (size_t pos = 0; pos < reference.size();) {
    size_t end = reference.find('\n', pos);
    if (end == std::string::npos) end = reference.size();
    const std::string line = reference.substr(pos, end - pos);
    pos = end + 1;
    const size_t tab1 = line.find('\t'), tab2 = line.find('\t', tab1 + 1);
    ASSERT_TRUE(tab1 != std::string::npos && tab2 != std::string::npos) << "malformed reference line " << documents;
    const std::string name = line.substr(0, tab1);
    const size_t count = std::strtoul(line.c_str() + tab1 + 1, nullptr, 10);
    std::vector<uint32_t> want;
    want.reserve(count);
    const char* p = line.c_str() + tab2 + 1;
    for (char* next = nullptr;; p = next) {
      const unsigned long id = std::strtoul(p, &next, 10);
      if (next == p) break;
      want.push_back(uint32_t(id));
    }
    ASSERT_EQ(want.size(), count) << name;
    const std::string path = (testing::corpus_dir() / name).string();
    const std::string text = testing::read_file(path);
    ASSERT_FALSE(text.empty()) << path;
    std::vector<uint32_t> got;
    tok->encode(text, got, path);
    size_t k = 0;
    while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
    ASSERT_TRUE(k == got.size() && k == want.size())
        << name << ": first difference at token " << k << " of " << want.size() << " (linattn "
        << (k < got.size() ? std::to_string(got[k]) : "end") << ", reference "
        << (k < want.size() ? std::to_string(want[k]) : "end") << ")";
    EXPECT_EQ(tok->decode(got), text) << name << ": decode(encode(text)) != text";
    ++documents, tokens += count;
  }
  EXPECT_EQ(documents, 233u);
  EXPECT_EQ(tokens, 2074279u);  // the reference's total on the corpus
}

// Random text built from pieces that exercise every rule of the pattern (contractions, each class with
// and without a leading space, whitespace runs before text and at the end, non-ASCII letters, numbers,
// spaces and symbols, combining marks, astral code points), encoded by linattn and by the reference.
TEST(Gpt2Tokenizer, EqualsTheReferenceEncoderOnRandomUnicode) {
  LINATTN_REQUIRE_DATA(testing::gpt2_dir() / "Encoder.js");
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0)
      << "node is missing (scripts/setup installs it); set LINATTN_NO_DATA=1 where it cannot be";
  const char* pieces[] = {"a", "Z", "the", " ", "  ", "\n", "\n\n", "\t", "\r\n", "'s", "'t", "'re", "'ve", "'m",
                          "'ll", "'d", "'", "'S", "!", ",", ".", "1", "42", "\u00e9", "\u00df", "\u0130", "\u01c5",
                          "e\u0301", "\u0301", "\u4e2d\u6587", "\u0663", "\u216b", "\u00b2", "\u3000", "\u00a0", "\u0085",
                          "\u200b", "\ufeff", "\u2028", "\u2014", "\u201c", "\U0001F600", "\U00020000", "$", "_", "-",
                          // commas next to brackets and quotes: the reference looks pairs up by the string
                          // "left,right", where such tokens could be mistaken for one another
                          "\"", ")", "]", "[", "}", ",\"", "),", "'"};
  const size_t n_pieces = sizeof(pieces) / sizeof(pieces[0]);
  Rng rng(7);
  std::vector<std::string> texts;
  for (int t = 0; t < 3000; ++t) {
    std::string s;
    const uint64_t len = 1 + rng.below(24);
    for (uint64_t k = 0; k < len; ++k) s += pieces[rng.below(n_pieces)];
    texts.push_back(s);
  }
  TempDir dir;
  std::string json = "[";
  for (size_t k = 0; k < texts.size(); ++k) {
    if (k) json += ",";
    json += json_quote(texts[k]);
  }
  write_file(dir / "in.json", json + "]");
  write_file(dir / "run.js",
             "const fs = require('fs');\n"
             "const { encode } = require(process.argv[2]);\n"
             "const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));\n"
             "fs.writeFileSync(process.argv[4], JSON.stringify(texts.map(encode)));\n");
  const std::string cmd = "node '" + (dir / "run.js") + "' '" + (testing::gpt2_dir() / "Encoder.js").string() + "' '" +
                          (dir / "in.json") + "' '" + (dir / "out.json") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const Json want = parse_json(testing::read_file(dir / "out.json"), "reference output");
  ASSERT_EQ(want.size(), texts.size());
  const auto tok = Gpt2Tokenizer::load(testing::gpt2_dir().string());
  int mismatches = 0;
  for (size_t k = 0; k < texts.size() && mismatches < 5; ++k) {
    const auto w = want[k].get<std::vector<uint32_t>>();
    const std::vector<uint32_t> got = tok->encode(texts[k]);
    if (got != w) {
      ++mismatches;
      ADD_FAILURE() << "text " << k << " " << json_quote(texts[k]) << ": linattn and the reference differ";
    }
    EXPECT_EQ(tok->decode(got), texts[k]);
  }
}

}  // namespace
}  // namespace linattn::data
