// The Unicode data, NFC, the replacement of ill-formed UTF-8, the pre-tokenizers' regular expressions
// and sha256: the categories against the Unicode Character Database of the tables' version, the rest
// against node (the reference tokenizers run on node: its normalize('NFC'), its UTF-8 decoder, its /u
// expressions) or against published values.
#include <cstdlib>

#include "core/rng.h"
#include "data/json.h"
#include "data/regex.h"
#include "data/sha256.h"
#include "data/unicode.h"
#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;
using testing::TempDir;
using testing::write_file;

std::string hex_of(std::string_view bytes) { return to_hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()); }

std::string base64_decode(std::string_view b64) {
  std::string bytes;
  int bits = 0, value = 0;
  for (const char c : b64) {
    const int d = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
                  : c == '+' ? 62 : c == '/' ? 63 : -1;
    if (d < 0) continue;
    value = value << 6 | d, bits += 6;
    if (bits >= 8) bytes += char((value >> (bits - 8)) & 255), bits -= 8;
  }
  return bytes;
}

// Runs `script` with node on `input` (JSON) and returns its `output` (JSON). The script runs inside an
// async function: it may await.
Json run_node(const std::string& script, const Json& input) {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    ADD_FAILURE() << "node is missing (scripts/setup installs it)";
    return Json();
  }
  TempDir dir;
  write_file(dir / "run.js", "const fs = require('fs');\nconst input = JSON.parse(fs.readFileSync(process.argv[2], 'utf-8'));\n"
                             "(async () => {\n" + script + "\nfs.writeFileSync(process.argv[3], JSON.stringify(output));\n"
                             "})().catch(e => { console.error(e); process.exit(1); });\n");
  write_file(dir / "in.json", input.dump());
  const std::string cmd = "node '" + (dir / "run.js") + "' '" + (dir / "in.json") + "' '" + (dir / "out.json") + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return parse_json(testing::read_file(dir / "out.json"), "node's output");
}

std::string utf8(uint32_t cp) {
  std::string s;
  append_utf8(cp, s);
  return s;
}

std::string nfc(std::string_view s) {
  std::string out;
  append_nfc(s, out);
  return out;
}

// ---- categories ----

TEST(Unicode, CategoriesOfKnownCodePoints) {
  EXPECT_EQ(category('A'), Category::Lu);
  EXPECT_EQ(category('a'), Category::Ll);
  EXPECT_EQ(category(0x01C5), Category::Lt);  // ǅ
  EXPECT_EQ(category(0x4E2D), Category::Lo);  // 中
  EXPECT_EQ(category(0x0301), Category::Mn);
  EXPECT_EQ(category('7'), Category::Nd);
  EXPECT_EQ(category(0x216B), Category::Nl);  // Ⅻ
  EXPECT_EQ(category(0xB2), Category::No);    // ²
  EXPECT_EQ(category('_'), Category::Pc);
  EXPECT_EQ(category(0x1F600), Category::So);
  EXPECT_EQ(category(' '), Category::Zs);
  EXPECT_EQ(category('\n'), Category::Cc);
  EXPECT_EQ(category(0xFEFF), Category::Cf);
  EXPECT_EQ(category(0xE000), Category::Co);
  EXPECT_EQ(category(0x10FFFF), Category::Cn);
  EXPECT_EQ(category_mask("L"), category_mask("Letter"));
  EXPECT_EQ(category_mask("L"), category_mask("Lu") | category_mask("Ll") | category_mask("Lt") | category_mask("Lm") |
                                    category_mask("Lo"));
  EXPECT_EQ(category_mask("Script=Latin"), 0u);
}

// Every code point's category in the Unicode Character Database of the tables' version (the
// @unicode/unicode-X package scripts/fetch-data pins; node only decodes its ranges, so node's own
// Unicode version does not matter).
TEST(Unicode, EveryCategoryEqualsTheUcd) {
  LINATTN_REQUIRE_DATA(testing::ucd_dir() / "package.json", testing::ucd_dir() / "decode-ranges.mjs");
  const std::string package = parse_json(testing::read_file(testing::ucd_dir() / "package.json"), "package.json")["name"];
  ASSERT_EQ(package, "@unicode/unicode-" + std::string(unicode_tables::version) + ".0")
      << "scripts/fetch-data pins the data of another Unicode version than data/unicode_tables.cpp's";
  // The database's long names of the general categories, in the order of category_names.
  const std::vector<std::string> long_names = {
      "Unassigned",          "Uppercase_Letter",      "Lowercase_Letter",      "Titlecase_Letter",
      "Modifier_Letter",     "Other_Letter",          "Nonspacing_Mark",       "Spacing_Mark",
      "Enclosing_Mark",      "Decimal_Number",        "Letter_Number",         "Other_Number",
      "Connector_Punctuation", "Dash_Punctuation",    "Open_Punctuation",      "Close_Punctuation",
      "Initial_Punctuation", "Final_Punctuation",     "Other_Punctuation",     "Math_Symbol",
      "Currency_Symbol",     "Modifier_Symbol",       "Other_Symbol",          "Space_Separator",
      "Line_Separator",      "Paragraph_Separator",   "Control",               "Format",
      "Surrogate",           "Private_Use"};
  ASSERT_EQ(long_names.size(), size_t(category_total));
  // Each code point's category index, or 255 where the database gives none or several.
  const Json out = run_node(
      "const { pathToFileURL } = require('url'), path = require('path');\n"
      "const cats = new Uint8Array(0x110000), seen = new Uint8Array(0x110000);\n"
      "for (let k = 0; k < input.names.length; ++k) {\n"
      "  const file = path.join(input.dir, 'General_Category', input.names[k], 'ranges.mjs');\n"
      "  for (const r of (await import(pathToFileURL(file).href)).default)\n"
      "    for (let cp = r.begin; cp < r.end; ++cp) { cats[cp] = k; ++seen[cp]; }\n"
      "}\n"
      "for (let cp = 0; cp < 0x110000; ++cp) if (seen[cp] !== 1) cats[cp] = 255;\n"
      "const output = Buffer.from(cats).toString('base64');",
      Json{{"names", long_names}, {"dir", testing::ucd_dir().string()}});
  const std::string cats = base64_decode(out.get<std::string>());
  ASSERT_EQ(cats.size(), 0x110000u);
  int wrong = 0;
  for (uint32_t cp = 0; cp < 0x110000 && wrong < 10; ++cp) {
    const int theirs = static_cast<unsigned char>(cats[cp]);
    if (theirs == 255) {
      ++wrong;
      ADD_FAILURE() << std::hex << "U+" << cp << " is in no category of the database, or in several";
    } else if (int(category(cp)) != theirs) {
      ++wrong;
      ADD_FAILURE() << std::hex << "U+" << cp << ": linattn " << unicode_tables::category_names[int(category(cp))]
                    << ", the database " << unicode_tables::category_names[theirs];
    }
  }
}

// ---- NFC ----

TEST(Unicode, NfcOfKnownCases) {
  EXPECT_EQ(nfc("plain ASCII, unchanged"), "plain ASCII, unchanged");
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");                        // e + U+0301 -> é
  EXPECT_EQ(nfc("\xC3\xA9"), "\xC3\xA9");                         // é stays
  EXPECT_EQ(nfc(utf8(0x1100) + utf8(0x1161) + utf8(0x11A8)), utf8(0xAC01));  // Hangul L V T -> 각
  EXPECT_EQ(nfc(utf8(0xF900)), utf8(0x8C48));                     // a CJK compatibility ideograph's singleton
  EXPECT_EQ(nfc("s" + utf8(0x0307) + utf8(0x0323)), utf8(0x1E69)); // marks reordered, then composed: ṩ
  EXPECT_EQ(nfc("a" + utf8(0x0301) + utf8(0x0301)), utf8(0xE1) + utf8(0x0301));  // the second is blocked
  EXPECT_EQ(nfc(utf8(0x0301) + "e"), utf8(0x0301) + "e");         // a mark with nothing before it
  EXPECT_EQ(nfc(utf8(0x212B)), utf8(0xC5));                       // Angstrom sign -> Å
  EXPECT_EQ(nfc("q" + utf8(0x0344) + "y"), "q" + utf8(0x0308) + utf8(0x0301) + "y");  // decomposed, not recomposed
  EXPECT_EQ(nfc("x" + utf8(0x0344)), utf8(0x1E8D) + utf8(0x0301));  // x + U+0308 does compose
}

TEST(Unicode, NfcEqualsNodesOnRandomText) {
  // Starters that compose, marks of several classes, Hangul jamo and syllables, singletons, excluded
  // composites, ASCII and CJK.
  const uint32_t pool[] = {'a', 'e', 'o', 'A', 's', ' ', 'x', 0x301, 0x300, 0x302, 0x308, 0x323, 0x327, 0x328, 0x31B,
                           0x334, 0x345, 0x3B1, 0x3B9, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0x0B47, 0x0B3E,
                           0x0B57, 0x0CC6, 0x0CC2, 0x0CD5, 0x304B, 0x3099, 0x05D0, 0x05B7, 0x0627, 0x0653, 0x0654,
                           0x0F71, 0x0F72, 0x0F80, 0x0FB2, 0xF900, 0x2126, 0x0958, 0x1E9B, 0x4E2D, 0x1F600, 0x0340,
                           0x0344, 0x1E63, 0x00C5, 0x212B, 0x11131, 0x11127, 0x1D15E};
  Rng rng(11);
  std::vector<std::string> texts;
  for (int t = 0; t < 3000; ++t) {
    std::string s;
    for (uint64_t k = 1 + rng.below(8); k > 0; --k) append_utf8(pool[rng.below(sizeof pool / sizeof pool[0])], s);
    texts.push_back(s);
  }
  const Json out = run_node("const output = input.map(s => s.normalize('NFC'));", Json(texts));
  ASSERT_EQ(out.size(), texts.size());
  int wrong = 0;
  for (size_t k = 0; k < texts.size() && wrong < 5; ++k)
    if (nfc(texts[k]) != out[k].get<std::string>()) {
      ++wrong;
      ADD_FAILURE() << "text " << k << " (" << hex_of(texts[k]) << "): linattn " << hex_of(nfc(texts[k])) << ", node "
                    << hex_of(out[k].get<std::string>());
    }
}

// ---- ill-formed UTF-8 ----

TEST(Unicode, IllFormedUtf8BecomesReplacementCharactersAsNodeReadsIt) {
  EXPECT_EQ(replace_invalid_utf8("ok"), "ok");
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8("a\xE2\x82" "b"), "a" + fffd + "b");          // a truncated sequence is one
  EXPECT_EQ(replace_invalid_utf8("\xF0\x80\x80"), fffd + fffd + fffd);         // F0 80: 80 cannot follow F0
  EXPECT_EQ(replace_invalid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);         // a surrogate
  EXPECT_EQ(replace_invalid_utf8("\xC0\xAF"), fffd + fffd);                    // overlong
  const unsigned char pool[] = {'a', 0x80, 0xBF, 0xC2, 0xC0, 0xC3, 0xA9, 0xE0, 0xA0, 0xED, 0x9F, 0xE2, 0x82, 0xAC,
                                0xF0, 0x90, 0xF4, 0x8F, 0xF5, 0xFF, 0x9F, 0x98};
  Rng rng(5);
  std::vector<std::string> hex;
  std::vector<std::string> texts;
  for (int t = 0; t < 2000; ++t) {
    std::string s;
    for (uint64_t k = 1 + rng.below(10); k > 0; --k) s += char(pool[rng.below(sizeof pool)]);
    texts.push_back(s);
    hex.push_back(hex_of(s));
  }
  const Json out = run_node("const output = input.map(h => Buffer.from(Buffer.from(h, 'hex').toString('utf-8'), 'utf-8').toString('hex'));",
                            Json(hex));
  ASSERT_EQ(out.size(), texts.size());
  int wrong = 0;
  for (size_t k = 0; k < texts.size() && wrong < 5; ++k)
    if (hex_of(replace_invalid_utf8(texts[k])) != out[k].get<std::string>()) {
      ++wrong;
      ADD_FAILURE() << hex[k] << ": linattn " << hex_of(replace_invalid_utf8(texts[k])) << ", node " << out[k];
    }
}

// ---- regular expressions ----

// All matches as JavaScript's matchAll finds them: [begin, end) byte offsets.
std::vector<std::pair<size_t, size_t>> all_matches(const Regex& re, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t from = 0, b, e;
  while (from <= text.size() && re.search(text, from, b, e)) {
    out.emplace_back(b, e);
    if (e > b) {
      from = e;
    } else {
      if (b == text.size()) break;
      from = b + 1;
      while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
    }
  }
  return out;
}

std::string show(const std::vector<std::pair<size_t, size_t>>& m) {
  std::string s;
  for (const auto& [b, e] : m) s += "[" + std::to_string(b) + "," + std::to_string(e) + ")";
  return s;
}

TEST(Regex, MatchesAsJavaScriptDoes) {
  auto matches = [](const char* pattern, const std::string& text) { return show(all_matches(Regex(pattern, "test"), text)); };
  EXPECT_EQ(matches("a+?b", "aaab"), "[0,4)");
  EXPECT_EQ(matches("a+?", "aaa"), "[0,1)[1,2)[2,3)");
  EXPECT_EQ(matches("(?:ab|a)c", "ac abc"), "[0,2)[3,6)");
  EXPECT_EQ(matches("x{2,3}", "xxxxxxx"), "[0,3)[3,6)");
  EXPECT_EQ(matches("\\s+(?!\\S)|\\s+", "a   b"), "[1,3)[3,4)");
  EXPECT_EQ(matches("(?i:'s|'t)", "It'S it's"), "[2,4)[7,9)");
  EXPECT_EQ(matches("\\p{N}{1,3}", "1234567"), "[0,3)[3,6)[6,7)");
  EXPECT_EQ(matches("^a|b$", "aab"), "[0,1)[2,3)");
  EXPECT_EQ(matches("[^\\s\\p{L}]+", "ab 12!? c"), "[3,7)");
  EXPECT_EQ(matches("\\u00e9|\\u{1F600}", "\xC3\xA9\xF0\x9F\x98\x80"), "[0,2)[2,6)");
  EXPECT_EQ(matches("a*", "baa"), "[0,0)[1,3)[3,3)");
  EXPECT_EQ(matches("(?=b)", "ab"), "[1,1)");
  EXPECT_EQ(matches(".", "a\nb"), "[0,1)[2,3)");
  EXPECT_EQ(matches("\\#\\&\\~", "#&~"), "[0,3)");  // escaped punctuation is itself
}

TEST(Regex, RefusesWhatItDoesNotImplementNamingThePosition) {
  struct Case {
    const char* pattern;
    const char* message;
  };
  for (const Case& c : {Case{"(?<=a)b", "at character 3: lookbehind"}, Case{"a++", "possessive"},
                        Case{"\\bword", "the escape \\b is not supported"}, Case{"(a*)*", "can match nothing"},
                        Case{"[z-a]", "range out of order"}, Case{"\\p{Greek}", "not a general category"},
                        Case{"(abc", "missing ')'"}, Case{"abc)", "unbalanced ')'"}, Case{"*a", "nothing to repeat"},
                        Case{"(?i:\\p{L})", "inside (?i:...)"}, Case{"\\1", "the escape \\1"}}) {
    const std::string msg = error_of([&] { Regex(c.pattern, "tokenizer.json: pre_tokenizer.pattern.Regex"); });
    EXPECT_NE(msg.find("tokenizer.json: pre_tokenizer.pattern.Regex: pattern \""), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.pattern << ": " << msg;
  }
}

// The pre-tokenizer patterns of GPT-2, Llama 3, Qwen2/3 and GPT-4o, and a few of our own, matched on
// random text by linattn and by node's /gu expressions (the (?i:...) group rewritten for node as the
// reference rewrites it).
TEST(Regex, EqualsNodeOnTokenizerPatterns) {
  const std::string contractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  const std::vector<std::string> patterns = {
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
      contractions + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      contractions + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?"
      "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "\\d+|\\w+|\\W", "[\\p{P}\\p{S}]+?|x{2,}", "(a|ab)(c|bcd)(d*)", "\\S+?(?=\\s)|.", "[^a-c\\d]+|[\\-\\]x]"};
  const char* pieces[] = {"a", "Z", "the", " ", "  ", "\n", "\r\n", "\t", "'s", "'S", "'ll", "'LL", "'", "!", ",", "1",
                          "1234", "\xC3\xA9", "\xC3\x89", "\xC7\x85", "e\xCC\x81", "\xE4\xB8\xAD\xE6\x96\x87",
                          "\xD9\xA3", "\xE2\x85\xAB", "\xC2\xB2", "\xE3\x80\x80", "\xC2\xA0", "\xC2\x85",
                          "\xE2\x80\x8B", "\xEF\xBB\xBF", "\xE2\x80\xA8", "\xF0\x9F\x98\x80", "$", "_", "-", "/",
                          "]", "abcd", "bcd", "x", "xx"};
  Rng rng(3);
  std::vector<std::string> texts;
  for (int t = 0; t < 400; ++t) {
    std::string s;
    for (uint64_t k = 1 + rng.below(16); k > 0; --k) s += pieces[rng.below(sizeof pieces / sizeof pieces[0])];
    texts.push_back(s);
  }
  std::vector<std::string> js_patterns;
  for (std::string p : patterns) {
    const size_t at = p.find(contractions);
    if (at != std::string::npos) p.replace(at, contractions.size(), "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))");
    js_patterns.push_back(p);
  }
  const Json out = run_node(
      "const output = input.patterns.map(p => { const re = new RegExp(p, 'gu');\n"
      "  return input.texts.map(t => [...t.matchAll(re)].map(m => [Buffer.byteLength(t.slice(0, m.index)),\n"
      "    Buffer.byteLength(t.slice(0, m.index + m[0].length))])); });",
      Json{{"patterns", js_patterns}, {"texts", texts}});
  ASSERT_EQ(out.size(), patterns.size());
  for (size_t p = 0; p < patterns.size(); ++p) {
    const Regex re(patterns[p], "test");
    int wrong = 0;
    for (size_t t = 0; t < texts.size() && wrong < 3; ++t) {
      std::vector<std::pair<size_t, size_t>> want;
      for (const Json& m : out[p][t]) want.emplace_back(m[0].get<size_t>(), m[1].get<size_t>());
      const auto got = all_matches(re, texts[t]);
      if (got != want) {
        ++wrong;
        ADD_FAILURE() << "pattern " << patterns[p] << " on " << Json(texts[t]).dump() << ": linattn " << show(got)
                      << ", node " << show(want);
      }
    }
  }
}

// ---- sha256 ----

TEST(Sha256, PublishedVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Lengths around the block and padding boundaries, against sha256sum.
  TempDir dir;
  for (const size_t n : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {
    std::string s(n, '\0');
    for (size_t k = 0; k < n; ++k) s[k] = char(k * 7 + 3);
    write_file(dir / "x", s);
    const std::string cmd = "sha256sum '" + (dir / "x") + "' > '" + (dir / "sum") + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(sha256_hex(s), testing::read_file(dir / "sum").substr(0, 64)) << n << " bytes";
  }
}

}  // namespace
}  // namespace linattn::data
