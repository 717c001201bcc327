// Errors a person can act on: what() says what went wrong, where in the user's files or flags, and
// how to fix it; where() keeps the source location of the failed check, for LINATTN_DEBUG=1.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace linattn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  Error(const std::string& message, std::string where) : std::runtime_error(message), where_(std::move(where)) {}
  // "core/hdf5.cpp:120" for a failed LINATTN_CHECK; "" for errors raised on the user's input.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// The text a tool prints after "linattn-TOOL: error: " for an exception that reached its main. Out of
// memory becomes a sentence a person can act on. With LINATTN_DEBUG=1 in the environment, the source
// location of the failed check follows the message.
inline std::string error_message(const std::exception& e) {
  std::string message = e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const std::length_error*>(&e))
    message = "out of memory (" + message + "): a size in the flags, the config or an input file asks for more "
              "memory than this machine has; make it smaller";
  const char* debug = std::getenv("LINATTN_DEBUG");
  if (debug && *debug && std::string(debug) != "0") {
    const auto* error = dynamic_cast<const Error*>(&e);
    if (error && !error->where().empty()) message += " [at " + error->where() + "]";
  }
  return message;
}

namespace detail {
template <class... Args>
[[noreturn]] void fail(const char* file, int line, Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  // The path from the source root ("data/dataset.cpp"), not the build machine's absolute path.
  std::string where = file;
  size_t from = where.size();
  for (const char* top : {"/core/", "/data/", "/train/", "/layers/", "/autograd/", "/kernels/", "/tools/", "/tests/"})
    from = std::min(from, where.rfind(top));
  if (from < where.size()) where = where.substr(from + 1);
  throw Error(os.str(), where + ":" + std::to_string(line));
}
template <class... Args>
[[noreturn]] void fail_input(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace linattn

// LINATTN_CHECK(cond, "message parts", ...): throws linattn::Error("message") when cond is false; the
// error's where() is the check's "file:line".
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

namespace linattn {

// A NaN or an infinity in the numbers (a diverging model, a poisoned batch), as opposed to a bug or
// bad input: the trainer skips a step on this error, and stops on any other.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

}  // namespace linattn
