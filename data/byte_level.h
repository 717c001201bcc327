// GPT-2's byte-to-character map, which byte-level BPE vocabularies (GPT-2's files, tokenizer.json's
// ByteLevel) are written in: bytes that are printable Latin-1 stand for themselves, the other 68 bytes
// take U+0100, U+0101, ... in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace linattn::data {

// The character that stands for byte b.
uint32_t byte_level_char(uint8_t b);
// The bytes a token string of such a vocabulary stands for; false if a character stands for no byte.
bool byte_level_to_bytes(std::string_view chars, std::string& bytes);

}  // namespace linattn::data
