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
// has a bank conflict, for any row or column offset.
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

}  // namespace linattn::cuda::chunk
