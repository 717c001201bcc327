// Errors: what() is the user's message alone; the failed check's source location is where(), shown
// by error_message() only with LINATTN_DEBUG=1; out of memory reads as a sentence.
#include "core/error.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

namespace linattn {
namespace {

TEST(Error, MessageAndSourceLocationAreApart) {
  int line = 0;
  try {
    line = __LINE__ + 1;
    LINATTN_CHECK(1 + 1 == 3, "data.bin: token ", 7, " is outside the vocabulary");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "data.bin: token 7 is outside the vocabulary");
    EXPECT_EQ(e.where(), "tests/core/error_test.cpp:" + std::to_string(line));

    unsetenv("LINATTN_DEBUG");
    EXPECT_EQ(error_message(e), "data.bin: token 7 is outside the vocabulary");
    setenv("LINATTN_DEBUG", "1", 1);
    EXPECT_EQ(error_message(e), "data.bin: token 7 is outside the vocabulary [at " + e.where() + "]");
    unsetenv("LINATTN_DEBUG");
  }
  try {
    LINATTN_REQUIRE(false, "config.yaml:3:5: unknown key");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config.yaml:3:5: unknown key");
    EXPECT_EQ(e.where(), "");
  }
}

TEST(Error, OutOfMemoryIsASentence) {
  const std::string m = error_message(std::bad_alloc());
  EXPECT_EQ(m.rfind("out of memory (", 0), 0u) << m;
  EXPECT_NE(m.find("make it smaller"), std::string::npos) << m;
}

}  // namespace
}  // namespace linattn
