// Command lines the tools print for a person to paste into a shell ("continue with: ...").
#pragma once

#include <string>

namespace linattn {

// `arg` as a POSIX shell reads it back: unchanged when it is plain, else in single quotes.
std::string shell_quoted(const std::string& arg);

}  // namespace linattn
