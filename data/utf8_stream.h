// Printing text that arrives a token at a time, possibly as arbitrary bytes (a byte-level model can
// emit any byte sequence): well-formed UTF-8 passes through, a character split across tokens is held
// back until it is complete, and bytes that cannot be part of well-formed UTF-8 become U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace linattn::data {

class Utf8Stream {
 public:
  // The printable text after appending `bytes`: everything up to an incomplete final character.
  std::string push(std::string_view bytes);
  // What is still held back, at the end of the text (an unfinished character becomes U+FFFD).
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace linattn::data
