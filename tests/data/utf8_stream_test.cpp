// Streaming a byte-level model's output: whole characters pass, split ones wait, invalid bytes
// become U+FFFD, and the concatenation is well-formed UTF-8.
#include "data/utf8_stream.h"

#include <gtest/gtest.h>

#include "data/unicode.h"

namespace linattn::data {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Stream, ACharacterSplitAcrossPushesIsHeldBackUntilComplete) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xE2"), "a");       // the first byte of U+20AC (euro sign)
  EXPECT_EQ(s.push("\x82"), "");
  EXPECT_EQ(s.push("\xAC" "b"), "\xE2\x82\xAC" "b");
  EXPECT_EQ(s.finish(), "");
}

TEST(Utf8Stream, InvalidBytesBecomeReplacementCharacters) {
  Utf8Stream s;
  EXPECT_EQ(s.push("x\xFFy"), "x" + kFffd + "y");
  EXPECT_EQ(s.push("\x80"), kFffd);                   // a continuation byte with no lead
  EXPECT_EQ(s.push("\xC3" "z"), kFffd + "z");          // a lead byte cut short
  EXPECT_EQ(s.push("\xED\xA0"), kFffd + kFffd);        // a surrogate's start can never complete
  EXPECT_EQ(s.push("\xF0\x9F"), "");                   // could still become an emoji...
  EXPECT_EQ(s.finish(), kFffd);                        // ...but the text ended
}

TEST(Utf8Stream, AnyBytesComeOutWellFormed) {
  Utf8Stream s;
  std::string out;
  for (int i = 0; i < 4096; ++i) out += s.push(std::string(1, char((i * 7919 + i / 13) & 0xFF)));
  out += s.finish();
  EXPECT_EQ(find_invalid_utf8(out), std::string_view::npos);
}

}  // namespace
}  // namespace linattn::data
