// The independent sequences ("documents") a [B, T] batch is cut into, for document-aware training:
// no state, attention, convolution or position crosses from one sequence into the next.
//
// A Segments holds the start of every sequence in the B * T flattened positions, ascending, followed
// by B * T: fla's cu_seqlens. Every row start b * T is a sequence start (rows never continue each
// other). An empty Segments is the B rows themselves, the default everywhere.
//
// The ops run each sequence as its own kernel call on the same [B, T, ...] buffers, so a sequence gives
// bit for bit what it gives alone. An initial state (h0) or position offset belongs to the first
// sequence of its row, and the final state (ht) is that of the last one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace linattn::ops {

struct Segments {
  std::vector<int64_t> offsets;  // empty = the B rows

  // A sequence starts at each row start and at each position t > 0 of a row whose id is `token`
  // (end-of-text, which the shards write in front of every document). ids: i32 [B, T].
  static Segments starting_at(const Tensor& ids, int32_t token);
};

// One kernel call's share of a [B, T] batch: `rows` consecutive rows from position `start` of the
// flattened B * T, each `len` long (several rows only when they are whole, len == T). `row` is the
// first row; `first`/`last`: the part begins/ends its row(s), so it takes h0 / gives ht.
struct SegmentPart {
  int64_t start, rows, len, row;
  bool first, last;
};

// The calls that cover the batch: consecutive whole rows share one call (the rows alone: one call).
// Throws when the offsets do not describe sequences of a [B, T] batch.
std::vector<SegmentPart> segment_parts(const Segments& segments, int64_t B, int64_t T);

}  // namespace linattn::ops
