#include "data/bpe.h"

#include <algorithm>
#include <limits>

namespace linattn::data {

void BpeMerges::add(uint32_t left, uint32_t right, uint32_t merged) { merges_[key(left, right)] = Merge{rank_++, merged}; }

void BpeMerges::apply(std::vector<uint32_t>& ids, size_t begin) const {
  const auto n = int32_t(ids.size() - begin);
  if (n < 2) return;
  if (n == 2) {  // the common short case without the heap
    const auto it = merges_.find(key(ids[begin], ids[begin + 1]));
    if (it != merges_.end()) {
      ids[begin] = it->second.merged;
      ids.pop_back();
    }
    return;
  }
  constexpr uint32_t gone = std::numeric_limits<uint32_t>::max();
  struct Node {
    uint32_t id;
    int32_t prev, next;  // -1: none
  };
  struct Candidate {
    uint32_t rank, pos, left, right, merged;
  };
  thread_local std::vector<Node> nodes;
  thread_local std::vector<Candidate> heap;
  nodes.resize(size_t(n));
  heap.clear();
  for (int32_t k = 0; k < n; ++k) nodes[size_t(k)] = {ids[begin + size_t(k)], k - 1, k + 1 < n ? k + 1 : -1};
  const auto later = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  const auto offer = [&](int32_t pos) {  // the pair starting at node pos, if it has a merge
    if (pos < 0 || nodes[size_t(pos)].next < 0) return;
    const uint32_t left = nodes[size_t(pos)].id, right = nodes[size_t(nodes[size_t(pos)].next)].id;
    const auto it = merges_.find(key(left, right));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, uint32_t(pos), left, right, it->second.merged});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t k = 0; k + 1 < n; ++k) offer(k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Node& a = nodes[c.pos];
    if (a.id != c.left || a.next < 0 || nodes[size_t(a.next)].id != c.right) continue;  // stale
    Node& b = nodes[size_t(a.next)];
    a.id = c.merged;
    a.next = b.next;
    if (b.next >= 0) nodes[size_t(b.next)].prev = int32_t(c.pos);
    b.id = gone;
    offer(a.prev);
    offer(int32_t(c.pos));
  }
  ids.resize(begin);
  for (int32_t k = 0; k >= 0; k = nodes[size_t(k)].next) ids.push_back(nodes[size_t(k)].id);
}

}  // namespace linattn::data
