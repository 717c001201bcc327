#include "core/flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace linattn {

int64_t parse_count(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  LINATTN_REQUIRE(!text.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi, flag, " '", text,
                  "' is not a whole number in [", lo, ", ", hi, "]");
  return v;
}

double parse_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  LINATTN_REQUIRE(!text.empty() && *end == '\0' && errno == 0 && std::isfinite(v), flag, " '", text,
                  "' is not a number");
  return v;
}

}  // namespace linattn
