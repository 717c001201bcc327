#include "data/utf8_stream.h"

#include "data/unicode.h"

namespace linattn::data {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the sequence its lead byte announces (1 to 4), or 0 for a byte that cannot lead one.
int expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_ += bytes;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const auto* s = reinterpret_cast<const unsigned char*>(pending_.data()) + i;
    const size_t left = pending_.size() - i;
    uint32_t cp = 0;
    if (int n = decode_utf8(s, left, cp); n > 0) {
      out.append(pending_, i, size_t(n));
      i += size_t(n);
      continue;
    }
    // Not a whole character here: wait for more when what there is could still become one.
    const int want = expected_length(s[0]);
    if (want > 0 && left < size_t(want)) {
      bool could = true;
      for (size_t j = 1; j < left; ++j) could = could && (s[j] & 0xC0) == 0x80;
      // The second byte's narrower ranges (no overlong forms, surrogates or values above U+10FFFF).
      if (left >= 2) {
        const unsigned char b = s[1];
        if (s[0] == 0xE0) could = could && b >= 0xA0;
        if (s[0] == 0xED) could = could && b <= 0x9F;
        if (s[0] == 0xF0) could = could && b >= 0x90;
        if (s[0] == 0xF4) could = could && b <= 0x8F;
      }
      if (could) break;
    }
    out += kReplacement;  // one replacement per byte that starts no character
    ++i;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out = pending_.empty() ? "" : std::string(kReplacement);  // one for the unfinished character
  pending_.clear();
  return out;
}

}  // namespace linattn::data
