// The thread and shared-memory layout of the chunk-parallel linear attention and GLA kernels
// (kernels/cuda/chunk_gla.cuh): which outputs a thread owns, and where a tile element lives in shared
// memory. Host and device code alike, so that tests/cuda/chunk_layout_test.cpp checks the very index
// functions the kernels use for bank conflicts. Includes no CUDA header.
//
// Every product of those kernels writes a 64 x 64 output tile with 256 threads: warp w (0..7) owns
// the rows w + 8 r (r < 8) and lane l (0..31) the columns l + 32 s (s < 2), 16 outputs per thread.
// So in every step of a product loop one warp touches, in each operand:
//  - one row and 32 consecutive columns ("row run", e.g. V[j][n], n = l + 32 s), or
//  - one element, the same for all lanes ("broadcast", e.g. Q[i][d], i = w + 8 r), or
//  - 32 consecutive rows of one column ("column run", e.g. K[j][d] in Q Kᵀ, j = l + 32 s).
// Shared memory has 32 banks of 4 bytes; word address a sits in bank a mod 32. A tile is stored row
// by row with a pitch of (columns + 1) words: the pitch is odd, so the column run's 32 rows fall in
// 32 different banks (r * pitch mod 32 is a bijection of r mod 32 for odd pitch), the row run's 32
// words are consecutive (32 banks) and a broadcast is one word. Tiles are filled row by row, a warp
// writing 32 consecutive elements of one row (the tile widths are multiples of 32). No layout here
// has a bank conflict, for any row or column offset. The tensor-core paths' layouts: further down.
#pragma once

#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace linattn::cuda::chunk {

constexpr int kChunk = 64;       // tokens per chunk: every kernel's chunk, whatever model.chunk_size says
constexpr int kSub = 16;         // tokens per sub-chunk of GLA's numerically safe gating
constexpr int kSubs = kChunk / kSub;
constexpr int kTileCols = 64;    // output columns of a block's tile (value columns, or key columns)
constexpr int kDepth = 32;       // the contracted dimension's slice per step of a product loop
constexpr int kThreads = 256;    // threads of a block: 8 warps of 32 lanes
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerThread = kChunk / kWarps;      // 8: rows w + 8 r
constexpr int kColsPerThread = kTileCols / 32;       // 2: columns l + 32 s
constexpr int kBanks = 32;

// A tile's row pitch in words: its width plus one (odd, see the top).
LINATTN_HD constexpr int pitch(int width) { return width + 1; }
// Where element (row, col) of a tile of `width` columns lives, in words from the tile's start.
LINATTN_HD constexpr int at(int row, int col, int width) { return row * pitch(width) + col; }
// Shared-memory words of a tile.
LINATTN_HD constexpr int words(int rows, int width) { return rows * pitch(width); }

// The outputs of thread `tid` in a 64 x 64 tile: row r (< 8) and column s (< 2) of its share.
LINATTN_HD constexpr int tile_row(int tid, int r) { return tid / 32 + kWarps * r; }
LINATTN_HD constexpr int tile_col(int tid, int s) { return tid % 32 + 32 * s; }

// GLA's diagonal sub-chunk blocks (row and column in one sub-chunk) within a thread's share: for its
// column s, in sub-chunk J = tile_col / kSub, the rows of J it owns are diag_row(tid, s, h), h < 2
// (r = 2 J + h, as row tile_row(tid, r) lies in sub-chunk r / 2). A warp reads such a row's element
// as two broadcasts, one per half-warp, 16 rows apart: two banks for the odd pitches here.
LINATTN_HD constexpr int diag_row(int tid, int s, int h) { return tile_row(tid, 2 * (tile_col(tid, s) / kSub) + h); }

// The elements a thread fills when a block loads a rows x width tile: e = tid + kThreads * i.
LINATTN_HD constexpr int load_row(int e, int width) { return e / width; }
LINATTN_HD constexpr int load_col(int e, int width) { return e % width; }

// Dynamic shared memory of the intra-chunk kernels, in words (launch_plan.cpp's plans launch with it):
// chunk_state_kernel two 64 x 64 tiles; chunk_apply_kernel its product loop's slices of Q, K, V (or dO)
// and the gates with the sub-chunk factors, or two 64 x 64 score tiles; chunk_dqk_kernel its loop's
// four 64 x 32 slices, or six 64 x 64 tiles and the sub-chunk factors.
constexpr int kStateWords = 2 * words(kChunk, kTileCols);
constexpr int kApplyLoopWords =
    5 * words(kChunk, kDepth) + words(kDepth, kTileCols) + (kSubs * kSubs + kSubs) * pitch(kDepth);
constexpr int kApplyWords = kApplyLoopWords > 2 * words(kChunk, kChunk) ? kApplyLoopWords : 2 * words(kChunk, kChunk);
constexpr int kQkLoopWords = 4 * words(kChunk, kDepth);
constexpr int kQkTileWords = 6 * words(kChunk, kTileCols) + kSubs * kSubs * pitch(kTileCols);
constexpr int kQkWords = kQkTileWords > kQkLoopWords ? kQkTileWords : kQkLoopWords;

LINATTN_HD constexpr int bank(int word) { return word % kBanks; }

// ---- the tensor-core paths (bf16, tf32; chunk_gla.cu) ----
// Their products run on WMMA fragments of 16 x 16 outputs: the block's 64 x 64 output tile is 4 x 4
// fragments, warp w owning row block frag_row(w) and column blocks frag_col(w, t), t < 2. The
// operands sit in shared memory in the fragment's type (`bytes` 2: bf16; 4: float rounded to tf32)
// and the results pass through a float tile of the same kind of layout ("staging") to the threads'
// outputs of the f32 path's mapping above (tile_row, tile_col), whose epilogues both paths share.
//
// A fragment load reads 16 rows (16 columns for col_major) of 16 or 32 bytes each, as 16-byte runs,
// 8 rows at a time (ldmatrix's phases; a store writes the same way). Shared memory serves 128 bytes
// per cycle as 8 groups of 16 bytes (4 banks each), and a run starting at byte a is group
// (a / 16) mod 8. With a row pitch of P bytes and P / 16 odd, r -> r P / 16 mod 8 is a bijection on
// any 8 consecutive rows, so the 8 runs of a phase fill the 8 groups: no conflict, for any row and
// 16-byte-aligned column offset. So a tile of `width` elements (width * bytes a multiple of 32) gets
// 16 bytes of padding: P = width * bytes + 16 ≡ 16 (mod 32), 8 bf16 or 4 floats. WMMA's ldm is then
// a multiple of 8 (bf16) or 4 (float), and every fragment pointer (rows 8 r, columns 16 c bf16 or
// 8 c floats from a 128-byte aligned tile) is 32-byte aligned, as WMMA requires.
constexpr int kFrag = 16;
LINATTN_HD constexpr int frag_row(int warp) { return warp / 2; }
LINATTN_HD constexpr int frag_col(int warp, int t) { return warp % 2 * 2 + t; }

LINATTN_HD constexpr int tc_pitch(int width, int bytes) { return width + 16 / bytes; }
LINATTN_HD constexpr int tc_at(int row, int col, int width, int bytes) { return row * tc_pitch(width, bytes) + col; }
// The 16-byte group of shared memory that the run starting at element (row, col) reads.
LINATTN_HD constexpr int tc_group(int row, int col, int width, int bytes) {
  return tc_at(row, col, width, bytes) * bytes / 16 % 8;
}
LINATTN_HD constexpr int align128(int bytes) { return (bytes + 127) / 128 * 128; }
// Bytes of a rows x width tile, rounded up to 128 so that the next tile starts aligned.
LINATTN_HD constexpr int tc_bytes(int rows, int width, int bytes) {
  return align128(rows * tc_pitch(width, bytes) * bytes);
}
LINATTN_HD constexpr int max_of(int a, int b) { return a > b ? a : b; }

// The off-diagonal sub-chunk pairs I > J of GLA's scores, each a [kSub, width] operand tile of
// K̃_j F_IJ (or Q̃_i F_IJ): pair_index(I, J) < kPairs.
constexpr int kPairs = kSubs * (kSubs - 1) / 2;
LINATTN_HD constexpr int pair_index(int I, int J) { return I * (I - 1) / 2 + J; }
// Its inverse: the pair (I, J) of index `pair`.
LINATTN_HD constexpr int pair_row(int pair) { return pair < 1 ? 1 : pair < 3 ? 2 : 3; }
LINATTN_HD constexpr int pair_col(int pair) { return pair - pair_index(pair_row(pair), 0); }
static_assert(kSubs == 4, "pair_row lists the pairs of 4 sub-chunks");

// Dynamic shared memory of the tensor-core kernels in bytes, for operands of `bytes` (the f32 path:
// k*Words above times 4). The staging tile [kChunk, kTileCols] of floats overlays operands that are
// dead by then (see chunk_gla.cu).
LINATTN_HD constexpr int tc_staging_bytes() { return tc_bytes(kChunk, kTileCols, 4); }
// chunk_state_kernel: the gated keys (queries) and the values (dO), [kChunk, kTileCols] each.
LINATTN_HD constexpr int tc_state_bytes(int bytes) {
  return max_of(2 * tc_bytes(kChunk, kTileCols, bytes), tc_staging_bytes());
}
// chunk_apply_kernel: the f32 path's loop tiles, then the operands R̃ and Q (or Q̃) [kChunk, kDepth],
// the state slice [kDepth, kTileCols] and K [kChunk, kDepth] or the kPairs tiles [kSub, kDepth]; after
// the loop the f32 scores [kChunk, kChunk] and the operands A and Y [kChunk, kTileCols].
LINATTN_HD constexpr int tc_apply_loop_bytes(int bytes) {
  return align128(kApplyLoopWords * 4) + 2 * tc_bytes(kChunk, kDepth, bytes) + tc_bytes(kDepth, kTileCols, bytes) +
         tc_bytes(max_of(kChunk, kPairs * kSub), kDepth, bytes);
}
LINATTN_HD constexpr int tc_apply_tail_bytes(int bytes) {
  return align128(words(kChunk, kChunk) * 4) + 2 * tc_bytes(kChunk, kTileCols, bytes);
}
LINATTN_HD constexpr int tc_apply_bytes(int bytes) {
  return max_of(max_of(tc_apply_loop_bytes(bytes), tc_apply_tail_bytes(bytes)), tc_staging_bytes());
}
// chunk_dqk_kernel: the loop's dO, V, S_c and dS_{c+1} slices [kChunk, kDepth] as operands (over the
// later tiles), then the float32 tiles of qk_tiles(true), the masked dP [kChunk, kChunk] as an operand
// (it serves dq, dk and the diagonal sub-chunk blocks), and K or Q [kChunk, kTileCols] or the kPairs
// tiles [kSub, kTileCols] as operands, with the staging tile over those (two blocks fit on an SM).
LINATTN_HD constexpr int tc_qk_loop_bytes(int bytes) { return 4 * tc_bytes(kChunk, kDepth, bytes); }
LINATTN_HD constexpr int tc_qk_operand_bytes(int bytes) {
  return max_of(tc_bytes(max_of(kChunk, kPairs * kSub), kTileCols, bytes), tc_staging_bytes());
}

// chunk_dqk_kernel's float32 tiles after its product loop, in words from the start of shared memory
// (-1: absent): dP masked [kChunk, kChunk], φ(k) then φ(q) [kChunk, kTileCols] (X), its gated rows
// K̃ then Q̃ (Xt), the gates (G), the sub-chunk factors [kSubs * kSubs, kTileCols] (F), the state
// term of dk (Dk) and the gate gradient's rows (DG); `end` words in all. The tensor-core paths hold
// dP only as an operand and form the gated rows as they build the pair operands: no P, no Xt.
struct QkTiles {
  int P, X, Xt, G, F, Dk, DG, end;
};
LINATTN_HD constexpr QkTiles qk_tiles(bool tensor_cores) {
  constexpr int w = words(kChunk, kTileCols), f = kSubs * kSubs * pitch(kTileCols);
  return tensor_cores ? QkTiles{-1, 0, -1, w, 2 * w, 2 * w + f, 3 * w + f, 4 * w + f}
                      : QkTiles{0, w, 2 * w, 3 * w, 4 * w, 4 * w + f, 5 * w + f, 6 * w + f};
}
static_assert(qk_tiles(false).end == kQkTileWords, "the float32 dq/dk layout is kQkTileWords long");
// Where the tensor-core path's operands dP and X (with the staging tile) start, in bytes.
LINATTN_HD constexpr int tc_qk_p_offset() { return align128(qk_tiles(true).end * 4); }
LINATTN_HD constexpr int tc_qk_x_offset(int bytes) { return tc_qk_p_offset() + tc_bytes(kChunk, kChunk, bytes); }
LINATTN_HD constexpr int tc_qk_bytes(int bytes) {
  return max_of(tc_qk_loop_bytes(bytes), tc_qk_x_offset(bytes) + tc_qk_operand_bytes(bytes));
}

}  // namespace linattn::cuda::chunk
