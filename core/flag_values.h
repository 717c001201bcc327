// Command-line flag values of the tools, read strictly: the whole text must be the number, and an
// error names the flag, its text and what was expected.
#pragma once

#include <cstdint>
#include <string>

namespace linattn {

// A whole number in [lo, hi]: "--threads 'x' is not a whole number in [1, 4096]".
int64_t parse_count(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
// A finite number.
double parse_number(const std::string& flag, const std::string& text);

}  // namespace linattn
