// parse_json's error positions (JSON itself is nlohmann-json's) and the Unicode classes behind GPT-2's
// pre-tokenizer.
#include "data/json.h"
#include "data/unicode.h"
#include "data_testing.h"

namespace linattn::data {
namespace {

using testing::error_of;

// The line and column are those of the offending byte, counted from 1; the byte offset from 0.
TEST(Json, ErrorsNameSourceLineColumnAndOffset) {
  const std::string msg = error_of([] { parse_json("{\"a\": 1,\n \"b\" 2}", "enc.json"); });
  EXPECT_NE(msg.find("enc.json:2:6 (byte 14): "), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected ':'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("json.exception"), std::string::npos) << "the library's own prefix is left out: " << msg;
  struct Case {
    const char* text;
    const char* where;
  };
  for (const Case& c : {Case{"", "bad.json:1:1 (byte 0)"}, Case{"x", "bad.json:1:1 (byte 0)"},
                        Case{"{\"a\": 1} x", "bad.json:1:10 (byte 9)"}, Case{"[1,\n]", "bad.json:2:1 (byte 4)"},
                        Case{"{\n\n  \"a\" 1}", "bad.json:3:7 (byte 9)"}}) {
    const std::string m = error_of([&] { parse_json(c.text, "bad.json"); });
    EXPECT_NE(m.find(c.where), std::string::npos) << "input '" << c.text << "': " << m;
  }
  // Whatever the library rejects is an error naming the file.
  for (const char* bad : {"\"\\ud800\"", "\"\\udc00\"", "\"a\nb\"", "01", "1.", "-", "\"abc", "tru", "[\"\\q\"]",
                          "\"\xC3\x28\""})
    EXPECT_NE(error_of([&] { parse_json(bad, "bad.json"); }).find("bad.json:1:"), std::string::npos) << bad;
  // A valid document parses, escapes decoded to UTF-8.
  EXPECT_EQ(parse_json(R"({"s": "\u00e9\ud83d\ude00"})", "ok.json")["s"], "\xC3\xA9\xF0\x9F\x98\x80");
}

TEST(Unicode, DecodesWellFormedUtf8AndRejectsTheRest) {
  auto decode = [](const std::string& s, uint32_t& cp) {
    return decode_utf8(reinterpret_cast<const unsigned char*>(s.data()), s.size(), cp);
  };
  uint32_t cp = 0;
  EXPECT_EQ(decode("A", cp), 1);
  EXPECT_EQ(cp, 0x41u);
  EXPECT_EQ(decode("\xC3\xA9", cp), 2);
  EXPECT_EQ(cp, 0xE9u);
  EXPECT_EQ(decode("\xE4\xB8\xAD", cp), 3);
  EXPECT_EQ(cp, 0x4E2Du);
  EXPECT_EQ(decode("\xF0\x9F\x98\x80", cp), 4);
  EXPECT_EQ(cp, 0x1F600u);
  EXPECT_EQ(decode("\xF4\x8F\xBF\xBF", cp), 4);  // U+10FFFF, the last code point
  for (const char* bad : {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                          "\xF8\x88\x80\x80\x80", "\xC3", "\xE4\xB8", "\xC3\x28", "\xFF"})
    EXPECT_EQ(decode(bad, cp), 0) << "accepted a malformed sequence";
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x80\x94 ok"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE9t\xE9"), 6u);  // Latin-1 'é' after valid text
  EXPECT_EQ(find_invalid_utf8("ab\xE4\xB8"), 2u);             // truncated at the end
}

// Expected classes from node's regular expressions (/\p{L}/u, /\p{N}/u, /\s/u), which the reference
// GPT-2 encoder uses.
TEST(Unicode, ClassesFollowJavaScriptsCategories) {
  struct Case {
    uint32_t cp;
    bool letter, number, space;
  };
  const Case cases[] = {
      {'a', true, false, false},    {'Z', true, false, false},    {'0', false, true, false},
      {'_', false, false, false},   {'-', false, false, false},   {' ', false, false, true},
      {'\t', false, false, true},   {'\r', false, false, true},   {0x0B, false, false, true},
      {0xE9, true, false, false},   {0x4E2D, true, false, false},  {0x663, false, true, false},   // é 中 ٣
      {0x216B, false, true, false}, {0xB2, false, true, false},   {0x3000, false, false, true},  // Ⅻ ² ideographic space
      {0x85, false, false, false},  {0xFEFF, false, false, true}, {0x200B, false, false, false},  // NEL, BOM, ZWSP
      {0x1F600, false, false, false}, {0x2028, false, false, true}, {0xA0, false, false, true},
      {0x10FFFF, false, false, false}, {0x20000, true, false, false},  // a CJK extension B ideograph
  };
  for (const Case& c : cases) {
    EXPECT_EQ(is_letter(c.cp), c.letter) << std::hex << "U+" << c.cp;
    EXPECT_EQ(is_number(c.cp), c.number) << std::hex << "U+" << c.cp;
    EXPECT_EQ(is_space(c.cp), c.space) << std::hex << "U+" << c.cp;
  }
  // The tables are sorted, disjoint ranges, and the classes do not overlap.
  for (size_t k = 0; k < unicode_tables::category_count; ++k) {
    EXPECT_LE(unicode_tables::category[k].first, unicode_tables::category[k].last);
    if (k) {
      EXPECT_GT(unicode_tables::category[k].first, unicode_tables::category[k - 1].last) << "not sorted at " << k;
    }
  }
  for (size_t k = 0; k < unicode_tables::space_count; ++k) {
    EXPECT_LE(unicode_tables::space[k].first, unicode_tables::space[k].last);
    if (k) {
      EXPECT_GT(unicode_tables::space[k].first, unicode_tables::space[k - 1].last + 1) << "not merged at " << k;
    }
  }
  for (uint32_t cp = 0; cp < 0x30000; ++cp)
    ASSERT_LE(int(is_letter(cp)) + int(is_number(cp)) + int(is_space(cp)), 1) << std::hex << "U+" << cp;
}

}  // namespace
}  // namespace linattn::data
