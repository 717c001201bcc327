// The shared-memory layouts of the chunk-parallel linear attention and GLA kernels
// (kernels/cuda/chunk_layout.h) are free of bank conflicts: for every access pattern the kernels of
// kernels/cuda/chunk_gla.cu use, through the same index functions, the 32 lanes of every warp touch
// 32 different banks or one word; and the tensor-core paths' fragment loads read 8 rows of 16 bytes
// in 8 different 16-byte groups. Runs on the host (not a Cuda* suite): it needs no device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <string>

#include "kernels/cuda/chunk_layout.h"
#include "kernels/cuda/occupancy.h"

namespace linattn::cuda::chunk {
namespace {

// The most distinct words that one bank serves in one access of a warp (1: conflict-free; a word
// read by several lanes is one broadcast).
int conflict_ways(const std::array<int, 32>& word) {
  std::array<std::set<int>, kBanks> in_bank;
  for (int w : word) in_bank[size_t(bank(w))].insert(w);
  size_t most = 0;
  for (const auto& b : in_bank) most = std::max(most, b.size());
  return int(most);
}

// Every warp of the block, for every value of the loop variable `step` in [0, steps): the words
// `word(tid, step)` of its 32 lanes; returns the worst access found and names it in `where`.
int worst(int steps, const std::function<int(int tid, int step)>& word, std::string& where) {
  int most = 0;
  for (int warp = 0; warp < kWarps; ++warp)
    for (int step = 0; step < steps; ++step) {
      std::array<int, 32> w{};
      for (int lane = 0; lane < 32; ++lane) w[size_t(lane)] = word(warp * 32 + lane, step);
      const int ways = conflict_ways(w);
      if (ways > most) most = ways, where = "warp " + std::to_string(warp) + " step " + std::to_string(step);
    }
  return most;
}

#define EXPECT_NO_CONFLICT(steps, word)                                     \
  do {                                                                      \
    std::string where_;                                                     \
    const int ways_ = worst((steps), (word), where_);                       \
    EXPECT_EQ(ways_, 1) << ways_ << "-way bank conflict at " << where_;     \
  } while (0)

// The widths of the kernels' tiles: key or value slices (kDepth), chunk x chunk and 64-column tiles.
constexpr int kWidths[] = {kDepth, kTileCols, kChunk};

TEST(ChunkLayout, ThreadTilesCoverA64By64TileOnce) {
  std::set<std::pair<int, int>> seen;
  for (int tid = 0; tid < kThreads; ++tid)
    for (int r = 0; r < kRowsPerThread; ++r)
      for (int s = 0; s < kColsPerThread; ++s) {
        const int row = tile_row(tid, r), col = tile_col(tid, s);
        EXPECT_EQ(row / kSub, r / 2) << "the kernels take row " << row << "'s sub-chunk as r / 2";
        seen.insert({row, col});
      }
  EXPECT_EQ(seen.size(), size_t(kChunk * kTileCols));
  for (const auto& [row, col] : seen) EXPECT_TRUE(row < kChunk && col < kTileCols);
}

// K[j][d] in Q Kᵀ, V[j][m] in dO Vᵀ, S[n][m] in dO Sᵀ: lane l reads row l + 32 s of one column.
TEST(ChunkLayout, ColumnRunsHitEveryBankOnce) {
  for (int width : kWidths)
    for (int s = 0; s < kColsPerThread; ++s) {
      SCOPED_TRACE("width " + std::to_string(width) + " s " + std::to_string(s));
      EXPECT_NO_CONFLICT(width, [&](int tid, int col) { return at(tile_col(tid, s), col, width); });
    }
}

// V[j][n], S[d][n], K̃[j][n], G[i][n], the scores' sums: one row, lane l at column l + 32 s.
TEST(ChunkLayout, RowRunsHitEveryBankOnce) {
  for (int width : {kTileCols, kChunk})
    for (int s = 0; s < kColsPerThread; ++s) {
      SCOPED_TRACE("width " + std::to_string(width) + " s " + std::to_string(s));
      EXPECT_NO_CONFLICT(kChunk, [&](int tid, int row) { return at(row, tile_col(tid, s), width); });
    }
}

// Q[i][d], dP[i][j], A[i][j] (and transposed, A[m][row]): i = tile_row, the same word for the warp.
TEST(ChunkLayout, ThreadRowReadsAreBroadcasts) {
  for (int width : kWidths)
    for (int r = 0; r < kRowsPerThread; ++r) {
      SCOPED_TRACE("width " + std::to_string(width) + " r " + std::to_string(r));
      EXPECT_NO_CONFLICT(width, [&](int tid, int col) { return at(tile_row(tid, r), col, width); });
      EXPECT_NO_CONFLICT(kChunk, [&](int tid, int m) { return at(m, tile_row(tid, r), kChunk); });
    }
}

// The pair factors F[I * kSubs + J][d] in the forward scores: J = column / kSub differs between the
// two half-warps, so a warp reads two words, one pitch apart.
TEST(ChunkLayout, PairFactorReadsAreTwoBroadcastsInTwoBanks) {
  for (int r = 0; r < kRowsPerThread; ++r)
    for (int s = 0; s < kColsPerThread; ++s)
      EXPECT_NO_CONFLICT(kDepth, [&](int tid, int d) {
        return at((r / 2) * kSubs + tile_col(tid, s) / kSub, d, kDepth);
      });
}

// Tile loads: element e = tid + kThreads * i of a rows x width tile, stored at (e / width, e % width).
TEST(ChunkLayout, TileStoresHitEveryBankOnce) {
  for (int width : kWidths) {
    SCOPED_TRACE("width " + std::to_string(width));
    const int steps = kChunk * width / kThreads;
    EXPECT_NO_CONFLICT(steps, [&](int tid, int i) {
      const int e = tid + kThreads * i;
      return at(load_row(e, width), load_col(e, width), width);
    });
  }
}

// The check can fail: without the padding word a column run is a 32-way conflict, and the 2 x 16
// lane grid that the layout avoids would read a row run of two rows with a 2-way one.
TEST(ChunkLayout, TheCheckSeesConflicts) {
  std::string where;
  EXPECT_EQ(worst(kDepth, [](int tid, int col) { return tile_col(tid, 0) * kDepth + col; }, where), 32);
  EXPECT_EQ(worst(1, [](int tid, int) { return at(tid % 32 / 16, tid % 16, kTileCols); }, where), 2);
}

// ---- the tensor-core paths ----

// The 16-byte groups (chunk_layout.h) that one 8-row phase of a fragment load reads: rows
// row0 .. row0 + 7, each a 16-byte run from column col; how many runs share the busiest group
// (1: conflict-free, 8 runs in 8 groups).
int tc_phase_ways(int row0, int col, int width, int bytes, int (*pitch_of)(int, int)) {
  std::array<int, 8> runs{};
  for (int r = 0; r < 8; ++r) ++runs[size_t((row0 + r) * pitch_of(width, bytes) * bytes / 16 + col * bytes / 16) % 8];
  return *std::max_element(runs.begin(), runs.end());
}

// Every operand and staging tile of the tensor-core kernels: bf16 and float32 (tf32, accumulators)
// tiles 32 or 64 wide. A fragment starts at a row multiple of 8 and a column multiple of 16 bytes
// (its 16-byte runs: bf16 8 columns, float 4); every phase of every such fragment is conflict-free.
TEST(ChunkLayout, FragmentLoadsHitEveryGroupOnce) {
  for (int bytes : {2, 4})
    for (int width : {kDepth, kTileCols}) {
      SCOPED_TRACE("bytes " + std::to_string(bytes) + " width " + std::to_string(width));
      EXPECT_EQ((tc_pitch(width, bytes) * bytes) % 32, 16) << "the pitch in 16-byte units must be odd";
      EXPECT_EQ(tc_pitch(width, bytes) % (bytes == 2 ? 8 : 4), 0) << "WMMA's ldm: a multiple of 8 bf16 / 4 floats";
      for (int row0 = 0; row0 + 8 <= kChunk + kPairs * kSub; row0 += 8)
        for (int col = 0; col < width; col += 16 / bytes) {
          EXPECT_EQ(tc_phase_ways(row0, col, width, bytes, tc_pitch), 1) << "rows " << row0 << ", column " << col;
          // the same through tc_group, the function the comment names
          std::set<int> groups;
          for (int r = 0; r < 8; ++r) groups.insert(tc_group(row0 + r, col, width, bytes));
          EXPECT_EQ(groups.size(), 8u) << "rows " << row0 << ", column " << col;
        }
    }
}

// WMMA needs 32-byte aligned fragment pointers: from a 128-byte aligned tile, rows at multiples of 8
// (tf32's k step in a col_major operand) and columns at multiples of 32 bytes.
TEST(ChunkLayout, FragmentPointersAre32ByteAligned) {
  for (int bytes : {2, 4})
    for (int width : {kDepth, kTileCols})
      for (int row = 0; row < kChunk + kPairs * kSub; row += 8)
        for (int col = 0; col < width; col += 32 / bytes)
          EXPECT_EQ(tc_at(row, col, width, bytes) * bytes % 32, 0) << bytes << " bytes, width " << width << ", row "
                                                                   << row << ", column " << col;
  for (int bytes : {2, 4}) {
    EXPECT_EQ(tc_bytes(kChunk, kDepth, bytes) % 128, 0);
    EXPECT_EQ(tc_bytes(kDepth, kTileCols, bytes) % 128, 0);
  }
}

// The warps' fragments cover the 64 x 64 output tile once, and the staging tile's reads by the
// thread mapping (tile_row, tile_col) are row runs: conflict-free.
TEST(ChunkLayout, WarpFragmentsCoverTheTileAndStagingReadsAreRowRuns) {
  std::set<std::pair<int, int>> blocks;
  for (int w = 0; w < kWarps; ++w)
    for (int t = 0; t < 2; ++t) blocks.insert({frag_row(w), frag_col(w, t)});
  EXPECT_EQ(blocks.size(), size_t((kChunk / kFrag) * (kTileCols / kFrag)));
  for (const auto& [r, c] : blocks) EXPECT_TRUE(r < kChunk / kFrag && c < kTileCols / kFrag);
  for (int r = 0; r < kRowsPerThread; ++r)
    for (int s = 0; s < kColsPerThread; ++s)
      EXPECT_NO_CONFLICT(1, [&](int tid, int) { return tc_at(tile_row(tid, r), tile_col(tid, s), kTileCols, 4); });
}

// GLA's sub-chunk pairs I > J: pair_index numbers them 0 .. kPairs - 1, pair_row / pair_col invert it.
TEST(ChunkLayout, SubChunkPairsAreNumberedOnce) {
  std::set<int> seen;
  for (int I = 0; I < kSubs; ++I)
    for (int J = 0; J < I; ++J) {
      const int pair = pair_index(I, J);
      EXPECT_TRUE(seen.insert(pair).second) << I << ", " << J;
      EXPECT_EQ(pair_row(pair), I);
      EXPECT_EQ(pair_col(pair), J);
    }
  EXPECT_EQ(seen.size(), size_t(kPairs));
  EXPECT_EQ(*seen.rbegin(), kPairs - 1);
}

// GLA's diagonal sub-chunk blocks in the tensor-core output kernel: diag_row(tid, s, h) names, over
// the block, every entry (i, j) with i and j in one sub-chunk exactly once, each an entry of the
// thread's own share (so it merges into its accumulators); the kernel addresses the rows from
// diag_row(tid, 0, 0) + 32 s + 8 h and takes j <= i from s = 0.
TEST(ChunkLayout, DiagonalBlockRowsCoverTheDiagonalBlocksOnce) {
  std::set<std::pair<int, int>> seen;
  for (int tid = 0; tid < kThreads; ++tid)
    for (int s = 0; s < kColsPerThread; ++s)
      for (int h = 0; h < 2; ++h) {
        const int i = diag_row(tid, s, h), j = tile_col(tid, s);
        EXPECT_EQ(i / kSub, j / kSub) << "thread " << tid << " s " << s << " h " << h;
        EXPECT_EQ(i, tile_row(tid, 2 * (j / kSub) + h)) << "not the thread's own row r = 2 J + h";
        EXPECT_EQ(i, diag_row(tid, 0, 0) + 32 * s + 8 * h);
        EXPECT_EQ(j % kSub <= i % kSub, tile_col(tid, 0) % kSub <= diag_row(tid, 0, h) % kSub);
        EXPECT_TRUE(seen.insert({i, j}).second) << "(" << i << ", " << j << ") twice";
      }
  EXPECT_EQ(seen.size(), size_t(kSubs * kSub * kSub));
}

// Their reads, Q[i][d] and G[i][d] for i = diag_row: the half-warps' rows are 16 apart, two words
// in two banks (16 x 33 = 528 = 16 mod 32); K[j][d], G[j][d] are column runs (tested above).
TEST(ChunkLayout, DiagonalBlockRowReadsAreTwoBroadcastsInTwoBanks) {
  for (int s = 0; s < kColsPerThread; ++s)
    for (int h = 0; h < 2; ++h)
      EXPECT_NO_CONFLICT(kDepth, [&](int tid, int d) { return at(diag_row(tid, s, h), d, kDepth); });
  // The check can fail: rows 32 apart (32 x 33 = 0 mod 32) would put the two words in one bank.
  std::string where;
  EXPECT_EQ(worst(kDepth, [](int tid, int d) { return at(tid % 32 / 16 * 32, d, kDepth); }, where), 2);
}

// dP written as an operand from the threads' share (dq/dk kernel): row runs of 32 elements, in bf16
// 16 words that two lanes share each, in tf32 32 words: no conflict.
TEST(ChunkLayout, OperandStoresFromTheThreadShareAreRowRuns) {
  for (int bytes : {2, 4})
    for (int r = 0; r < kRowsPerThread; ++r)
      for (int s = 0; s < kColsPerThread; ++s) {
        SCOPED_TRACE("bytes " + std::to_string(bytes) + " r " + std::to_string(r) + " s " + std::to_string(s));
        EXPECT_NO_CONFLICT(1, [&](int tid, int) { return tc_at(tile_row(tid, r), tile_col(tid, s), kChunk, bytes) * bytes / 4; });
      }
}

// The float32 tiles of the dq/dk kernel (qk_tiles) in words [offset, offset + size): the first tile
// that overlaps another, or reaches past the end, or "" when none does.
std::string qk_tile_overlap(const QkTiles& t) {
  const int w = words(kChunk, kTileCols), f = kSubs * kSubs * pitch(kTileCols);
  const std::pair<const char*, std::pair<int, int>> tiles[] = {
      {"P", {t.P, w}}, {"X", {t.X, w}}, {"Xt", {t.Xt, w}}, {"G", {t.G, w}}, {"F", {t.F, f}}, {"Dk", {t.Dk, w}},
      {"DG", {t.DG, w}}};
  for (const auto& [name, a] : tiles) {
    if (a.first < 0) continue;
    if (a.first + a.second > t.end) return std::string(name) + " past the end";
    for (const auto& [other, b] : tiles)
      if (b.first >= 0 && name != other && a.first < b.first + b.second && b.first < a.first + a.second)
        return std::string(name) + " overlaps " + other;
  }
  return "";
}

// The float32 path has all seven tiles and the tensor-core paths five, none overlapping; the tensor-
// core paths' operands come after theirs. Two blocks fit on an H100 SM in every precision (the
// occupancy calculator's rules at the 128 registers that __launch_bounds__(kThreads, 2) allows).
TEST(ChunkLayout, DqkTilesAreDisjointAndTwoBlocksFitOnAnSm) {
  EXPECT_EQ(qk_tile_overlap(qk_tiles(false)), "");
  EXPECT_EQ(qk_tile_overlap(qk_tiles(true)), "");
  EXPECT_GE(qk_tiles(false).P, 0);
  EXPECT_GE(qk_tiles(false).Xt, 0);
  EXPECT_EQ(qk_tiles(true).P, -1);
  EXPECT_EQ(qk_tiles(true).Xt, -1);
  EXPECT_GE(tc_qk_p_offset(), qk_tiles(true).end * 4);
  for (int bytes : {2, 4}) {
    EXPECT_GE(tc_qk_x_offset(bytes), tc_qk_p_offset() + kChunk * tc_pitch(kChunk, bytes) * bytes);
    EXPECT_EQ(tc_qk_x_offset(bytes) % 128, 0);
    EXPECT_GE(tc_qk_bytes(bytes),
              tc_qk_x_offset(bytes) + std::max(tc_bytes(kPairs * kSub, kTileCols, bytes), tc_staging_bytes()));
  }
  const GpuSpec h100 = h100_sxm();
  for (int64_t shared : {int64_t(kQkWords) * 4, int64_t(tc_qk_bytes(2)), int64_t(tc_qk_bytes(4)),
                         int64_t(tc_apply_bytes(2)), int64_t(tc_apply_bytes(4))})
    EXPECT_GE(occupancy(h100, kThreads, 128, shared).blocks_per_sm, 2) << shared << " bytes of shared memory";
  // The check can fail: the layout before (dP and K̃ / Q̃ in float32 beside the operands) fit one block.
  EXPECT_EQ(occupancy(h100, kThreads, 128, 127104).blocks_per_sm, 1);
  QkTiles overlapping = qk_tiles(true);
  overlapping.G = overlapping.X + 1;
  EXPECT_NE(qk_tile_overlap(overlapping), "");
}

// The check can fail: an unpadded bf16 tile 64 wide (128-byte rows) puts a phase's 8 runs in one
// group, and a pitch of 32 extra bytes (an even number of 16-byte units) in 4 groups, two runs each.
TEST(ChunkLayout, TheFragmentCheckSeesConflicts) {
  EXPECT_EQ(tc_phase_ways(0, 0, kTileCols, 2, [](int width, int) { return width; }), 8);
  EXPECT_EQ(tc_phase_ways(0, 0, kTileCols, 2, [](int width, int) { return width + 16; }), 2);
}

}  // namespace
}  // namespace linattn::cuda::chunk
