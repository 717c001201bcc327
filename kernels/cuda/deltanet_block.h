// The per-(sequence, head) work of the CUDA DeltaNet and Gated DeltaNet kernels (deltanet.cu), written
// once for a `Block` of cooperating threads so that the same code runs on the device (one CUDA block
// per head, DeviceBlock) and on the host (tests/cuda/deltanet_test.cpp runs it with a sequential
// block against the CPU kernels, so the math is checked on machines without a GPU).
//
// The math is the CPU kernels' (kernels/cpu/deltanet.h), cut into the same named stages as
// kernels/cpu/deltanet_stages.h (where the derivations are), with the same arguments (DeltaNetArgs)
// and the same `saved` layout, so autograd allocates one buffer for both devices: per (batch, head)
// and chunk, S0 [Dk, Dv], A^-1 [C, C], PG [C, C], U' [C, Dv], R [C, Dv]. The sequences are the rows,
// or the batch's documents (DeltaNetArgs::seqs, kernels/sequences.h); "head bh" below is the
// (sequence, head) pair s * H + h, and with documents the blocks of `saved` follow their tile indices
// (chunk_slot).
// The forward is three launches (deltanet.cu), so that only the light state pass walks the chunks in
// order: chunk_factors (A^-1 and PG, which need no state; one block per chunk), chunk_states (the
// state pass, S0 of every chunk, R and U'; one block per head and tile of state columns, since the
// columns of the delta rule's state evolve independently) and chunk_outputs (O; one block per chunk).
// The backward is three launches too: chunk_backward_inputs (what needs no dS; one block per chunk),
// chunk_backward_states (the sequential pass of dS from the last chunk to the first; one block per
// head and tile of state columns) and chunk_backward_grads (every gradient; one block per chunk).
// Within a stage every phase is a loop over the elements of one output (Block::each), separated by
// Block::sync, and every element is written by one iteration only, so the phases have no races
// whatever order the iterations run in. A stage ends with a sync, except the ones marked "open":
// their last phase runs beside the next stage's first (which neither reads what it writes nor
// writes what it reads), so that a phase of few threads (the columns of A^-1, a sum per token)
// shares the block with a wide one. The stages' loops copy what they use ([=]), so work a block
// defers past a stage's return stays valid. The backward's stages keep the CPU's names; where a CPU
// stage's work spans two launches (its part that needs dS and its part that does not), each part is
// its own function, named after it (state_backward_inputs, wy_backward_x, ...).
//
// Memory: the gates, the C x C products and the tiles a phase walks across its threads live in `sh`
// (shared memory on the device; the *_shared functions give each launch's size, and each block
// program says why its rows are as far apart as they are: an odd pitch where a warp walks a column);
// the states and the [C, D] products in `saved` and in the backward's `work` (backward_work
// elements per head) in global memory, where a warp reads consecutive words or one word.
// Accumulation is in T (float on the device): float32 states and inter-chunk recurrence.
#pragma once

#include <cstdint>

#include "kernels/deltanet.h"
#include "kernels/cuda/chunk_layout.h"
#include "kernels/cuda/host_device.h"
#include "kernels/sequences.h"

namespace linattn::cuda::delta {

template <class T>
using Args = DeltaNetArgs<T>;

template <class T>
LINATTN_HD inline T absval(T x) { return x < T(0) ? -x : x; }
LINATTN_HD inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// An index split by a row length: row and column. On the device without an integer division: ptxas
// makes a division by a variable a called subroutine, and its register convention made it spill in
// these kernels. split_by_reciprocal is exact for quotients below 2^22 (the indices split here: a
// phase's elements, batch * heads, a chunk count stay far below), tests/cuda/deltanet_test.cpp checks it.
struct RowCol {
  int64_t row, col;
};
LINATTN_HD inline RowCol split_by_reciprocal(int64_t e, int64_t w) {
  // float(e) / w within a relative 2^-22 of e / w, so the truncation is off by at most one; fixed up.
  int64_t r = int64_t(float(e) * (1.0f / float(w)));
  int64_t c = e - r * w;
  if (c < 0) --r, c += w;
  if (c >= w) ++r, c -= w;
  return {r, c};
}
LINATTN_HD inline RowCol split(int64_t e, int64_t w) {
#ifdef __CUDA_ARCH__
  return split_by_reciprocal(e, w);
#else
  return {e / w, e % w};
#endif
}

// Sizes of one call; tensors as in kernels/cpu/deltanet.h (contiguous [B, T, H, D] and [B, T, H]);
// seqs: the documents ({} = the rows).
struct Dims {
  int64_t B, T, H, Dk, Dv, C;
  Sequences seqs = {};
  LINATTN_HD int64_t chunks() const { return split(T + C - 1, C).row; }  // of a row
  LINATTN_HD int64_t sequences() const { return sequence_count(seqs, B); }
  int64_t tiles() const { return tile_count(seqs, B, T, C); }  // the per-chunk launches' grid x
  LINATTN_HD int64_t block() const { return Dk * Dv + 2 * C * C + 2 * C * Dv; }  // one chunk's `saved`
  LINATTN_HD int64_t state() const { return Dk * Dv; }
};
template <class T>
LINATTN_HD Dims dims(const Args<T>& p) {
  return {p.B, p.len, p.H, p.Dk, p.Dv, p.chunk_size, p.seqs};
}

// The row pitch (in elements) of the float32 kernels' shared tiles of `width` columns: one more than
// the width, so that for an even width the rows are an odd count of words apart and a warp walking
// one column (32 consecutive rows) touches 32 different banks; a warp walking a row touches
// consecutive words. tests/cuda/deltanet_layout_test.cpp checks every access of the kernels.
LINATTN_HD constexpr int64_t padded_pitch(int64_t width) { return width + 1; }

// chunk_factors: the gates, M [C, C] and the chunk's K [C, Dk + 1] (padded rows: see chunk_factors).
LINATTN_HD inline int64_t factors_shared(const Dims& d) { return 4 * d.C + d.C * d.C + d.C * padded_pitch(d.Dk); }
// chunk_factors on the tensor cores (deltanet.cu), in bytes for operands of `bytes` (2: bf16, 4: tf32):
// the gates and M as above (floats), then K and Q as [kChunk, tc_depth] operand tiles and the two
// products' float staging tiles [kChunk, kChunk], in chunk_layout.h's tc layout, each 128-byte aligned.
LINATTN_HD inline int tc_depth(const Dims& d) { return int((d.Dk + 15) / 16 * 16); }  // Dk, zero-padded
LINATTN_HD inline int factors_tc_gates_bytes(const Dims& d) { return chunk::align128(int(4 * d.C + d.C * d.C) * 4); }
LINATTN_HD inline int factors_tc_operand_bytes(const Dims& d, int bytes) {
  return chunk::tc_bytes(chunk::kChunk, tc_depth(d), bytes);
}
LINATTN_HD inline int factors_tc_staging_bytes() { return chunk::tc_bytes(chunk::kChunk, chunk::kChunk, 4); }
LINATTN_HD inline int64_t factors_tc_shared_bytes(const Dims& d, int bytes) {
  return factors_tc_gates_bytes(d) + 2 * factors_tc_operand_bytes(d, bytes) + 2 * factors_tc_staging_bytes();
}
// chunk_outputs on the tensor cores: the gates (floats), then diag(gamma) Q [kChunk, tc_depth], P
// [kChunk, kChunk], a 64-column tile of S0 [tc_depth, kChunk] and of U' [kChunk, kChunk] as operands,
// and the float staging tile [kChunk, kChunk].
LINATTN_HD inline int outputs_tc_gates_bytes(const Dims& d) { return chunk::align128(int(4 * d.C) * 4); }
LINATTN_HD inline int64_t outputs_tc_shared_bytes(const Dims& d, int bytes) {
  using chunk::kChunk, chunk::tc_bytes;
  return outputs_tc_gates_bytes(d) + tc_bytes(kChunk, tc_depth(d), bytes) + 2 * tc_bytes(kChunk, kChunk, bytes) +
         tc_bytes(tc_depth(d), kChunk, bytes) + factors_tc_staging_bytes();
}
LINATTN_HD inline int64_t gates_shared(const Dims& d) { return 4 * d.C; }  // chunk_states, chunk_outputs
LINATTN_HD inline int64_t recurrent_shared(const Dims& d) { return d.Dv; }

// Head bh = s * H + h: the [B * T, H] row of sequence s's first token at head h, its length, its
// chunks, and the slot of its chunk 0 in `saved` and the backward's `work` (chunk c's is first + c).
// A sequence with tile indices i0 .. i1 - 1 (kernels/sequences.h) owns the slots i0 H .. i1 H - 1,
// head h's from i0 H + h (i1 - i0): the rows' [B * H, chunks] without documents.
struct HeadSpan {
  int64_t row, len, chunks, first;
};
LINATTN_HD inline HeadSpan head_span(const Dims& d, int64_t bh) {
  const RowCol sh = split(bh, d.H);  // sequence, head
  if (!d.seqs.count) return {sh.row * d.T * d.H + sh.col, d.T, d.chunks(), bh * d.chunks()};
  const int64_t s = sh.row, start = d.seqs.offsets[s], end = d.seqs.offsets[s + 1];
  const int64_t i0 = s + split(start, d.C).row, i1 = s + 1 + split(end, d.C).row;
  const int64_t len = end - start;
  return {start * d.H + sh.col, len, split(len + d.C - 1, d.C).row, i0 * d.H + sh.col * (i1 - i0)};
}

// Chunk c of a head's sequence: where its tokens start in q/k (qk), v/o (vo) and beta/a (s), ld*
// token strides; slot: its block in `saved` and `work`.
struct ChunkAt {
  int64_t t0, n, qk, vo, s, slot;
};
LINATTN_HD inline ChunkAt chunk_of(const Dims& d, const HeadSpan& hs, int64_t c) {
  const int64_t t0 = c * d.C, row = hs.row + t0 * d.H;
  return {t0, min64(d.C, hs.len - t0), row * d.Dk, row * d.Dv, row, hs.first + c};
}
LINATTN_HD inline ChunkAt chunk_at(const Dims& d, int64_t bh, int64_t c) { return chunk_of(d, head_span(d, bh), c); }

// The head and chunk of tile index `tile` (kernels/sequences.h) of head h, as the per-chunk launches'
// blocks (tile, h) find them; idle: the index past a document's last chunk, which does nothing.
struct TileChunk {
  int64_t bh, c;
  bool idle;
};
LINATTN_HD inline TileChunk tile_chunk(const Dims& d, int64_t tile, int64_t h) {
  if (!d.seqs.count) {
    const RowCol bc = split(tile, d.chunks());  // row, chunk
    return {bc.row * d.H + h, bc.col, false};
  }
  const Tile t = tile_at(d.seqs, d.T, d.C, tile);
  return {t.number * d.H + h, t.block, t.idle};
}

// The rows whose initial state head bh starts from and whose final state it gives (kernels/sequences.h's
// rule), as offsets of their [Dk, Dv] states in h0, ht, dh0, dht; -1: none (zeros in, nothing out).
struct SplitQuotient {  // the rule's divisions by split (no integer division on the device)
  LINATTN_HD Quotient operator()(int64_t x, int64_t w) const {
    const RowCol rc = split(x, w);
    return {rc.row, rc.col};
  }
};
LINATTN_HD inline int64_t initial_state_at(const Dims& d, int64_t bh) {
  const RowCol sh = split(bh, d.H);
  const int64_t row = initial_state_row(d.seqs, sh.row, d.T, SplitQuotient{});
  return row < 0 ? -1 : (row * d.H + sh.col) * d.state();
}
LINATTN_HD inline int64_t final_state_at(const Dims& d, int64_t bh) {
  const RowCol sh = split(bh, d.H);
  const int64_t row = final_state_row(d.seqs, sh.row, d.T, SplitQuotient{});
  return row < 0 ? -1 : (row * d.H + sh.col) * d.state();
}

// A chunk's size and strides, as the stages see it (the CPU's ChunkShape).
struct Shape {
  int64_t n, C, Dk, Dv, ldk, ldv, H;
};
LINATTN_HD inline Shape shape(const Dims& d, const ChunkAt& at) {
  return {at.n, d.C, d.Dk, d.Dv, d.H * d.Dk, d.H * d.Dv, d.H};
}

// The state columns [j0, j0 + nv) one chunk_states block carries: column j of S1 depends only on
// column j of S0 (and R, U' likewise), so the tiles need nothing from each other.
inline constexpr int64_t kStateColumns = 8;
struct Columns {
  int64_t j0, nv;
};
LINATTN_HD inline int64_t state_tiles(const Dims& d) { return (d.Dv + kStateColumns - 1) / kStateColumns; }
LINATTN_HD inline Columns state_columns(const Dims& d, int64_t tile) {
  const int64_t j0 = tile * kStateColumns;
  return {j0, min64(kStateColumns, d.Dv - j0)};
}

// The decays of the current chunk, in sh: G, gamma, lambda [C] (0, 1, 1 without gates), and beta
// contiguous (bt). D_ij is computed where used (decay_ratio).
template <class T>
struct Gates {
  T *G, *gamma, *lambda, *bt;
};

// D_ij = exp(-|G_i - G_j|): exp(G_i - G_j) for j <= i (G never increases); symmetric; 1 without gates.
template <class T>
LINATTN_HD T decay_ratio(const T* G, int64_t i, int64_t j) {
  return exp_(-absval(G[i] - G[j]));
}

template <class T>
LINATTN_HD T dot(const T* x, const T* y, int64_t n) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * y[i];
  return acc;
}

template <class T>
LINATTN_HD T row_sum(const T* x, int64_t n) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i];
  return acc;
}

// ---- forward stages (kernels/cpu/deltanet_stages.h has each one's math) ------------------------

// G (within-chunk inclusive cumulative log-decay), gamma = exp(G), lambda = exp(G_last - G), and
// beta contiguous. Without a they are 0, 1, 1. First a and beta are read into sh by one thread per
// token (so the chunk's loads are in flight together), then one thread sums. Open.
template <class T, class Block>
LINATTN_HD void chunk_decays(const Block& blk, const Gates<T>& g, const T* beta, const T* a, int64_t H, int64_t n) {
  blk.each(n, [=](int64_t i) {
    g.G[i] = a ? a[i * H] : T(0);
    g.bt[i] = beta[i * H];
  });
  blk.sync();
  blk.one([=] {
    T acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      acc += g.G[i];
      g.G[i] = acc;
      g.gamma[i] = exp_(acc);
    }
    for (int64_t i = 0; i < n; ++i) g.lambda[i] = exp_(g.G[n - 1] - g.G[i]);
  });
}

// gd = K K^T . D, all of it into M [C, C], and (saved for the backward) above the diagonal of PG.
template <class T, class Block>
LINATTN_HD void gram_kkt(const Block& blk, T* M, T* pg, const T* k, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n;
  blk.each(n * n, [=](int64_t e) {
    const RowCol rc = split(e, n);
    const int64_t i = rc.row, j = rc.col;
    const T x = dot(k + i * s.ldk, k + j * s.ldk, s.Dk) * decay_ratio(g.G, i, j);
    M[i * s.C + j] = x;
    if (j > i) pg[i * s.C + j] = x;
  });
  blk.sync();
}

// A^-1, A = I + tril(diag(beta) gd, -1), by forward substitution into ainv [C, C] (sh) and the
// saved ainv_s: column m of A^-1 solves A x = e_m, so every column is independent (one iteration each):
//   x_i = 0 (i < m), x_m = 1, x_i = -beta_i sum_{m <= j < i} gd_ij x_j (i > m)
// Open: the n columns run beside wy_updates' first phase.
template <class T, class Block>
LINATTN_HD void solve_unit_lower(const Block& blk, T* ainv, T* ainv_s, const T* M, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, C = s.C;
  blk.each(n, [=](int64_t m) {
    for (int64_t i = 0; i < m; ++i) ainv[i * C + m] = ainv_s[i * C + m] = 0;
    ainv[m * C + m] = ainv_s[m * C + m] = 1;
    for (int64_t i = m + 1; i < n; ++i) {
      T acc = 0;
      for (int64_t j = m; j < i; ++j) acc += M[i * C + j] * ainv[j * C + m];
      ainv[i * C + m] = ainv_s[i * C + m] = -g.bt[i] * acc;
    }
  });
}

// R = V - diag(gamma) K S0 and U' = A^-1 diag(beta) R (both saved), in the columns cs.
template <class T, class Block>
LINATTN_HD void wy_updates(const Block& blk, T* U, T* R, const T* ainv, const T* k, const T* v, const T* S0,
                           const Gates<T>& g, const Shape& s, Columns cs) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * cs.nv, [=](int64_t e) {
    const RowCol rc = split(e, cs.nv);
    const int64_t i = rc.row, j = cs.j0 + rc.col;
    T acc = 0;
    for (int64_t x = 0; x < s.Dk; ++x) acc += k[i * s.ldk + x] * S0[x * Dv + j];
    R[i * Dv + j] = v[i * s.ldv + j] - g.gamma[i] * acc;
  });
  blk.sync();
  blk.each(n * cs.nv, [=](int64_t e) {
    const RowCol rc = split(e, cs.nv);
    const int64_t i = rc.row, j = cs.j0 + rc.col;
    T acc = 0;
    for (int64_t m = 0; m <= i; ++m) acc += ainv[i * s.C + m] * g.bt[m] * R[m * Dv + j];
    U[i * Dv + j] = acc;
  });
  blk.sync();
}

// P = tril(Q K^T) . D, into M and on and below the diagonal of PG. k's rows are ldk_k apart (q's s.ldk).
template <class T, class Block>
LINATTN_HD void causal_scores_qk(const Block& blk, T* M, T* pg, const T* q, const T* k, int64_t ldk_k,
                                 const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n;
  blk.each(n * n, [=](int64_t e) {
    const RowCol rc = split(e, n);
    const int64_t i = rc.row, j = rc.col;
    if (j > i) return;
    const T x = dot(q + i * s.ldk, k + j * ldk_k, s.Dk) * decay_ratio(g.G, i, j);
    M[i * s.C + j] = x;
    pg[i * s.C + j] = x;
  });
  blk.sync();
}

// O = scale (diag(gamma) Q S0 + P U'), P on and below the diagonal of M (PG).
template <class T, class Block>
LINATTN_HD void chunk_output(const Block& blk, T* o, const T* q, const T* S0, const T* M, const T* U, T scale,
                             const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    const int64_t i = rc.row, j = rc.col;
    T acc = 0;
    for (int64_t x = 0; x < s.Dk; ++x) acc += q[i * s.ldk + x] * S0[x * Dv + j];
    acc *= g.gamma[i];
    for (int64_t m = 0; m <= i; ++m) acc += M[i * s.C + m] * U[m * Dv + j];
    o[i * s.ldv + j] = scale * acc;
  });
}

// S1 = gamma_last S0 + K^T diag(lambda) U' (the next chunk's S0, or ht; null: not wanted), in the
// columns cs.
template <class T, class Block>
LINATTN_HD void state_pass(const Block& blk, T* S1, const T* S0, const T* k, const T* U, const Gates<T>& g,
                           const Shape& s, Columns cs) {
  const int64_t n = s.n, Dv = s.Dv;
  if (S1)
    blk.each(s.Dk * cs.nv, [=](int64_t e) {
      const RowCol rc = split(e, cs.nv);
      const int64_t x = rc.row, j = cs.j0 + rc.col, at = x * Dv + j;
      T acc = g.gamma[n - 1] * S0[at];
      for (int64_t i = 0; i < n; ++i) acc += k[i * s.ldk + x] * g.lambda[i] * U[i * Dv + j];
      S1[at] = acc;
    });
  blk.sync();
}

// ---- the chunkwise forward: chunk_factors, then chunk_states, then chunk_outputs ----------------

// Chunk c of head bh, what needs no state: A^-1 and PG into `saved`. sh: factors_shared.
// K is copied into sh with rows Dk + 1 apart: the products' threads take consecutive rows j of K at
// the same column x, words j (Dk + 1) + x, which fall in 32 different banks when 32 divides Dk
// (and in global memory they would be 32 cache lines). The solve keeps A^-1 in `saved` only: each
// of its threads reads back only its own column.
template <class T, class Block>
LINATTN_HD void chunk_factors(const Block& blk, const Args<T>& p, int64_t bh, int64_t c, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C, Dk = d.Dk, ldk = padded_pitch(Dk);
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* M = sh + 4 * C;  // K K^T . D, then P = tril(Q K^T) . D
  T* k = M + C * C;   // [C, Dk + 1]
  const ChunkAt at = chunk_at(d, bh, c);
  const Shape s = shape(d, at);
  Shape sk = s;
  sk.ldk = ldk;
  T* ainv_s = p.saved + at.slot * d.block() + d.state();
  T* pg = ainv_s + C * C;
  const T *q = p.q + at.qk, *kg = p.k + at.qk;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
  blk.each(at.n * Dk, [=](int64_t e) {
    const RowCol rc = split(e, Dk);
    k[rc.row * ldk + rc.col] = kg[rc.row * s.ldk + rc.col];
  });
  blk.sync();  // gram_kkt reads the decays and k
  gram_kkt(blk, M, pg, k, g, sk);
  solve_unit_lower(blk, ainv_s, ainv_s, M, g, s);
  blk.sync();  // causal_scores_qk overwrites M, which the solve reads
  causal_scores_qk(blk, M, pg, q, k, ldk, g, s);
}

// The state pass of head bh in the columns cs, chunk after chunk: S0 of every chunk (h0 for the
// first), R and U' into `saved`, and ht. Reads chunk_factors' A^-1. sh: gates_shared.
template <class T, class Block>
LINATTN_HD void chunk_states(const Block& blk, const Args<T>& p, int64_t bh, Columns cs, T* sh) {
  const Dims d = dims(p);
  const HeadSpan hs = head_span(d, bh);
  const int64_t C = d.C, NC = hs.chunks, Dv = d.Dv, S = d.state();
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* base = p.saved + hs.first * d.block();
  const int64_t in = initial_state_at(d, bh), out = final_state_at(d, bh);
  const T* h0 = p.h0 && in >= 0 ? p.h0 + in : nullptr;
  T* ht = p.ht && out >= 0 ? p.ht + out : nullptr;
  T* first = NC > 0 ? base : ht;  // T == 0: the final state is the initial one
  if (first)
    blk.each(d.Dk * cs.nv, [=](int64_t e) {
      const RowCol rc = split(e, cs.nv);
      const int64_t at = rc.row * Dv + cs.j0 + rc.col;
      first[at] = h0 ? h0[at] : T(0);
    });
  blk.sync();
  for (int64_t c = 0; c < NC; ++c) {
    const ChunkAt at = chunk_of(d, hs, c);
    const Shape s = shape(d, at);
    T* S0 = base + c * d.block();
    T *ainv_s = S0 + S, *U = ainv_s + 2 * C * C, *R = U + C * Dv;
    T* S1 = c + 1 < NC ? base + (c + 1) * d.block() : ht;
    const T *k = p.k + at.qk, *v = p.v + at.vo;
    chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
    blk.sync();  // wy_updates reads the decays
    wy_updates(blk, U, R, ainv_s, k, v, S0, g, s, cs);
    state_pass(blk, S1, S0, k, U, g, s, cs);
  }
}

// Chunk c of head bh: O from chunk_states' S0 and U' and chunk_factors' P. sh: gates_shared.
template <class T, class Block>
LINATTN_HD void chunk_outputs(const Block& blk, const Args<T>& p, int64_t bh, int64_t c, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C;
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  const ChunkAt at = chunk_at(d, bh, c);
  const T* S0 = p.saved + at.slot * d.block();
  const T *pg = S0 + d.state() + C * C, *U = pg + C * C;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
  blk.sync();  // chunk_output reads the decays
  chunk_output(blk, p.o + at.vo, p.q + at.qk, S0, pg, U, p.scale, g, shape(d, at));
  blk.sync();
}

// ---- the chunkwise backward: chunk_backward_inputs, then chunk_backward_states, then chunk_backward_grads --
//
// Per chunk (kernels/cpu/deltanet_stages.h has the derivations), with dS1 the gradient wrt the
// chunk's end state and X = A^-T dU':
//   dU' = du0 + diag(lambda) K dS1,  du0 = scale P^T dO           (intra_output_backward_du, state_pass_backward)
//   X = A^-T dU',  dr = diag(gamma beta) X                        (wy_backward)
//   dS0 = gamma_last dS1 + hq - K^T dr,  hq = scale Q^T diag(gamma) dO   (state_backward)
// Only dS0 needs the previous step's dS1, so the work is cut in three launches: what needs no dS
// (du0 and hq, per chunk in parallel), the sequential pass (dU', X and dS from the last chunk to the
// first, per tile of state columns), and every gradient (per chunk in parallel, from dS1 and X).
//
// The pass may split dS by columns: every product above acts on dS from the left (K dS1 is
// [C, Dk] x [Dk, Dv], A^-T and the diagonal scalings act on rows, K^T dr is [Dk, C] x [C, Dv]), so
// column j of dU', X and dS0 is a function of column j of dS1, du0 and hq alone. The tiles need
// nothing from each other, as in the forward's chunk_states. (The gate gradient is not carried: the
// decays enter the next chunk only through gamma_last S0, whose gradient <dS1, S0> is per chunk.)

// The backward's scratch, per (batch, head) and chunk (backward_work elements per head of a row;
// backward_scratch in all, documents included: a block per chunk slot): dS [Dk, Dv], hq from
// chunk_backward_inputs, replaced by dS1 in chunk_backward_states; X [C, Dv], du0 from
// chunk_backward_inputs, replaced by X.
LINATTN_HD inline int64_t backward_block(const Dims& d) { return d.Dk * d.Dv + d.C * d.Dv; }
LINATTN_HD inline int64_t backward_work(const Dims& d) { return d.chunks() * backward_block(d); }
inline int64_t backward_scratch(const Dims& d) { return d.tiles() * d.H * backward_block(d); }

struct WorkChunk {
  int64_t dS, X;  // offsets in `work`
};
LINATTN_HD inline WorkChunk work_of(const Dims& d, const ChunkAt& c) {
  const int64_t at = c.slot * backward_block(d);
  return {at, at + d.state()};
}
LINATTN_HD inline WorkChunk work_chunk(const Dims& d, int64_t bh, int64_t c) { return work_of(d, chunk_at(d, bh, c)); }

// Shared memory of the three launches (elements of T); each kernel says what it holds.
LINATTN_HD inline int64_t backward_inputs_shared(const Dims& d) { return 4 * d.C + d.C * d.Dv; }
LINATTN_HD inline int64_t backward_states_shared(const Dims& d) {
  return 4 * d.C + d.C * padded_pitch(d.Dk) + d.C * padded_pitch(d.C) + 2 * d.Dk * kStateColumns +
         2 * d.C * kStateColumns;
}
inline constexpr int64_t kLanes = 32;  // the threads of a warp
// chunk_backward_grads' two uses of its shared memory after the gates (it says what they hold).
LINATTN_HD inline int64_t backward_grads_part1(const Dims& d) {
  const int64_t W = d.Dk > d.Dv ? d.Dk : d.Dv;
  return d.Dk * padded_pitch(d.Dv) + d.C * padded_pitch(W) + d.Dk * padded_pitch(kLanes);
}
LINATTN_HD inline int64_t backward_grads_part2(const Dims& d) {
  return d.C * padded_pitch(d.Dv) + 2 * d.C * padded_pitch(d.C);
}
LINATTN_HD inline int64_t backward_grads_shared(const Dims& d) {
  const int64_t a = backward_grads_part1(d), b = backward_grads_part2(d);
  return 8 * d.C + d.Dk + (a > b ? a : b);
}

// The backward's per-chunk launches on the tensor cores (deltanet.cu, bf16 or tf32), for Dk, Dv <= 64
// (larger heads take the float32 kernels): every operand is a [kChunk, kChunk] tile of chunk_layout.h's
// tc layout in the fragment's type (`bytes` 2: bf16, 4: tf32), rows and columns past the chunk's
// tokens and the head's dimensions zero, and every product a float staging tile of the same size.
// chunk_backward_inputs_tc: the gates (floats), then P, dO and diag(gamma) Q as operands, and the two
// staging tiles (scale P^T dO, scale Q^T diag(gamma) dO). chunk_backward_grads_tc: the gates, their
// gradients and `part` (floats), five operand tiles (U', X, dO, dS1, S0; later M, F^T, K, Q) and
// three staging tiles (the first also holds wy_backward's E, rows padded_pitch(max(Dk, Dv)) apart),
// of which only backward_grads_tc_own_staging have their own place: the others go over the operand
// tiles of dS1 and S0, which the first product loop is the last to read (two staging tiles fit
// there in tf32, one in bf16), so that tf32 fits two blocks in an SM.
LINATTN_HD inline bool backward_tc_fits(const Dims& d) { return d.Dk <= chunk::kChunk && d.Dv <= chunk::kChunk; }
// The precision the backward's per-chunk products run in when `asked` is: float32 where they do not fit.
LINATTN_HD inline MatmulPrecision backward_precision(const Dims& d, MatmulPrecision asked) {
  return backward_tc_fits(d) ? asked : MatmulPrecision::f32;
}
LINATTN_HD constexpr int backward_tc_operand_bytes(int bytes) {
  return chunk::tc_bytes(chunk::kChunk, chunk::kChunk, bytes);
}
LINATTN_HD constexpr int backward_tc_staging_bytes() { return chunk::tc_bytes(chunk::kChunk, chunk::kChunk, 4); }
LINATTN_HD inline int backward_inputs_tc_floats_bytes(const Dims& d) { return chunk::align128(int(4 * d.C) * 4); }
LINATTN_HD inline int64_t backward_inputs_tc_shared_bytes(const Dims& d, int bytes) {
  return backward_inputs_tc_floats_bytes(d) + 3 * backward_tc_operand_bytes(bytes) + 2 * backward_tc_staging_bytes();
}
LINATTN_HD inline int backward_grads_tc_floats_bytes(const Dims& d) { return chunk::align128(int(8 * d.C + d.Dk) * 4); }
LINATTN_HD constexpr int backward_grads_tc_own_staging(int bytes) {
  return 3 - 2 * backward_tc_operand_bytes(bytes) / backward_tc_staging_bytes();
}
LINATTN_HD inline int64_t backward_grads_tc_shared_bytes(const Dims& d, int bytes) {
  return backward_grads_tc_floats_bytes(d) + 5 * backward_tc_operand_bytes(bytes) +
         backward_grads_tc_own_staging(bytes) * backward_tc_staging_bytes();
}
// The column that a thread summing row `row` of a staging tile reads at step `step` (< kChunk) of its
// loop: the row's columns rotated by the row, so that the 32 threads of a warp, on consecutive rows
// tc_pitch(kChunk, 4) = 68 words apart (≡ 4 mod 32), read banks 4 row + row + step = 5 row + step
// mod 32: 32 different banks (5 is odd), where walking the columns in order would give 4-way conflicts (8 banks).
LINATTN_HD constexpr int skewed_col(int row, int step) { return (step + row) % chunk::kChunk; }

// ---- chunk_backward_inputs: chunk c of head bh, what needs no dS --------------------------------

// O += scale P U'  =>  du0 = scale P^T dO (P on and below the diagonal of PG); into X. dOs: the
// chunk's dO in sh, rows Dv apart (the threads of a warp take consecutive columns j: consecutive banks).
template <class T, class Block>
LINATTN_HD void intra_output_backward_du(const Block& blk, T* du, const T* pg, const T* dOs, T scale, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    const int64_t i = rc.row, j = rc.col;
    T acc = 0;
    for (int64_t m = i; m < n; ++m) acc += pg[m * s.C + i] * dOs[m * Dv + j];
    du[e] = scale * acc;
  });
}

// O = scale diag(gamma) Q S0 + ...  =>  dS0 += hq = scale Q^T diag(gamma) dO (state_backward's
// term that needs no dS1); into dS.
template <class T, class Block>
LINATTN_HD void state_backward_inputs(const Block& blk, T* hq, const T* q, const T* dOs, T scale, const Gates<T>& g,
                                      const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(s.Dk * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    const int64_t t = rc.row, j = rc.col;
    T acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += q[i * s.ldk + t] * g.gamma[i] * dOs[i * Dv + j];
    hq[e] = scale * acc;
  });
}

// sh: backward_inputs_shared (the gates, then the chunk's dO [C, Dv]).
template <class T, class Block>
LINATTN_HD void chunk_backward_inputs(const Block& blk, const Args<T>& p, T* work, int64_t bh, int64_t c, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C, Dv = d.Dv;
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* dOs = sh + 4 * C;
  const ChunkAt at = chunk_at(d, bh, c);
  const Shape s = shape(d, at);
  const WorkChunk w = work_chunk(d, bh, c);
  const T* pg = p.saved + at.slot * d.block() + d.state() + C * C;
  const T* dO = p.dO + at.vo;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
  blk.each(at.n * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    dOs[e] = dO[rc.row * s.ldv + rc.col];
  });
  blk.sync();
  intra_output_backward_du(blk, work + w.X, pg, dOs, p.scale, s);
  state_backward_inputs(blk, work + w.dS, p.q + at.qk, dOs, p.scale, g, s);
  blk.sync();
}

// ---- chunk_backward_states: the sequential pass of head bh in the columns cs --------------------
// sh: backward_states_shared: the gates; the chunk's K [C, Dk + 1] and A^-1 [C, C + 1] (rows an odd
// count apart: the threads of a warp take up to 32 / nv consecutive rows i at one column, or
// consecutive columns of one row, both in distinct banks); dS and the next dS [Dk, nv]; dU' and dr
// [C, nv] (a warp reads nv consecutive words of them, shared by its rows: distinct banks or
// broadcasts). K and A^-1 are read once per chunk into sh, as the phases read them many times.

// S1 = gamma_last S0 + K^T diag(lambda) U'  =>  dU' = du0 + diag(lambda) K dS1, in the columns cs.
template <class T, class Block>
LINATTN_HD void state_pass_backward_du(const Block& blk, T* du, const T* du0, const T* Ks, const T* dS,
                                       const Gates<T>& g, const Shape& s, Columns cs) {
  const int64_t nv = cs.nv, ldk = padded_pitch(s.Dk);
  blk.each(s.n * nv, [=](int64_t e) {
    const RowCol rc = split(e, nv);
    const int64_t i = rc.row, j = rc.col;
    T acc = 0;
    for (int64_t t = 0; t < s.Dk; ++t) acc += Ks[i * ldk + t] * dS[t * nv + j];
    du[e] = du0[i * s.Dv + cs.j0 + j] + g.lambda[i] * acc;
  });
  blk.sync();
}

// U' = A^-1 diag(beta) R  =>  X = A^-T dU' (into x, the work's X), and dr = diag(gamma beta) X (sh).
// As: A^-1 in sh, rows C + 1 apart.
template <class T, class Block>
LINATTN_HD void wy_backward_x(const Block& blk, T* x, T* dr, const T* du, const T* As, const Gates<T>& g,
                              const Shape& s, Columns cs) {
  const int64_t n = s.n, nv = cs.nv, pc = padded_pitch(s.C);
  blk.each(n * nv, [=](int64_t e) {
    const RowCol rc = split(e, nv);
    const int64_t i = rc.row, j = rc.col;
    T acc = 0;
    for (int64_t m = i; m < n; ++m) acc += As[m * pc + i] * du[m * nv + j];
    x[i * s.Dv + cs.j0 + j] = acc;
    dr[e] = g.gamma[i] * g.bt[i] * acc;
  });
  blk.sync();
}

// dS0 = gamma_last dS1 + hq - K^T dr into dS_next; dS1 over hq in the work's dS (for the gradients).
template <class T, class Block>
LINATTN_HD void state_backward(const Block& blk, T* dS_next, T* hq, const T* dS, const T* Ks, const T* dr,
                               const Gates<T>& g, const Shape& s, Columns cs) {
  const int64_t n = s.n, nv = cs.nv, ldk = padded_pitch(s.Dk);
  blk.each(s.Dk * nv, [=](int64_t e) {
    const RowCol rc = split(e, nv);
    const int64_t t = rc.row, j = rc.col, at = t * s.Dv + cs.j0 + j;
    T acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += Ks[i * ldk + t] * dr[i * nv + j];
    dS_next[e] = g.gamma[n - 1] * dS[e] + hq[at] - acc;
    hq[at] = dS[e];
  });
  blk.sync();
}

template <class T, class Block>
LINATTN_HD void chunk_backward_states(const Block& blk, const Args<T>& p, T* work, int64_t bh, Columns cs, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv, S = d.state(), nv = cs.nv, ldk = padded_pitch(Dk);
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* Ks = sh + 4 * C;
  T* As = Ks + C * ldk;
  T* dS = As + C * padded_pitch(C);
  T* dS_next = dS + Dk * kStateColumns;
  T* du = dS_next + Dk * kStateColumns;
  T* dr = du + C * kStateColumns;
  const int64_t out = final_state_at(d, bh);
  const T* dht = p.dht && out >= 0 ? p.dht + out : nullptr;
  blk.each(Dk * nv, [=](int64_t e) {
    const RowCol rc = split(e, nv);
    dS[e] = dht ? dht[rc.row * Dv + cs.j0 + rc.col] : T(0);
  });
  blk.sync();
  const HeadSpan hs = head_span(d, bh);
  for (int64_t c = hs.chunks - 1; c >= 0; --c) {
    const ChunkAt at = chunk_of(d, hs, c);
    const Shape s = shape(d, at);
    const WorkChunk w = work_of(d, at);
    const T* ainv = p.saved + at.slot * d.block() + S;
    const T* k = p.k + at.qk;
    chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
    blk.each(at.n * Dk, [=](int64_t e) {
      const RowCol rc = split(e, Dk);
      Ks[rc.row * ldk + rc.col] = k[rc.row * s.ldk + rc.col];
    });
    const int64_t n = at.n;
    blk.each(n * n, [=](int64_t e) {
      const RowCol rc = split(e, n);
      As[rc.row * padded_pitch(C) + rc.col] = ainv[rc.row * C + rc.col];
    });
    blk.sync();
    state_pass_backward_du(blk, du, work + w.X, Ks, dS, g, s, cs);
    wy_backward_x(blk, work + w.X, dr, du, As, g, s, cs);
    state_backward(blk, dS_next, work + w.dS, dS, Ks, dr, g, s, cs);
    T* spent = dS;
    dS = dS_next;
    dS_next = spent;
  }
  const int64_t in = initial_state_at(d, bh);
  if (p.dh0 && in >= 0)
    blk.each(Dk * nv, [=](int64_t e) {
      const RowCol rc = split(e, nv);
      p.dh0[in + rc.row * Dv + cs.j0 + rc.col] += dS[e];
    });
  blk.sync();
}

// ---- chunk_backward_grads: chunk c of head bh, every gradient from dS1 and X -------------------

// The gradient accumulators of the chunk, in sh ([C] each): gdg = gamma dLoss/dgamma, ldl =
// lambda dLoss/dlambda, dG (dLoss/dG), db (the chunk's dbeta).
template <class T>
struct GateGrads {
  T *gdg, *ldl, *dG, *db;
};

// U' = A^-1 diag(beta) R and R = V - diag(gamma) K S0, given X = A^-T dU':  dR = diag(beta) X,
// dV += dR, dbeta_i += R_i . X_i, gamma_i dgamma_i += dR_i . (R_i - V_i) (its dK term is taken by
// inter_output_backward). The row sums go through E [C, W + 1] (sh; a warp's threads write
// consecutive words of a row, then one thread per row reads its row: rows W + 1 apart, an odd count,
// fall in distinct banks).
template <class T, class Block>
LINATTN_HD void wy_backward(const Block& blk, T* dv, T* E, const GateGrads<T>& gg, const T* x, const T* R,
                            const T* v, int64_t pw, bool gated, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    const int64_t i = rc.row, j = rc.col;
    dv[i * s.ldv + j] += g.bt[i] * x[e];
    E[i * pw + j] = R[e] * x[e];
  });
  blk.sync();
  blk.each(n, [=](int64_t i) { gg.db[i] += row_sum(E + i * pw, Dv); });
  blk.sync();
  if (!gated) return;
  blk.each(n * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    const int64_t i = rc.row, j = rc.col;
    E[i * pw + j] = g.bt[i] * x[e] * (R[e] - v[i * s.ldv + j]);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) { gg.gdg[i] += row_sum(E + i * pw, Dv); });
  blk.sync();
}

// S1 = gamma_last S0 + K^T diag(lambda) U'  =>  dK += diag(lambda) U' dS1^T,
// lambda_i dlambda_i = lambda_i k_i . (U' dS1^T)_i, per row i and key column t (dSs: dS1 in sh, rows
// Dv + 1 apart, so that a warp's consecutive t fall in distinct banks; the row sums through E as in
// wy_backward); and gamma_last's term <dS1, S0> as part_t = dS1_t . S0_t, which decay_backward
// sums: each row's kLanes threads take every kLanes-th column (consecutive words of S0, distinct
// banks of dSs) into P [Dk, kLanes + 1] (rows an odd count apart), which one thread per row sums.
template <class T, class Block>
LINATTN_HD void state_pass_backward(const Block& blk, T* dk, T* E, T* P, T* part, const GateGrads<T>& gg,
                                    const T* dSs, const T* S0, const T* k, const T* U, int64_t pw, bool gated,
                                    const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv, pv = padded_pitch(Dv), pl = padded_pitch(kLanes);
  blk.each(n * Dk, [=](int64_t e) {
    const RowCol rc = split(e, Dk);
    const int64_t i = rc.row, t = rc.col;
    const T w = dot(U + i * Dv, dSs + t * pv, Dv);
    dk[i * s.ldk + t] += g.lambda[i] * w;
    if (gated) E[i * pw + t] = g.lambda[i] * k[i * s.ldk + t] * w;
  });
  if (gated)
    blk.each(Dk * kLanes, [=](int64_t e) {
      const RowCol rc = split(e, kLanes);
      const int64_t t = rc.row, l = rc.col;
      T acc = 0;
      for (int64_t j = l; j < Dv; j += kLanes) acc += dSs[t * pv + j] * S0[t * Dv + j];
      P[t * pl + l] = acc;
    });
  blk.sync();
  if (gated) {
    blk.each(n, [=](int64_t i) { gg.ldl[i] = row_sum(E + i * pw, Dk); });
    blk.each(Dk, [=](int64_t t) { part[t] = row_sum(P + t * pl, kLanes); });
  }
  blk.sync();
}

// The products with S0 (S0s in sh, rows Dv + 1 apart), per row i and key column t:
//   R = V - diag(gamma) K S0  =>  dK -= diag(gamma) dR S0^T  (dR = diag(beta) X; wy_backward's dK term)
//   O = scale diag(gamma) Q S0 + ...  =>  dQ += scale diag(gamma) dO S0^T,
//       gamma_i dgamma_i += scale gamma_i q_i . (dO S0^T)_i  (the row sums through E as in wy_backward)
template <class T, class Block>
LINATTN_HD void inter_output_backward(const Block& blk, T* dq, T* dk, T* E, const GateGrads<T>& gg, const T* S0s,
                                      const T* q, const T* dO, const T* x, T scale, int64_t pw, bool gated,
                                      const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv, pv = padded_pitch(Dv);
  blk.each(n * Dk, [=](int64_t e) {
    const RowCol rc = split(e, Dk);
    const int64_t i = rc.row, t = rc.col;
    const T *xi = x + i * Dv, *doi = dO + i * s.ldv, *s0 = S0s + t * pv;
    T xs = 0, z = 0;
    for (int64_t j = 0; j < Dv; ++j) {
      xs += xi[j] * s0[j];
      z += doi[j] * s0[j];
    }
    dk[i * s.ldk + t] -= g.gamma[i] * g.bt[i] * xs;
    dq[i * s.ldk + t] += scale * g.gamma[i] * z;
    if (gated) E[i * pw + t] = scale * g.gamma[i] * q[i * s.ldk + t] * z;
  });
  blk.sync();
  if (gated) blk.each(n, [=](int64_t i) { gg.gdg[i] += row_sum(E + i * pw, Dk); });
  blk.sync();
}

// P = tril(Q K^T) . D with O += scale P U'  =>  dP = scale tril(dO U'^T); M = dP . D, N = dP . P;
// D_ij = exp(G_i - G_j): dG_i += N_ij, dG_j -= N_ij; dQ += M K, dK += M^T Q.
// Us: U' in sh, rows Dv + 1 apart; M, N [C, C + 1] (sh): a warp's threads take consecutive j of a
// row, or (one thread per row) consecutive rows, both in distinct banks.
template <class T, class Block>
LINATTN_HD void scores_backward(const Block& blk, T* M, T* N, T* dq, T* dk, const GateGrads<T>& gg, const T* Us,
                                const T* pg, const T* q, const T* k, const T* dO, T scale, const Gates<T>& g,
                                const Shape& s) {
  const int64_t n = s.n, C = s.C, pc = padded_pitch(C), pv = padded_pitch(s.Dv);
  blk.each(n * n, [=](int64_t e) {
    const RowCol rc = split(e, n);
    const int64_t i = rc.row, j = rc.col;
    T dp = 0;
    if (j <= i) {
      const T *doi = dO + i * s.ldv, *u = Us + j * pv;
      for (int64_t m = 0; m < s.Dv; ++m) dp += doi[m] * u[m];
      dp *= scale;
    }
    M[i * pc + j] = j <= i ? dp * decay_ratio(g.G, i, j) : T(0);
    N[i * pc + j] = j <= i ? dp * pg[i * C + j] : T(0);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) {
    T acc = 0;
    for (int64_t j = 0; j < i; ++j) acc += N[i * pc + j];
    for (int64_t m = i + 1; m < n; ++m) acc -= N[m * pc + i];
    gg.dG[i] += acc;
  });
  blk.each(n * s.Dk, [=](int64_t e) {
    const RowCol rc = split(e, s.Dk);
    const int64_t i = rc.row, t = rc.col;
    T aq = 0, ak = 0;
    for (int64_t j = 0; j <= i; ++j) aq += M[i * pc + j] * k[j * s.ldk + t];
    for (int64_t m = i; m < n; ++m) ak += M[m * pc + i] * q[m * s.ldk + t];
    dq[i * s.ldk + t] += aq;
    dk[i * s.ldk + t] += ak;
  });
  blk.sync();
}

// A = I + L, L_ij = beta_i gd_ij (j < i; gd above the diagonal of PG):  dA = -X U'^T, held
// transposed: dLT_ji = -U'_j . X_i (i > j), in M. Then N_ji = dLT_ji gd_ij and M_ji = F_ij =
// beta_i dLT_ji D_ij: dbeta_i += sum_j N_ji; dG_i += beta_i sum_j N_ji, dG_j -= beta_i N_ji;
// dK += (F + F^T) K. (M, N, Us as in scores_backward.)
template <class T, class Block>
LINATTN_HD void gram_solve_backward(const Block& blk, T* M, T* N, T* dk, const GateGrads<T>& gg, const T* Us,
                                    const T* x, const T* pg, const T* k, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, C = s.C, pc = padded_pitch(C), pv = padded_pitch(s.Dv);
  blk.each(n * n, [=](int64_t e) {  // a warp: consecutive rows j of U' (sh), one row i of X (a broadcast)
    const RowCol rc = split(e, n);
    const int64_t i = rc.row, j = rc.col;
    M[j * pc + i] = i > j ? -dot(Us + j * pv, x + i * s.Dv, s.Dv) : T(0);
  });
  blk.sync();
  blk.each(n * n, [=](int64_t e) {  // a warp: consecutive columns i (PG read in consecutive words)
    const RowCol rc = split(e, n);
    const int64_t j = rc.row, i = rc.col;
    const T t = M[j * pc + i];
    N[j * pc + i] = i > j ? t * pg[j * C + i] : T(0);
    M[j * pc + i] = i > j ? g.bt[i] * t * decay_ratio(g.G, i, j) : T(0);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) {
    T acc_beta = 0, acc_g = 0;
    for (int64_t j = 0; j < i; ++j) acc_beta += N[j * pc + i];
    for (int64_t m = i + 1; m < n; ++m) acc_g += g.bt[m] * N[i * pc + m];
    gg.db[i] += acc_beta;
    gg.dG[i] += g.bt[i] * acc_beta - acc_g;
  });
  blk.each(n * s.Dk, [=](int64_t e) {
    const RowCol rc = split(e, s.Dk);
    const int64_t i = rc.row, t = rc.col;
    T acc = 0;
    for (int64_t m = 0; m < i; ++m) acc += M[m * pc + i] * k[m * s.ldk + t];
    for (int64_t m = i + 1; m < n; ++m) acc += M[i * pc + m] * k[m * s.ldk + t];
    dk[i * s.ldk + t] += acc;
  });
  blk.sync();
}

// The chunk's dbeta; and with gates: gamma_last dgamma_last += gamma_last <dS1, S0> (the sum of
// state_pass_backward's partials), dG_i += gdg_i - lambda_i dlambda_i, dG_last += sum lambda_i dlambda_i,
// and da = the reverse cumulative sum of dG (G_i = sum_{t <= i} a_t). One thread.
template <class T, class Block>
LINATTN_HD void decay_backward(const Block& blk, T* dbeta, T* da, const GateGrads<T>& gg, const T* part,
                               const Gates<T>& g, int64_t H, int64_t Dk, int64_t n) {
  blk.one([=] {
    for (int64_t i = 0; i < n; ++i) dbeta[i * H] += gg.db[i];
    if (!da) return;
    T inner = 0;
    for (int64_t t = 0; t < Dk; ++t) inner += part[t];
    gg.gdg[n - 1] += g.gamma[n - 1] * inner;
    T lam = 0;
    for (int64_t i = 0; i < n; ++i) {
      gg.dG[i] += gg.gdg[i] - gg.ldl[i];
      lam += gg.ldl[i];
    }
    gg.dG[n - 1] += lam;
    T acc = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      acc += gg.dG[i];
      da[i * H] += acc;
    }
  });
  blk.sync();
}

// sh: backward_grads_shared: the gates and their gradients [C] each, part [Dk], then first SS
// [Dk, Dv + 1] (dS1, then S0), E [C, W + 1] (W = max(Dk, Dv)) and P [Dk, kLanes + 1], later Us
// [C, Dv + 1] and M, N [C, C + 1] over them (each function above says why its rows are so far apart).
template <class T, class Block>
LINATTN_HD void chunk_backward_grads(const Block& blk, const Args<T>& p, const T* work, int64_t bh, int64_t c, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv, pv = padded_pitch(Dv), pw = padded_pitch(Dk > Dv ? Dk : Dv);
  const bool gated = p.a != nullptr;
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  const GateGrads<T> gg{sh + 4 * C, sh + 5 * C, sh + 6 * C, sh + 7 * C};
  T* part = sh + 8 * C;
  T* SS = part + Dk;
  T* E = SS + Dk * pv;
  T* P = E + C * pw;
  T* Us = part + Dk;
  T* M = Us + C * pv;
  T* N = M + C * padded_pitch(C);
  const ChunkAt at = chunk_at(d, bh, c);
  const Shape s = shape(d, at);
  const int64_t n = at.n;
  const WorkChunk w = work_chunk(d, bh, c);
  const T *dS1 = work + w.dS, *x = work + w.X;
  const T* S0 = p.saved + at.slot * d.block();
  const T *pg = S0 + d.state() + C * C, *U = pg + C * C, *R = U + C * Dv;
  const T *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *dO = p.dO + at.vo;
  T *dq = p.dq + at.qk, *dk = p.dk + at.qk, *dv = p.dv + at.vo;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, n);
  blk.each(n, [=](int64_t i) { gg.gdg[i] = gg.ldl[i] = gg.dG[i] = gg.db[i] = 0; });
  blk.each(Dk * Dv, [=](int64_t e) {
    const RowCol rc = split(e, Dv);
    SS[rc.row * pv + rc.col] = dS1[e];
  });
  blk.sync();
  wy_backward(blk, dv, E, gg, x, R, v, pw, gated, g, s);
  state_pass_backward(blk, dk, E, P, part, gg, SS, S0, k, U, pw, gated, g, s);
  blk.each(Dk * Dv, [=](int64_t e) {  // over dS1, now spent
    const RowCol rc = split(e, Dv);
    SS[rc.row * pv + rc.col] = S0[e];
  });
  blk.sync();
  inter_output_backward(blk, dq, dk, E, gg, SS, q, dO, x, p.scale, pw, gated, g, s);
  blk.each(n * Dv, [=](int64_t e) {  // over SS, E and P, now spent
    const RowCol rc = split(e, Dv);
    Us[rc.row * pv + rc.col] = U[e];
  });
  blk.sync();
  scores_backward(blk, M, N, dq, dk, gg, Us, pg, q, k, dO, p.scale, g, s);
  gram_solve_backward(blk, M, N, dk, gg, Us, x, pg, k, g, s);
  decay_backward(blk, p.dbeta + at.s, p.da ? p.da + at.s : nullptr, gg, part, g, d.H, Dk, n);
}

// ---- the recurrent forward of head bh: S_t = exp(a_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
// o_t = scale S_t^T q_t. The state lives in `state` (global, [Dk, Dv] for this head); sh: u [Dv].
template <class T, class Block>
LINATTN_HD void recurrent_forward_head(const Block& blk, const Args<T>& p, T* state, int64_t bh, T* sh) {
  const Dims d = dims(p);
  const int64_t Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state(), ldk = H * Dk, ldv = H * Dv;
  T* u = sh;
  const ChunkAt at = chunk_at(d, bh, 0);  // where token 0 is
  const int64_t in = initial_state_at(d, bh), out = final_state_at(d, bh), len = head_span(d, bh).len;
  blk.each(S, [&](int64_t e) { state[e] = p.h0 && in >= 0 ? p.h0[in + e] : T(0); });
  blk.sync();
  for (int64_t t = 0; t < len; ++t) {
    const T *qt = p.q + at.qk + t * ldk, *kt = p.k + at.qk + t * ldk, *vt = p.v + at.vo + t * ldv;
    const T beta = p.beta[at.s + t * H], decay = p.a ? exp_(p.a[at.s + t * H]) : T(1);
    // u = beta (v - decay S^T k)
    blk.each(Dv, [&](int64_t j) {
      T acc = 0;
      for (int64_t i = 0; i < Dk; ++i) acc += kt[i] * state[i * Dv + j];
      u[j] = beta * (vt[j] - decay * acc);
    });
    blk.sync();
    blk.each(S, [&](int64_t e) {
      const RowCol rc = split(e, Dv);
      state[e] = decay * state[e] + kt[rc.row] * u[rc.col];
    });
    blk.sync();
    blk.each(Dv, [&](int64_t j) {
      T acc = 0;
      for (int64_t i = 0; i < Dk; ++i) acc += qt[i] * state[i * Dv + j];
      p.o[at.vo + t * ldv + j] = p.scale * acc;
    });
    blk.sync();
  }
  if (p.ht && out >= 0) blk.each(S, [&](int64_t e) { p.ht[out + e] = state[e]; });
  blk.sync();
}

}  // namespace linattn::cuda::delta
