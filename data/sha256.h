// SHA-256 (FIPS 180-4), for recording which tokenizer file made a shard.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace linattn::data {

std::array<uint8_t, 32> sha256(std::string_view bytes);
// The digest as 64 lower-case hexadecimal digits, as sha256sum prints it.
std::string sha256_hex(std::string_view bytes);
std::string to_hex(const uint8_t* bytes, size_t count);

}  // namespace linattn::data
