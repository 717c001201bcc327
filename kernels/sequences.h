// How a kernel walks the sequences of a batch (kernels/op_types.h's Sequences, fla's cu_seqlens), on
// the host and on the device alike. A kernel that takes them does, for every sequence, exactly what a
// call on that sequence alone does (B = 1, T = its length, the same blocks from its first position),
// so one call over the batch gives the bits of one call per sequence.
//
// Tiles: a kernel that gives each thread block (or CPU task) `tile` consecutive positions of one
// sequence numbers its tiles so that the grid needs only B, T and the count, not the lengths, and a
// tile finds its sequence by a binary search over the offsets (nothing is uploaded per launch):
//   rows (no offsets): sequence b owns the indices [b * ceil(T / tile), (b + 1) * ceil(T / tile));
//   offsets: sequence s owns [s + offsets[s] / tile, s + 1 + offsets[s + 1] / tile) (integer
//   division), floor(o[s+1] / tile) - floor(o[s] / tile) + 1 >= ceil(len / tile) indices: its tiles,
//   and at most one idle index past them.
// Includes no CUDA header.
#pragma once

#include <cstdint>

#include "kernels/cuda/host_device.h"
#include "kernels/op_types.h"

namespace linattn {

// The positions start .. start + len - 1 of the flattened B * T.
struct Span {
  int64_t start, len;
};

LINATTN_HD inline int64_t sequence_count(const Sequences& q, int64_t B) { return q.count ? q.count : B; }

// Sequence s < sequence_count(q, B) of a [B, T] batch.
LINATTN_HD inline Span sequence(const Sequences& q, int64_t s, int64_t T) {
  if (!q.count) return {s * T, T};
  return {q.offsets[s], int64_t(q.offsets[s + 1]) - q.offsets[s]};
}

// The states of a row (a mixer's [B, ...] h0 and ht, and their gradients dh0 and dht), the one rule
// both columns follow: the sequence that starts row b (start % T == 0) starts from the row's initial
// state and gives its gradient; the one that ends it ((start + len) % T == 0) gives the row's final
// state and takes its gradient. Every other sequence starts from zeros and its final state is
// dropped. The row of sequence s < sequence_count(q, B), or -1 where it starts (ends) inside its row
// or is empty; without offsets sequence s is row s (T = 0 included). Divide()(x, T) gives {x / T, x % T}
// (device code that avoids integer division, kernels/cuda/deltanet_block.h, passes its own).
//
// Empty sequences: a table may end in sequences of no positions (offsets equal to B * T), which every
// kernel skips: they start no row, end none and own one idle tile index each. A table padded so to a
// fixed count gives every batch the same grids, so a CUDA graph captured with one batch's table
// replays with another's (autograd/segments.h's Segments::stage).
struct Quotient {
  int64_t quot, rem;
};
struct Divide {
  LINATTN_HD Quotient operator()(int64_t x, int64_t T) const { return {x / T, x % T}; }
};
template <class D = Divide>
LINATTN_HD int64_t initial_state_row(const Sequences& q, int64_t s, int64_t T, D div = {}) {
  if (!q.count) return s;
  if (q.offsets[s] == q.offsets[s + 1]) return -1;
  const Quotient at = div(q.offsets[s], T);
  return at.rem == 0 ? at.quot : -1;
}
template <class D = Divide>
LINATTN_HD int64_t final_state_row(const Sequences& q, int64_t s, int64_t T, D div = {}) {
  if (!q.count) return s;
  if (q.offsets[s] == q.offsets[s + 1]) return -1;
  const Quotient at = div(q.offsets[s + 1], T);
  return at.rem == 0 ? at.quot - 1 : -1;
}

// The sequence that holds flat position p < B * T: the last s with offsets[s] <= p.
LINATTN_HD inline int64_t sequence_of(const Sequences& q, int64_t p, int64_t T) {
  if (!q.count) return p / T;
  int64_t lo = 0, hi = q.count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (q.offsets[mid] <= p) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The number of tile indices of a [B, T] batch (above).
LINATTN_HD inline int64_t tile_count(const Sequences& q, int64_t B, int64_t T, int64_t tile) {
  return q.count ? q.count + B * T / tile : B * ((T + tile - 1) / tile);
}

// The tile index of block `block` of sequence s (the inverse of tile_at).
LINATTN_HD inline int64_t tile_index(const Sequences& q, int64_t s, int64_t T, int64_t tile, int64_t block) {
  return (q.count ? s + q.offsets[s] / tile : s * ((T + tile - 1) / tile)) + block;
}

// Tile `index` < tile_count: its sequence and its block within it (positions seq.start + block * tile
// onwards); idle = the index past the sequence's last tile, which does nothing; number: the
// sequence's s.
struct Tile {
  Span seq;
  int64_t block;
  bool idle;
  int64_t number;
};
LINATTN_HD inline Tile tile_at(const Sequences& q, int64_t T, int64_t tile, int64_t index) {
  if (!q.count) {
    const int64_t per = (T + tile - 1) / tile;
    return {{index / per * T, T}, index % per, false, index / per};
  }
  int64_t lo = 0, hi = q.count - 1;  // the last s whose first index s + offsets[s] / tile is <= index
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (mid + q.offsets[mid] / tile <= index) lo = mid;
    else hi = mid - 1;
  }
  const Span seq = sequence(q, lo, T);
  const int64_t block = index - (lo + q.offsets[lo] / tile);
  return {seq, block, block * tile >= seq.len, lo};
}

}  // namespace linattn
