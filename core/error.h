// Errors a person can act on: every check carries file and line and says what went wrong.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace linattn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
[[noreturn]] void fail(const char* file, int line, Args&&... args) {
  std::ostringstream os;
  os << file << ":" << line << ": ";
  (os << ... << args);
  throw Error(os.str());
}
template <class... Args>
[[noreturn]] void fail_input(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace linattn

// LINATTN_CHECK(cond, "message parts", ...): throws linattn::Error("file:line: message") when cond is false.
#define LINATTN_CHECK(cond, ...)                                          \
  do {                                                                    \
    if (!(cond)) ::linattn::detail::fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define LINATTN_FAIL(...) ::linattn::detail::fail(__FILE__, __LINE__, __VA_ARGS__)

// LINATTN_REQUIRE(cond, "message parts", ...): for checks on the user's input (config, data files)
// whose message already says where in that input the problem is; no source location is added.
#define LINATTN_REQUIRE(cond, ...)                                        \
  do {                                                                    \
    if (!(cond)) ::linattn::detail::fail_input(__VA_ARGS__);              \
  } while (0)
