// A hash table from byte strings to 32-bit values, for the tokenizers' hot look-ups (a word in the
// vocabulary, a word already merged): open addressing with linear probing, the keys in one buffer,
// so that a look-up touches one slot and one key instead of a chain of nodes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace linattn::data {

class StringTable {
 public:
  size_t size() const { return size_; }
  // Adds key -> value; false (and nothing changed) when the key is there already.
  bool insert(std::string_view key, uint32_t value);
  // The value of key, or nullptr.
  const uint32_t* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.offset == empty) return nullptr;
      if (s.hash == h && s.length == key.size() && (key.empty() || std::memcmp(keys_.data() + s.offset, key.data(), key.size()) == 0))
        return &s.value;
    }
  }
  void clear();
  // f(key, value) for every entry, in no particular order.
  template <class F>
  void for_each(F f) const {
    for (const Slot& s : slots_)
      if (s.offset != empty) f(std::string_view(keys_).substr(s.offset, s.length), s.value);
  }

  static uint64_t hash(std::string_view key) {
    const auto* p = reinterpret_cast<const unsigned char*>(key.data());
    size_t n = key.size();
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t v = 0;
    if (n) std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

 private:
  static constexpr uint32_t empty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = empty, length = 0;
    uint32_t value = 0;
  };
  void grow();

  std::vector<Slot> slots_;
  std::string keys_;
  size_t size_ = 0, mask_ = 0;
};

}  // namespace linattn::data
