#include "data/string_table.h"

#include "core/error.h"

namespace linattn::data {

bool StringTable::insert(std::string_view key, uint32_t value) {
  if (find(key)) return false;
  if ((size_ + 1) * 2 > slots_.size()) grow();
  LINATTN_CHECK(keys_.size() + key.size() < empty, "string table: more than 4 GiB of keys");
  const uint64_t h = hash(key);
  size_t i = h & mask_;
  while (slots_[i].offset != empty) i = (i + 1) & mask_;
  slots_[i] = Slot{h, uint32_t(keys_.size()), uint32_t(key.size()), value};
  keys_.append(key);
  ++size_;
  return true;
}

void StringTable::clear() {
  for (Slot& s : slots_) s = Slot{};
  keys_.clear();
  size_ = 0;
}

// Twice the slots (at least 64), every entry placed again; the table stays at most half full.
void StringTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.offset == empty) continue;
    size_t i = s.hash & mask_;
    while (slots_[i].offset != empty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace linattn::data
