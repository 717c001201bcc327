// The independent sequences ("documents") a [B, T] batch is cut into, for document-aware training:
// no state, attention, convolution or position crosses from one sequence into the next.
//
// A Segments holds the start of every sequence in the B * T flattened positions, ascending, followed
// by B * T: fla's cu_seqlens. Every row start b * T is a sequence start (rows never continue each
// other). An empty Segments is the B rows themselves, the default everywhere.
//
// Attention, the short convolution, RoPE and the linear mixers hand the offsets to their kernels
// (kernels/op_types.h's Sequences): one call per op for the whole batch, each sequence getting bit
// for bit what a call on it alone gives. An initial state (h0) or position offset belongs to the
// first sequence of its row, and the final state (ht) is that of the last one (kernels/sequences.h).
// The segment parts below are the calls one per sequence would make; the tests compare against them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_types.h"

namespace linattn::ops {

struct Segments {
  std::vector<int64_t> offsets;  // empty = the B rows
  Tensor table = {};             // the offsets as i32 [n + 1] on one device (to()); undefined until then

  // A sequence starts at each row start and at each position t > 0 of a row whose id is `token`
  // (end-of-text, which the shards write in front of every document). ids: i32 [B, T]. The table is
  // put on `device`.
  static Segments starting_at(const Tensor& ids, int32_t token, Device device = Device::cpu);

  // Puts the table on `device`, for every op of the micro-batch to read (on CUDA one upload, queued
  // without waiting for the device); a table on another device is copied as it is (stage's padding
  // included). Nothing to do for the rows (no offsets).
  Segments& to(Device device);

  // Writes the table into `buffer` (i32 [capacity + 1] on any device; on CUDA one queued upload)
  // padded to `capacity` sequences with empty ones at B * T (kernels/sequences.h), and makes it the
  // table: the kernels then take `capacity` sequences whatever the batch, so a CUDA graph captured
  // with one batch's table replays with another's staged into the same buffer. False, staging
  // nothing, when the batch has more sequences than that. Needs offsets (not the rows).
  bool stage(const Tensor& buffer);

  // The offsets as the kernels take them on `device`: the table when it is there (its count, the
  // padding included); else (hand-made Segments, tests) a table made for the caller as to() makes
  // it, held in `holder` while the kernels run.
  Sequences sequences(Device device, Tensor& holder) const;
};

// One kernel call's share of a [B, T] batch: `rows` consecutive rows from position `start` of the
// flattened B * T, each `len` long (several rows only when they are whole, len == T). `row` is the
// first row; `first`/`last`: the part begins/ends its row(s), so it takes h0 / gives ht.
struct SegmentPart {
  int64_t start, rows, len, row;
  bool first, last;
};

// Throws when the offsets do not describe sequences of a [B, T] batch (as segment_parts).
void check_segments(const Segments& segments, int64_t B, int64_t T);

// The calls that cover the batch: consecutive whole rows share one call (the rows alone: one call).
// Throws when the offsets do not describe sequences of a [B, T] batch.
std::vector<SegmentPart> segment_parts(const Segments& segments, int64_t B, int64_t T);

}  // namespace linattn::ops
