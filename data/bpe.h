// Byte-pair merging, shared by GPT-2's tokenizer and tokenizer.json's BPE model: a table of merges
// (left id, right id) -> merged id, ranked by their order in the merges list, and the merge loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace linattn::data {

class BpeMerges {
 public:
  // The next merge in rank order. A pair listed twice keeps its later rank, as the reference
  // implementations (whose tables are maps filled in list order) do.
  void add(uint32_t left, uint32_t right, uint32_t merged);
  size_t size() const { return rank_; }
  bool has(uint32_t left, uint32_t right) const { return merges_.count(key(left, right)) > 0; }

  // Merges ids[begin..] in place: repeatedly the adjacent pair of lowest rank, the leftmost of equal
  // ones, until no adjacent pair has a merge. A heap of candidate pairs over a linked list of tokens
  // makes this O(n log n) in the number of tokens (not O(n^2)); a candidate whose tokens changed after
  // it was pushed is dropped when popped. Merging one occurrence at a time gives the same result as
  // merging every occurrence of a pair at once, because a pair that a merge creates always ranks after
  // that merge (a token must exist before a merge can use it).
  void apply(std::vector<uint32_t>& ids, size_t begin = 0) const;

 private:
  static uint64_t key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }
  struct Merge {
    uint32_t rank;
    uint32_t merged;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  uint32_t rank_ = 0;
};

}  // namespace linattn::data
