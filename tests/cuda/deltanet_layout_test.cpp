// The shared-memory layouts of the DeltaNet and Gated DeltaNet kernels (kernels/cuda/deltanet_block.h,
// kernels/cuda/deltanet.cu) are free of bank conflicts: for every phase of every kernel that touches
// a shared tile, forward and backward, float32 and tensor-core, the words that the 32 lanes of a warp
// touch in one access, computed with the kernels' own pitch and index functions (delta::padded_pitch,
// chunk::tc_at, delta::skewed_col, delta::split), fall in 32 different banks or are one word; and the
// tensor-core paths' fragment loads and stores read 8 rows of 16 bytes in 8 different 16-byte groups.
// Each access below names the stage (deltanet_block.h, deltanet.cu) and tile it models. Runs on the
// host: it needs no device.
//
// The shapes are full chunks (n = C) at the chunk sizes 32 and 64 and head dimensions 32, 64 and 128
// (64 at most for the tensor-core backward): the training shapes. Where a warp's 32 lanes span two
// rows of a tile the layouts do not promise distinct banks: at chunk size 16 the [C, C] tiles' row
// runs are 2-way conflicts (DeltaNetLayout.ChunkSize16RowRunsAre2Way shows it), and likewise the
// last, partial chunk of a sequence and head dimensions that are not multiples of 32 (not checked).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <set>
#include <string>

#include "kernels/cuda/chunk_layout.h"
#include "kernels/cuda/deltanet_block.h"
#include "kernels/cuda/launch_plan.h"

namespace linattn::cuda {
namespace {

using chunk::kBanks, chunk::kChunk, chunk::tc_at, delta::padded_pitch;
constexpr int64_t kThreads = kDeltaNetHeadThreads;

// The word (4 bytes) that element e of a phase blk.each(count, ...) touches at step `step` of the
// loop inside the element, or -1 where that lane takes no part (its branch skips the access).
using Access = std::function<int64_t(int64_t e, int64_t step)>;

// The most distinct words that one bank serves in one access of a warp, over every warp of the
// block, every round of blk.each (element e = thread + kThreads r) and every step (1: conflict-free);
// `where` names the worst access.
int phase_ways(int64_t count, int64_t steps, const Access& word, std::string& where) {
  int most = 0;
  for (int64_t round = 0; round * kThreads < count; ++round)
    for (int64_t warp = 0; warp < kThreads / 32; ++warp)
      for (int64_t step = 0; step < steps; ++step) {
        std::array<std::set<int64_t>, kBanks> in_bank;
        for (int64_t lane = 0; lane < 32; ++lane) {
          const int64_t e = round * kThreads + warp * 32 + lane;
          const int64_t w = e < count ? word(e, step) : -1;
          if (w >= 0) in_bank[size_t(w % kBanks)].insert(w);
        }
        for (const auto& b : in_bank)
          if (int(b.size()) > most)
            most = int(b.size()), where = "round " + std::to_string(round) + " warp " + std::to_string(warp) +
                                          " step " + std::to_string(step);
      }
  return most;
}

// (the access last, as __VA_ARGS__: a lambda's body may hold commas)
#define EXPECT_CONFLICT_FREE(what, count, steps, ...)                                     \
  do {                                                                                    \
    std::string where_;                                                                   \
    const int ways_ = phase_ways((count), (steps), (__VA_ARGS__), where_);                \
    EXPECT_EQ(ways_, 1) << (what) << ": " << ways_ << "-way bank conflict at " << where_; \
  } while (0)

int64_t row_of(int64_t e, int64_t w) { return delta::split(e, w).row; }
int64_t col_of(int64_t e, int64_t w) { return delta::split(e, w).col; }

// A tensor-core tile's element (row, col) of `bytes` as the 4-byte word that holds it.
int64_t tc_word(int row, int col, int width, int bytes) { return int64_t(tc_at(row, col, width, bytes)) * bytes / 4; }

struct Shape {
  int64_t C, Dk, Dv;
  std::string str() const {
    return "C=" + std::to_string(C) + " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv);
  }
};
std::vector<Shape> shapes(int64_t max_d) {
  std::vector<Shape> out;
  for (int64_t C : {32, 64})
    for (int64_t Dk : {32, 64, 128})
      for (int64_t Dv : {32, 64, 128})
        if (Dk <= max_d && Dv <= max_d) out.push_back({C, Dk, Dv});
  return out;
}

// ---- float32 forward: chunk_factors (K [C, padded_pitch(Dk)], M [C, C]) ----
TEST(DeltaNetLayout, ForwardFloat32TilesAreConflictFree) {
  for (const Shape& s : shapes(128)) {
    SCOPED_TRACE(s.str());
    const int64_t n = s.C, C = s.C, Dk = s.Dk, pk = padded_pitch(Dk);
    // chunk_factors: K copied in, a warp along a row
    EXPECT_CONFLICT_FREE("K copy", n * Dk, 1, [&](int64_t e, int64_t) { return row_of(e, Dk) * pk + col_of(e, Dk); });
    // gram_kkt, causal_scores_qk: k_i . k_j, lanes on consecutive j (a column run of K), one or two i
    EXPECT_CONFLICT_FREE("K K^T, k_i", n * n, Dk, [&](int64_t e, int64_t x) { return row_of(e, n) * pk + x; });
    EXPECT_CONFLICT_FREE("K K^T, k_j", n * n, Dk, [&](int64_t e, int64_t x) { return col_of(e, n) * pk + x; });
    EXPECT_CONFLICT_FREE("M write", n * n, 1, [&](int64_t e, int64_t) { return row_of(e, n) * C + col_of(e, n); });
    // solve_unit_lower: lane m at step (a, b) reads M[i][j], i = m + 1 + a, j = m + b < i
    EXPECT_CONFLICT_FREE("solve, M", n, n * n, [&](int64_t m, int64_t step) -> int64_t {
      const int64_t i = m + 1 + step / n, j = m + step % n;
      return i < n && j < i ? i * C + j : -1;
    });
  }
}

// ---- float32 backward: chunk_backward_inputs, chunk_backward_states, chunk_backward_grads ----
TEST(DeltaNetLayout, BackwardFloat32TilesAreConflictFree) {
  for (const Shape& s : shapes(128)) {
    SCOPED_TRACE(s.str());
    const int64_t n = s.C, C = s.C, Dk = s.Dk, Dv = s.Dv, nv = delta::kStateColumns;
    // chunk_backward_inputs: dO [C, Dv] unpadded, read along rows
    EXPECT_CONFLICT_FREE("du0, dO", n * Dv, n, [&](int64_t e, int64_t a) -> int64_t {
      const int64_t m = row_of(e, Dv) + a;
      return m < n ? m * Dv + col_of(e, Dv) : -1;
    });
    EXPECT_CONFLICT_FREE("hq, dO", Dk * Dv, n, [&](int64_t e, int64_t i) { return i * Dv + col_of(e, Dv); });
    // chunk_backward_states: K [C, padded_pitch(Dk)], A^-1 [C, padded_pitch(C)], dS [Dk, nv], dU', dr [C, nv]
    const int64_t pk = padded_pitch(Dk), pc = padded_pitch(C);
    EXPECT_CONFLICT_FREE("Ks copy", n * Dk, 1, [&](int64_t e, int64_t) { return row_of(e, Dk) * pk + col_of(e, Dk); });
    EXPECT_CONFLICT_FREE("As copy", n * n, 1, [&](int64_t e, int64_t) { return row_of(e, n) * pc + col_of(e, n); });
    EXPECT_CONFLICT_FREE("dU', K", n * nv, Dk, [&](int64_t e, int64_t t) { return row_of(e, nv) * pk + t; });
    EXPECT_CONFLICT_FREE("dU', dS", n * nv, Dk, [&](int64_t e, int64_t t) { return t * nv + col_of(e, nv); });
    EXPECT_CONFLICT_FREE("X, A^-1", n * nv, n, [&](int64_t e, int64_t a) -> int64_t {
      const int64_t i = row_of(e, nv), m = i + a;
      return m < n ? m * pc + i : -1;
    });
    EXPECT_CONFLICT_FREE("X, dU'", n * nv, n, [&](int64_t e, int64_t a) -> int64_t {
      const int64_t m = row_of(e, nv) + a;
      return m < n ? m * nv + col_of(e, nv) : -1;
    });
    EXPECT_CONFLICT_FREE("dS0, K", Dk * nv, n, [&](int64_t e, int64_t i) { return i * pk + row_of(e, nv); });
    EXPECT_CONFLICT_FREE("dS0, dr", Dk * nv, n, [&](int64_t e, int64_t i) { return i * nv + col_of(e, nv); });
    // chunk_backward_grads: dS1 and S0 [Dk, padded_pitch(Dv)], E [C, padded_pitch(max(Dk, Dv))],
    // P [Dk, padded_pitch(kLanes)], U' [C, padded_pitch(Dv)], M and N [C, padded_pitch(C)]
    const int64_t pv = padded_pitch(Dv), pw = padded_pitch(std::max(Dk, Dv)), pl = padded_pitch(delta::kLanes);
    EXPECT_CONFLICT_FREE("SS, Us copy", Dk * Dv, 1,
                         [&](int64_t e, int64_t) { return row_of(e, Dv) * pv + col_of(e, Dv); });
    EXPECT_CONFLICT_FREE("wy_backward, E", n * Dv, 1,
                         [&](int64_t e, int64_t) { return row_of(e, Dv) * pw + col_of(e, Dv); });
    EXPECT_CONFLICT_FREE("E row sums", n, std::max(Dk, Dv), [&](int64_t i, int64_t j) { return i * pw + j; });
    EXPECT_CONFLICT_FREE("U' dS1^T, dS1", n * Dk, Dv, [&](int64_t e, int64_t j) { return col_of(e, Dk) * pv + j; });
    EXPECT_CONFLICT_FREE("state_pass_backward, E", n * Dk, 1,
                         [&](int64_t e, int64_t) { return row_of(e, Dk) * pw + col_of(e, Dk); });
    EXPECT_CONFLICT_FREE("<dS1, S0>, dS1", Dk * delta::kLanes, (Dv + 31) / 32, [&](int64_t e, int64_t a) -> int64_t {
      const int64_t j = col_of(e, delta::kLanes) + delta::kLanes * a;
      return j < Dv ? row_of(e, delta::kLanes) * pv + j : -1;
    });
    EXPECT_CONFLICT_FREE("P write", Dk * delta::kLanes, 1,
                         [&](int64_t e, int64_t) { return row_of(e, delta::kLanes) * pl + col_of(e, delta::kLanes); });
    EXPECT_CONFLICT_FREE("P row sums", Dk, delta::kLanes, [&](int64_t t, int64_t l) { return t * pl + l; });
    EXPECT_CONFLICT_FREE("dO S0^T, S0", n * Dk, Dv, [&](int64_t e, int64_t j) { return col_of(e, Dk) * pv + j; });
    EXPECT_CONFLICT_FREE("dO U'^T, U'", n * n, Dv, [&](int64_t e, int64_t m) { return col_of(e, n) * pv + m; });
    EXPECT_CONFLICT_FREE("M, N write", n * n, 1, [&](int64_t e, int64_t) { return row_of(e, n) * pc + col_of(e, n); });
    EXPECT_CONFLICT_FREE("dG, N rows", n, n, [&](int64_t i, int64_t j) { return j < i ? i * pc + j : -1; });
    EXPECT_CONFLICT_FREE("dG, N columns", n, n, [&](int64_t i, int64_t m) { return m > i ? m * pc + i : -1; });
    EXPECT_CONFLICT_FREE("M K, M", n * Dk, n,
                         [&](int64_t e, int64_t j) { return j <= row_of(e, Dk) ? row_of(e, Dk) * pc + j : -1; });
    EXPECT_CONFLICT_FREE("M^T Q, M", n * Dk, n,
                         [&](int64_t e, int64_t m) { return m >= row_of(e, Dk) ? m * pc + row_of(e, Dk) : -1; });
    // gram_solve_backward: dLT written down a column (lanes on consecutive j), then read along rows
    EXPECT_CONFLICT_FREE("dLT write", n * n, 1, [&](int64_t e, int64_t) { return col_of(e, n) * pc + row_of(e, n); });
    EXPECT_CONFLICT_FREE("F, N' along rows", n * n, 1,
                         [&](int64_t e, int64_t) { return row_of(e, n) * pc + col_of(e, n); });
    EXPECT_CONFLICT_FREE("dbeta, N' columns", n, n, [&](int64_t i, int64_t j) { return j < i ? j * pc + i : -1; });
    EXPECT_CONFLICT_FREE("dG, N' rows", n, n, [&](int64_t i, int64_t m) { return m > i ? i * pc + m : -1; });
    EXPECT_CONFLICT_FREE("(F + F^T) K, F", n * Dk, n, [&](int64_t e, int64_t m) {
      const int64_t i = row_of(e, Dk);
      return m < i ? m * pc + i : m > i ? i * pc + m : -1;
    });
  }
}

// The 16-byte groups that the 8-row phases of every fragment load and store of a [rows, width] tile
// of `bytes` touch (chunk_layout.h): rows from multiples of 8, 16-byte runs from every 16-byte
// aligned column; the most runs in one group (1: conflict-free). pitch: the tile's row pitch.
int fragment_ways(int rows, int width, int bytes, int (*pitch)(int, int)) {
  int most = 0;
  for (int row0 = 0; row0 + 8 <= rows; row0 += 8)
    for (int col = 0; col < width; col += 16 / bytes) {
      std::array<int, 8> runs{};
      for (int r = 0; r < 8; ++r) ++runs[size_t(((row0 + r) * pitch(width, bytes) + col) * bytes / 16 % 8)];
      most = std::max(most, *std::max_element(runs.begin(), runs.end()));
    }
  return most;
}

// ---- the tensor-core paths: chunk_factors_tc, chunk_outputs_tc, chunk_backward_inputs_tc,
// chunk_backward_grads_tc (operand tiles of bf16 or tf32, float staging tiles, chunk::tc_pitch) ----
TEST(DeltaNetLayout, TensorCoreTilesAreConflictFree) {
  for (const int b : {2, 4}) {
    for (const Shape& s : shapes(128)) {
      SCOPED_TRACE(s.str() + " bytes " + std::to_string(b));
      const delta::Dims d{1, s.C, 1, s.Dk, s.Dv, s.C};
      const int depth = delta::tc_depth(d), n = int(s.C);
      // the forward: K, Q, diag(gamma) Q [kChunk, depth]; P, U' [kChunk, kChunk]; S0 [depth, kChunk]
      EXPECT_EQ(fragment_ways(kChunk, depth, b, chunk::tc_pitch), 1) << "operand tiles [kChunk, depth]";
      EXPECT_EQ(fragment_ways(depth, kChunk, b, chunk::tc_pitch), 1) << "operand tile [depth, kChunk]";
      EXPECT_CONFLICT_FREE("K, Q fill", kChunk * depth, 1, [&](int64_t e, int64_t) {
        return tc_word(int(row_of(e, depth)), int(col_of(e, depth)), depth, b);
      });
      EXPECT_CONFLICT_FREE("S0 fill", depth * kChunk, 1,
                           [&](int64_t e, int64_t) { return tc_word(int(e / kChunk), int(e % kChunk), kChunk, b); });
      EXPECT_CONFLICT_FREE("Gram, scores staging", n * n, 1, [&](int64_t e, int64_t) {
        return tc_word(int(row_of(e, n)), int(col_of(e, n)), kChunk, 4);
      });
      const int nv = int(std::min<int64_t>(kChunk, s.Dv));
      EXPECT_CONFLICT_FREE("O staging", n * nv, 1, [&](int64_t e, int64_t) {
        return tc_word(int(row_of(e, nv)), int(col_of(e, nv)), kChunk, 4);
      });
    }
    for (const Shape& s : shapes(kChunk)) {
      SCOPED_TRACE(s.str() + " bytes " + std::to_string(b));
      const int n = int(s.C);
      // the backward: every operand [kChunk, kChunk] filled by fill_operand, every staging tile
      // [kChunk, kChunk] stored as fragments and walked along rows by the epilogues
      EXPECT_EQ(fragment_ways(kChunk, kChunk, b, chunk::tc_pitch), 1) << "operand tiles";
      EXPECT_CONFLICT_FREE("fill_operand", kChunk * kChunk, 1,
                           [&](int64_t e, int64_t) { return tc_word(int(e / kChunk), int(e % kChunk), kChunk, b); });
      EXPECT_CONFLICT_FREE("epilogues", kChunk * kChunk, 1,
                           [&](int64_t e, int64_t) { return tc_word(int(e / kChunk), int(e % kChunk), kChunk, 4); });
      // one thread per row: staging_row_sum along skewed_col, and the column sums of N and N'
      EXPECT_CONFLICT_FREE("staging_row_sum", n, kChunk, [&](int64_t i, int64_t step) {
        return tc_word(int(i), delta::skewed_col(int(i), int(step)), kChunk, 4);
      });
      EXPECT_CONFLICT_FREE("N, N' columns", n, n,
                           [&](int64_t i, int64_t m) { return tc_word(int(m), int(i), kChunk, 4); });
      // wy_backward's E over a staging tile: its rows fit
      const int64_t pw = padded_pitch(std::max(s.Dk, s.Dv));
      EXPECT_LE(s.C * pw * 4, delta::backward_tc_staging_bytes());
    }
    EXPECT_EQ(fragment_ways(kChunk, kChunk, 4, chunk::tc_pitch), 1) << "staging tiles";
  }
}

// chunk_backward_grads_tc's staging tiles that go over the operand tiles of dS1 and S0 fit there and
// start 128-byte aligned (every fragment pointer then 32-byte aligned, as chunk_layout.h's tests check).
TEST(DeltaNetLayout, StagingOverDeadOperandsFits) {
  for (const int b : {2, 4}) {
    const int own = delta::backward_grads_tc_own_staging(b), over = 3 - own;
    SCOPED_TRACE("bytes " + std::to_string(b));
    EXPECT_GE(own, 1) << "wy_backward's E needs a staging tile before round 1";
    EXPECT_LE(over * delta::backward_tc_staging_bytes(), 2 * delta::backward_tc_operand_bytes(b));
    EXPECT_EQ(delta::backward_tc_staging_bytes() % 128, 0);
    EXPECT_EQ(delta::backward_tc_operand_bytes(b) % 128, 0);
    // round 3's Q goes over the last staging tile
    EXPECT_LE(delta::backward_tc_operand_bytes(b), delta::backward_tc_staging_bytes());
  }
  EXPECT_EQ(delta::backward_grads_tc_own_staging(4), 1);  // tf32: two over dS1 and S0
  EXPECT_EQ(delta::backward_grads_tc_own_staging(2), 2);  // bf16: one
}

// At chunk size 16 a warp writes two 16-word rows of a [C, C] tile (A^-1, M and N in the float32
// backward, the forward's Gram and score staging on the tensor cores): rows 17 (68) words apart
// overlap in one bank, a 2-way conflict, the cost of the short chunk (the default is 64).
TEST(DeltaNetLayout, ChunkSize16RowRunsAre2Way) {
  std::string where;
  const int64_t n = 16, pc = padded_pitch(n);
  EXPECT_EQ(phase_ways(
                n * n, 1, [&](int64_t e, int64_t) { return row_of(e, n) * pc + col_of(e, n); }, where),
            2);
  EXPECT_EQ(phase_ways(
                n * n, 1, [&](int64_t e, int64_t) { return tc_word(int(row_of(e, n)), int(col_of(e, n)), kChunk, 4); },
                where),
            2);
}

// The checks can fail: without delta::padded_pitch the column run of S0 in dO S0^T is a 32-way
// conflict; summing a staging row in column order instead of skewed_col's is 4-way (its pitch, 68
// words, is 4 mod 32: 8 banks); and a tensor-core pitch of an even number of 16-byte units (8 floats of padding
// instead of 4) puts two runs of a fragment phase in one group.
TEST(DeltaNetLayout, TheCheckSeesConflicts) {
  std::string where;
  const int64_t n = 64, Dk = 64, Dv = 64;
  EXPECT_EQ(phase_ways(
                n * Dk, Dv, [&](int64_t e, int64_t j) { return col_of(e, Dk) * Dv + j; }, where),
            32);
  EXPECT_EQ(phase_ways(
                n, kChunk, [&](int64_t i, int64_t step) { return tc_word(int(i), int(step), kChunk, 4); }, where),
            4);
  EXPECT_EQ(fragment_ways(kChunk, kChunk, 4, [](int width, int) { return width + 8; }), 2);
}

}  // namespace
}  // namespace linattn::cuda
