#include "data/byte_level.h"

#include "data/unicode.h"

namespace linattn::data {

namespace {

struct ByteCharMap {
  uint32_t byte_to_cp[256];
  int cp_to_byte[324];  // -1: not a byte's code point

  ByteCharMap() {
    for (int& b : cp_to_byte) b = -1;
    uint32_t extra = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      byte_to_cp[b] = printable ? b : 256 + extra++;
      cp_to_byte[byte_to_cp[b]] = int(b);
    }
  }
};

const ByteCharMap& byte_char_map() {
  static const ByteCharMap map;
  return map;
}

}  // namespace

uint32_t byte_level_char(uint8_t b) { return byte_char_map().byte_to_cp[b]; }

bool byte_level_to_bytes(std::string_view chars, std::string& bytes) {
  const ByteCharMap& map = byte_char_map();
  bytes.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(chars.data());
  size_t i = 0;
  while (i < chars.size()) {
    uint32_t cp;
    const int len = decode_utf8(s + i, chars.size() - i, cp);
    if (len == 0 || cp >= 324 || map.cp_to_byte[cp] < 0) return false;
    bytes += char(map.cp_to_byte[cp]);
    i += size_t(len);
  }
  return true;
}

}  // namespace linattn::data
