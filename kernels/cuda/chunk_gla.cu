// The chunk-parallel linear attention and GLA passes (kernels/cuda/chunk_gla.h): one thread block per
// (tile, 64-column tile, head) for the intra-chunk work, a tile being one chunk of one sequence
// (kernels/sequences.h: the block finds it from its index, an idle tile returns at once), one thread
// per (sequence, head) state entry for the sequential state pass. Thread and shared-memory layouts:
// kernels/cuda/chunk_layout.h (every tile has an odd pitch and every product reads broadcasts, row
// runs or column runs: no bank conflicts).
//
// GLA's gates, numerically safe by sub-chunks of kSub = 16 tokens. G is the in-chunk inclusive
// cumulative sum of the log-gates (<= 0), so it does not increase down the chunk. A score of rows
// i >= j needs e^(G_i − G_j) (per key column d, omitted), which is <= 1, but e^(G_i) and e^(−G_j) alone
// overflow once the decay is strong (G reaches −2,560 at 64 tokens of log-gate −40). For i in
// sub-chunk I and j in an earlier sub-chunk J < I, with b_I = G at I's first row and c_J = G at J's
// last row (c_J >= b_I: J ends before I starts):
//     e^(G_i − G_j) = e^(G_i − b_I) · e^(b_I − c_J) · e^(c_J − G_j),
// three factors that are each <= 1, so none overflows; when one underflows the product is smaller
// still and negligible next to the diagonal's e^0 = 1 terms. So Q̃_i = q_i e^(G_i − b_I) and
// K̃_j = k_j e^(c_J − G_j) are formed once per row, F_IJ = e^(b_I − c_J) once per sub-chunk pair, and
// the off-diagonal score blocks are plain products Σ_d Q̃_id F_IJd K̃_jd. On the diagonal sub-chunks
// (I = J) the factor is taken pairwise, e^(G_i − G_j) with j <= i, <= 1 as well. Rows past the
// sequence's end (T not a multiple of the chunk) hold zeros and repeat the last valid row's G (a
// log-gate of 0), so G stays monotone there and every exponent above stays <= 0.
//
// Tensor cores (Problem::precision bf16 or tf32): the same kernels, templated on the precision, run
// their matrix products on WMMA fragments with float32 accumulators (chunk_layout.h's tc_* layouts).
// Every operand is formed in float32 exactly as the f32 path forms it (the feature map, GLA's gated
// rows Q̃ and K̃, and for an off-diagonal sub-chunk pair I > J the row K̃_j F_IJ or Q̃_i F_IJ, so that
// the pair's block is a plain product), then rounded to the fragment's type in shared memory. GLA's
// diagonal sub-chunk blocks need the pairwise e^(G_i − G_j) and stay on the CUDA cores in float32
// (in dq and dk from dP as its operand holds it: dP is rounded once, for every product that uses it).
// The products' results reach each thread's outputs through a float staging tile, and from there the
// f32 path's code takes over. float32 runs on the CUDA cores, as before. Every tensor-core kernel
// fits two blocks on an SM (H100: at most 128 registers a thread and ~113 KiB of shared memory a
// block); at one block per SM (176 registers, 124 KiB before) GLA ran slower in bf16 than in float32.
#include <math.h>
#include <mma.h>

#include <cuda_bf16.h>
#include <type_traits>

#include "core/cuda/runtime.h"
#include "kernels/cuda/chunk_gla.h"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda::chunk {

namespace {

namespace wmma = nvcuda::wmma;

// How a precision stores its operand tiles: float32 in the CUDA-core layout (chunk_layout.h's `at`);
// bf16 and tf32 in the fragment layout (tc_at), with their WMMA fragment shapes.
template <MatmulPrecision P>
struct Operand {
  using Elem = float;
  static constexpr bool kTensorCores = false;
  struct Acc {};  // no fragments
  __device__ static int at(int row, int col, int width) { return chunk::at(row, col, width); }
  __device__ static constexpr int size(int rows, int width) { return words(rows, width); }
  __device__ static float from(float x) { return x; }
  __device__ static float to_float(float x) { return x; }
};
template <>
struct Operand<MatmulPrecision::bf16> {
  using Elem = __nv_bfloat16;
  using Frag = __nv_bfloat16;
  static constexpr int kK = 16;  // a step of the contracted dimension
  static constexpr bool kTensorCores = true;
  using Acc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kK, float>;
  __device__ static int at(int row, int col, int width) { return tc_at(row, col, width, 2); }
  __device__ static constexpr int size(int rows, int width) { return tc_bytes(rows, width, 2) / 2; }
  __device__ static Elem from(float x) { return __float2bfloat16(x); }
  __device__ static float to_float(Elem x) { return __bfloat162float(x); }
};
template <>
struct Operand<MatmulPrecision::tf32> {
  using Elem = float;
  using Frag = wmma::precision::tf32;
  static constexpr int kK = 8;
  static constexpr bool kTensorCores = true;
  using Acc = wmma::fragment<wmma::accumulator, kFrag, kFrag, kK, float>;
  __device__ static int at(int row, int col, int width) { return tc_at(row, col, width, 4); }
  __device__ static constexpr int size(int rows, int width) { return tc_bytes(rows, width, 4) / 4; }
  __device__ static float from(float x) { return wmma::__float_to_tf32(x); }
  __device__ static float to_float(float x) { return x; }
};

template <class L>
constexpr bool kRowMajor = std::is_same_v<L, wmma::row_major>;

// The 16-row block `block` of a tile A stored row_major (A[m * ld + k]) or col_major (A[k * ld + m]),
// and the 16-column block of a tile B stored row_major (B[k * ld + n]) or col_major (B[n * ld + k]).
template <class L, class E>
__device__ const E* row_block(const E* A, int ld, int block) {
  return A + (kRowMajor<L> ? block * kFrag * ld : block * kFrag);
}
template <class L, class E>
__device__ const E* col_block(const E* B, int ld, int block) {
  return B + (kRowMajor<L> ? block * kFrag : block * kFrag * ld);
}

// acc += a b over `depth` (a multiple of the step) for a = row_block(A), b = col_block(B): one warp.
template <MatmulPrecision P, class LA, class LB>
__device__ void mac(typename Operand<P>::Acc& acc, const typename Operand<P>::Elem* a, int lda,
                    const typename Operand<P>::Elem* b, int ldb, int depth) {
  using Op = Operand<P>;
#pragma unroll 1
  for (int k = 0; k < depth; k += Op::kK) {
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, Op::kK, typename Op::Frag, LA> fa;
    wmma::fragment<wmma::matrix_b, kFrag, kFrag, Op::kK, typename Op::Frag, LB> fb;
    wmma::load_matrix_sync(fa, a + (kRowMajor<LA> ? k : k * lda), unsigned(lda));
    wmma::load_matrix_sync(fb, b + (kRowMajor<LB> ? k * ldb : k), unsigned(ldb));
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// f[t] += a b_t over `depth` for the warp's two column blocks b_t = col_block(B, ldb, frag_col(warp, t)),
// each step's A fragment loaded once for both. (Only where it helps ptxas: at chunk_state_kernel's
// low register count it avoids a spill; in the larger kernels the two separate macs allocate better.)
template <MatmulPrecision P, class LA, class LB>
__device__ void mac2(typename Operand<P>::Acc (&f)[2], const typename Operand<P>::Elem* a, int lda,
                     const typename Operand<P>::Elem* B, int ldb, int depth) {
  using Op = Operand<P>;
  const int w = threadIdx.x / 32;
  const typename Op::Elem* b[2] = {col_block<LB>(B, ldb, frag_col(w, 0)), col_block<LB>(B, ldb, frag_col(w, 1))};
  for (int k = 0; k < depth; k += Op::kK) {
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, Op::kK, typename Op::Frag, LA> fa;
    wmma::load_matrix_sync(fa, a + (kRowMajor<LA> ? k : k * lda), unsigned(lda));
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, Op::kK, typename Op::Frag, LB> fb;
      wmma::load_matrix_sync(fb, b[t] + (kRowMajor<LB> ? k * ldb : k), unsigned(ldb));
      wmma::mma_sync(f[t], fa, fb, f[t]);
    }
  }
}

template <class Acc>
__device__ void zero(Acc (&f)[2]) {
  wmma::fill_fragment(f[0], 0.0f);
  wmma::fill_fragment(f[1], 0.0f);
}

// out[r][s] = entry (tile_row, tile_col) of the block's 64 x 64 result, which the warps hold as
// fragments (warp w: row block frag_row(w), column blocks frag_col(w, t)), through the float staging
// tile [kChunk, kTileCols] (tc layout). The staging tile may overlay operands: every warp is done
// with them at the first barrier, and done reading the staging tile at the last.
template <class Acc>
__device__ void fragments_to_threads(float (&out)[kRowsPerThread][kColsPerThread], const Acc (&f)[2], float* staging) {
  const int w = threadIdx.x / 32;
  __syncthreads();
#pragma unroll
  for (int t = 0; t < 2; ++t)
    wmma::store_matrix_sync(staging + tc_at(kFrag * frag_row(w), kFrag * frag_col(w, t), kTileCols, 4), f[t],
                            unsigned(tc_pitch(kTileCols, 4)), wmma::mem_row_major);
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s)
      out[r][s] = staging[tc_at(tile_row(threadIdx.x, r), tile_col(threadIdx.x, s), kTileCols, 4)];  // row runs
  __syncthreads();
}

// A product's fragments f into this thread's share (fragments_to_threads): gated, the off-diagonal
// sub-chunk blocks (`off`); otherwise the whole product, the diagonal blocks included (`diag`).
// (Not a choice between the two arrays' references: that made nvcc spill.)
template <class Acc>
__device__ __forceinline__ void fragments_to_part(float (&off)[kRowsPerThread][kColsPerThread],
                                                  float (&diag)[kRowsPerThread][kColsPerThread], const Acc (&f)[2],
                                                  float* staging, bool gated) {
  float part[kRowsPerThread][kColsPerThread];
  fragments_to_threads(part, f, staging);
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s) {
      if (gated)
        off[r][s] = part[r][s];
      else
        diag[r][s] = part[r][s];
    }
}

__device__ inline float phi_of(FeatureMap f, float x) {
  switch (f) {
    case FeatureMap::elu1: return x > 0 ? x + 1 : expf(x);
    case FeatureMap::relu: return x > 0 ? x : 0.0f;
    default: return x;
  }
}
__device__ inline float dphi_of(FeatureMap f, float x) {
  switch (f) {
    case FeatureMap::elu1: return x > 0 ? 1.0f : expf(x);
    case FeatureMap::relu: return x > 0 ? 1.0f : 0.0f;
    default: return 1.0f;
  }
}

// The chunk of tile `tile` (kernels/sequences.h) and head h: its first token t0 (a position of the
// flattened B * T), L valid tokens (<= kChunk; 0: an idle tile, which does nothing), the state slot
// at its start (Problem; an int, as the grid's tile count is, with_shared: fewer registers held).
struct ChunkAt {
  int64_t t0;
  int h, slot, L;
};
__device__ inline ChunkAt chunk_at(const Problem& p, int64_t tile, int64_t h) {
  if (!p.seqs.count) {  // the rows: tile_at's tiles, in 32-bit integers (ptxas calls a subroutine for a
                        // 64-bit division, and chunk_dqk_kernel, at its 128 registers, then spilled)
    const int per = int((p.T + kChunk - 1) / kChunk), b = int(tile) / per, c = int(tile) % per;
    const int64_t rest = p.T - int64_t(c) * kChunk;
    return {int64_t(b) * p.T + int64_t(c) * kChunk, int(h), int(tile) + b, int(rest < kChunk ? rest : kChunk)};
  }
  const Tile t = tile_at(p.seqs, p.T, kChunk, tile);
  const int64_t rest = t.seq.len - t.block * kChunk;
  const int L = t.idle ? 0 : int(rest < kChunk ? rest : kChunk);
  return {t.seq.start + t.block * kChunk, int(h), int(tile + t.number), L};
}
// Token t's row of a [B, T, H, ld] tensor (t a position of the flattened B * T).
__device__ inline int64_t row_at(const Problem& p, const ChunkAt& a, int64_t t, int64_t ld) {
  return (t * p.H + a.h) * ld;
}
// The state (or its gradient) of head h at slot s (Problem): [Dk, W].
__device__ inline int64_t state_at(const Problem& p, int64_t s, int64_t h) {
  return (s * p.H + h) * p.Dk * p.W;
}
// Sequence s's n chunks and its first state slot.
struct SequenceAt {
  Span seq;
  int64_t chunks, slot;
};
__device__ inline SequenceAt sequence_at(const Problem& p, int64_t s) {
  const Span seq = sequence(p.seqs, s, p.T);
  return {seq, (seq.len + kChunk - 1) / kChunk, tile_index(p.seqs, s, p.T, kChunk, 0) + s};
}

// tile [kChunk, width] = columns col0 .. col0 + width of the chunk's rows of x (ld, `cols` columns),
// through f, as precision P stores operands; rows past L and columns past `cols` are zeros.
template <MatmulPrecision P = MatmulPrecision::f32>
__device__ void load_rows(typename Operand<P>::Elem* tile, int width, Floats x, int64_t ld, int64_t cols,
                          int64_t col0, const Problem& p, const ChunkAt& a, FeatureMap f) {
  for (int e = threadIdx.x; e < kChunk * width; e += kThreads) {
    const int r = load_row(e, width), c = load_col(e, width);
    float val = 0;
    if (r < a.L && col0 + c < cols) val = phi_of(f, x[row_at(p, a, a.t0 + r, ld) + col0 + c]);
    tile[Operand<P>::at(r, c, width)] = Operand<P>::from(val);
  }
}

// tile [kChunk, width] = G's key columns d0 .. d0 + width of the chunk; rows past L repeat row L − 1
// (see the top), columns past Dk and an absent gate are zeros.
__device__ void load_gates(float* tile, int width, const Problem& p, const ChunkAt& a, int64_t d0) {
  for (int e = threadIdx.x; e < kChunk * width; e += kThreads) {
    const int r = load_row(e, width), c = load_col(e, width);
    const int rr = r < a.L ? r : a.L - 1;
    tile[at(r, c, width)] = p.G && d0 + c < p.Dk ? p.G[row_at(p, a, a.t0 + rr, p.Dk) + d0 + c] : 0.0f;
  }
}

// tile [rows, width] = S[r0 .., c0 ..] of a state S [Dk, W] as P stores operands; entries outside it are zeros.
template <MatmulPrecision P = MatmulPrecision::f32>
__device__ void load_state(typename Operand<P>::Elem* tile, int rows, int width, const float* S, const Problem& p,
                           int64_t r0, int64_t c0) {
  for (int e = threadIdx.x; e < rows * width; e += kThreads) {
    const int r = load_row(e, width), c = load_col(e, width);
    tile[Operand<P>::at(r, c, width)] =
        Operand<P>::from(r0 + r < p.Dk && c0 + c < p.W ? S[(r0 + r) * p.W + c0 + c] : 0.0f);
  }
}

// The operand tiles of GLA's off-diagonal sub-chunk pairs: pairs [kPairs * kSub, width], row
// pair_index(I, J) * kSub + u = X̃[K * kSub + u] ⊙ F[I * kSubs + J] for I > J, where K = J (keys: K̃_j
// F_IJ, j in J, K̃_j = x_j e^(c_J − G_j)) or K = I (queries: Q̃_i F_IJ, i in I, Q̃_i = x_i e^(G_i − b_I));
// X, G [kChunk, width] and F [kSubs * kSubs, width] in float32. X̃ is formed here, as
// sub_chunk_scalings forms it (the same float32 values), so that no tile has to hold it.
template <MatmulPrecision P>
__device__ void pair_operands(typename Operand<P>::Elem* pairs, const float* X, const float* G, const float* F,
                              int width, bool keys) {
#pragma unroll 2
  for (int e = threadIdx.x; e < kPairs * kSub * width; e += kThreads) {
    const int row = load_row(e, width), d = load_col(e, width), pair = row / kSub, u = row % kSub;
    const int I = pair_row(pair), J = pair_col(pair), x = (keys ? J : I) * kSub + u;
    const float g = G[at(x, d, width)];
    const float xt = X[at(x, d, width)] * expf(keys ? G[at(J * kSub + kSub - 1, d, width)] - g
                                                    : g - G[at(I * kSub, d, width)]);
    pairs[Operand<P>::at(row, d, width)] = Operand<P>::from(xt * F[at(I * kSubs + J, d, width)]);
  }
}

// dst [rows, width] = src [rows, width] (float32, CUDA-core layout) as P's operand.
template <MatmulPrecision P>
__device__ void to_operand(typename Operand<P>::Elem* dst, const float* src, int rows, int width) {
#pragma unroll 2
  for (int e = threadIdx.x; e < rows * width; e += kThreads) {
    const int r = load_row(e, width), c = load_col(e, width);
    dst[Operand<P>::at(r, c, width)] = Operand<P>::from(src[at(r, c, width)]);
  }
}

// The sub-chunk scalings of the top from G [kChunk, width] and rows q, k [kChunk, width]:
// from_first[i] = q_i e^(G_i − b_I), to_last[j] = k_j e^(c_J − G_j) (each skipped where null), and
// F [kSubs * kSubs, width]: row I * kSubs + J = e^(b_I − c_J) for I > J.
__device__ void sub_chunk_scalings(float* from_first, const float* q, float* to_last, const float* k, float* F,
                                   const float* G, int width) {
  for (int e = threadIdx.x; e < kChunk * width; e += kThreads) {
    const int r = load_row(e, width), d = load_col(e, width), first = r / kSub * kSub;
    const float g = G[at(r, d, width)];
    if (from_first) from_first[at(r, d, width)] = q[at(r, d, width)] * expf(g - G[at(first, d, width)]);
    if (to_last) to_last[at(r, d, width)] = k[at(r, d, width)] * expf(G[at(first + kSub - 1, d, width)] - g);
  }
  if (F)
    for (int e = threadIdx.x; e < kSubs * kSubs * width; e += kThreads) {
      const int pair = load_row(e, width), d = load_col(e, width), I = pair / kSubs, J = pair % kSubs;
      F[at(pair, d, width)] = I > J ? expf(G[at(I * kSub, d, width)] - G[at(J * kSub + kSub - 1, d, width)]) : 0.0f;
    }
}

// ---- the gates' in-chunk cumulative sums ----

// Block (tile, 64-column tile, head) as the intra-chunk kernels, thread (sub-chunk part,
// column): it sums its part's kSub rows, then adds the totals of the parts before it (so a chunk is
// summed by kSubs threads per column, and the grid has as many blocks as the intra-chunk kernels').
__global__ void __launch_bounds__(kThreads) gate_cumsum_kernel(float* G, Floats g, Problem p) {
  static_assert(kSubs * kTileCols == kThreads, "one thread per (sub-chunk, column)");
  __shared__ float total[kSubs][kTileCols];  // a warp's lanes: one part, 32 consecutive columns
  const int part = threadIdx.x / kTileCols, col = threadIdx.x % kTileCols;
  const int64_t d = int64_t(blockIdx.y) * kTileCols + col;
  const ChunkAt a = chunk_at(p, blockIdx.x, blockIdx.z);  // an idle tile: L = 0, nothing to sum
  float sum[kSub];  // the part's inclusive sums
  float acc = 0;
#pragma unroll
  for (int u = 0; u < kSub; ++u) {
    const int r = part * kSub + u;
    if (r < a.L && d < p.Dk) acc += g[row_at(p, a, a.t0 + r, p.Dk) + d];
    sum[u] = acc;
  }
  total[part][col] = acc;
  __syncthreads();
  float before = 0;
  for (int q = 0; q < part; ++q) before += total[q][col];
#pragma unroll
  for (int u = 0; u < kSub; ++u) {
    const int r = part * kSub + u;
    if (r < a.L && d < p.Dk) G[row_at(p, a, a.t0 + r, p.Dk) + d] = before + sum[u];
  }
}

// ---- a chunk's contribution to the state ----

// Forward (slot c + 1):  U_c = (φ(K) ⊙ e^(G_C − G))ᵀ V;  backward (slot c):  W_c = scale (φ(Q) ⊙ e^G)ᵀ dO.
// Block (tile, key tile * value tiles + value tile, head); out[d][n] for d = tile_row, n = tile_col.
template <bool kBackward, MatmulPrecision P>
__global__ void __launch_bounds__(kThreads) chunk_state_kernel(float* states, Problem p, Rows Y) {
  using Op = Operand<P>;
  using E = typename Op::Elem;
  LINATTN_DYNAMIC_SHARED(float, sm);
  E* sX = reinterpret_cast<E*>(sm);           // [kChunk, kTileCols] the gated key (query) rows
  E* sY = sX + Op::size(kChunk, kTileCols);   // [kChunk, kTileCols] the value (dO) rows
  const int64_t vtiles = (p.W + kTileCols - 1) / kTileCols;
  const int64_t d0 = int64_t(blockIdx.y) / vtiles * kTileCols, n0 = int64_t(blockIdx.y) % vtiles * kTileCols;
  const ChunkAt a = chunk_at(p, blockIdx.x, blockIdx.z);
  if (a.L == 0) return;  // an idle tile: the whole block
  float* S = states + state_at(p, kBackward ? a.slot : a.slot + 1, a.h);  // (here: without a spill at sm_90's tf32)
  const Floats x = kBackward ? p.q : p.k;
  for (int e = threadIdx.x; e < kChunk * kTileCols; e += kThreads) {
    const int r = load_row(e, kTileCols), d = load_col(e, kTileCols);
    float val = 0;
    if (r < a.L && d0 + d < p.Dk) {
      const int64_t at_r = row_at(p, a, a.t0 + r, p.Dk) + d0 + d;
      val = phi_of(p.phi, x[at_r]);
      if (p.G) {  // both exponents <= 0
        const float g = p.G[at_r], last = p.G[row_at(p, a, a.t0 + a.L - 1, p.Dk) + d0 + d];
        val *= expf(kBackward ? g : last - g);
      }
    }
    sX[Op::at(r, d, kTileCols)] = Op::from(val);
  }
  load_rows<P>(sY, kTileCols, Y.p, Y.ld, p.W, n0, p, a, FeatureMap::identity);
  __syncthreads();
  float acc[kRowsPerThread][kColsPerThread] = {};
  if constexpr (!Op::kTensorCores) {
    for (int j = 0; j < kChunk; ++j) {
      float y[kColsPerThread];
#pragma unroll
      for (int s = 0; s < kColsPerThread; ++s) y[s] = sY[at(j, tile_col(threadIdx.x, s), kTileCols)];  // row run
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const float xv = sX[at(j, tile_row(threadIdx.x, r), kTileCols)];  // broadcast
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) acc[r][s] += xv * y[s];
      }
    }
  } else {  // out = Xᵀ Y: A = Xᵀ, sX read col_major; B = Y row_major
    const int w = threadIdx.x / 32, ld = tc_pitch(kTileCols, sizeof(E));
    typename Op::Acc f[2];
    zero(f);
    mac2<P, wmma::col_major, wmma::row_major>(f, row_block<wmma::col_major>(sX, ld, frag_row(w)), ld, sY, ld, kChunk);
    fragments_to_threads(acc, f, sm);
  }
  const float f = kBackward ? p.scale : 1.0f;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s) {
      const int64_t d = d0 + tile_row(threadIdx.x, r), n = n0 + tile_col(threadIdx.x, s);
      if (d < p.Dk && n < p.W) S[d * p.W + n] = f * acc[r][s];
    }
}

// ---- the sequential state pass ----

// One thread per state entry (sequence, h, d, n), slots c of the sequence's own (Problem). Forward:
// S_0 = init, S_{c+1} = e^(G_C) S_c + U_c (U_c in slot c + 1). Reverse: dS_chunks = init,
// dS_c = e^(G_C) dS_{c+1} + W_c (W_c in slot c), slot c + 1 = dS_{c+1}. init [B, H, Dk, W]: the row's
// h0 (forward) or dht (reverse) where the sequence starts (ends) its row (kernels/sequences.h), else zeros.
template <bool kReverse>
__global__ void state_pass_kernel(float* states, Problem p, const float* init) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per = p.Dk * p.W;
  if (e >= p.sequences() * p.H * per) return;
  const int64_t h = e / per % p.H, d = e % per / p.W;
  const int64_t seq = e / (per * p.H);
  const SequenceAt at = sequence_at(p, seq);
  const int64_t NC = at.chunks, stride = p.H * per;  // from one slot to the next
  float* s = states + state_at(p, at.slot, h) + e % per;
  auto decay = [&](int64_t c) {
    const int64_t last = (c + 1) * kChunk < at.seq.len ? (c + 1) * kChunk - 1 : at.seq.len - 1;
    return p.G ? expf(p.G[((at.seq.start + last) * p.H + h) * p.Dk + d]) : 1.0f;
  };
  const int64_t row = kReverse ? final_state_row(p.seqs, seq, p.T) : initial_state_row(p.seqs, seq, p.T);
  float S = init && row >= 0 ? init[(row * p.H + h) * per + e % per] : 0.0f;
  if (!kReverse) {
    s[0] = S;
    for (int64_t c = 0; c < NC; ++c) s[(c + 1) * stride] = S = decay(c) * S + s[(c + 1) * stride];
  } else {
    for (int64_t c = NC - 1; c >= 0; --c) {
      const float inc = s[c * stride];
      s[(c + 1) * stride] = S;
      S = decay(c) * S + inc;
    }
    s[0] = S;
  }
}

// ---- outputs and dv ----

// Tensor cores: two blocks per SM, so at most 128 registers. float32: 0, no such bound (nvcc then
// writes none into the PTX, which stays as it was; ~110 registers, two blocks per SM already).
template <MatmulPrecision P>
constexpr int kApplyBlocksPerSm = Operand<P>::kTensorCores ? 2 : 0;

// Forward (kTransposed false), per chunk and value tile:  out_i = a (φ(q_i) ⊙ e^(G_i)) S_c + b Σ_{j<=i} A_ij v_j.
// dv (kTransposed true), from dS_{c+1}:  out_j = a (φ(k_j) ⊙ e^(G_C − G_j)) dS_{c+1} + b Σ_{i>=j} A_ij dO_i.
// A_ij = Σ_d φ(q_id) φ(k_jd) e^(G_id − G_jd), by sub-chunks (see the top). Block (tile, value tile, head).
template <bool kTransposed, MatmulPrecision P>
__global__ void __launch_bounds__(kThreads, kApplyBlocksPerSm<P>)
    chunk_apply_kernel(OutRows out, Problem p, Rows Y, const float* states, float a, float b) {
  using Op = Operand<P>;
  using E = typename Op::Elem;
  constexpr bool kTc = Op::kTensorCores;
  LINATTN_DYNAMIC_SHARED(float, sm);
  // The loop over key slices: [kChunk, kDepth] tiles, the state slice, the sub-chunk factors.
  float* sQ = sm;                            // φ(q)
  float* sK = sQ + words(kChunk, kDepth);    // φ(k)
  float* sG = sK + words(kChunk, kDepth);    // G
  float* sQt = sG + words(kChunk, kDepth);   // φ(q_i) e^(G_i − b_I)
  float* sKt = sQt + words(kChunk, kDepth);  // φ(k_j) e^(c_J − G_j)
  float* sS = sKt + words(kChunk, kDepth);   // [kDepth, kTileCols] the state slice
  float* sF = sS + words(kDepth, kTileCols); // [kSubs * kSubs, kDepth] e^(b_I − c_J)
  float* sE = sF + kSubs * kSubs * pitch(kDepth);  // [kSubs, kDepth] forward e^(b_I), dv e^(G_C − c_J)
  // Tensor cores: the loop's operands after those.
  E* oR = reinterpret_cast<E*>(reinterpret_cast<char*>(sm) + align128(kApplyLoopWords * 4));  // [kChunk, kDepth] the state term's rows
  E* oQ = oR + Op::size(kChunk, kDepth);     // [kChunk, kDepth] φ(q), gated φ(q_i) e^(G_i − b_I)
  E* oS = oQ + Op::size(kChunk, kDepth);     // [kDepth, kTileCols] the state slice
  E* oK = oS + Op::size(kDepth, kTileCols);  // [kChunk, kDepth] φ(k), gated the pairs [kPairs * kSub, kDepth]
  // After it: the masked scores and the value (dO) rows, over the loop's tiles.
  float* sA = sm;                         // [kChunk, kChunk]
  float* sY = sA + words(kChunk, kChunk);  // [kChunk, kTileCols]
  E* oA = reinterpret_cast<E*>(reinterpret_cast<char*>(sm) + align128(words(kChunk, kChunk) * 4));  // [kChunk, kChunk]
  E* oY = oA + Op::size(kChunk, kChunk);  // [kChunk, kTileCols]
  const int tid = threadIdx.x, w = tid / 32;
  const int64_t n0 = int64_t(blockIdx.y) * kTileCols;
  const ChunkAt at_c = chunk_at(p, blockIdx.x, blockIdx.z);
  if (at_c.L == 0) return;  // an idle tile: the whole block
  const bool gated = p.G != nullptr;
  const float* S = states + state_at(p, kTransposed ? at_c.slot + 1 : at_c.slot, at_c.h);
  float accA[kRowsPerThread][kColsPerThread] = {};  // A[i][j], i = tile_row, j = tile_col
  float accS[kRowsPerThread][kColsPerThread] = {};  // the state term of out[row][n], row = tile_row, n = tile_col
  typename Op::Acc fA[2], fS[2];                    // tensor cores: A (gated: off the diagonal blocks), the state term
  float diag[kColsPerThread][2] = {};               // tensor cores, gated: A[diag_row(tid, s, h)][tile_col(tid, s)]
  if constexpr (kTc) zero(fA), zero(fS);
  for (int64_t d0 = 0; d0 < p.Dk; d0 += kDepth) {
    load_rows(sQ, kDepth, p.q, p.Dk, p.Dk, d0, p, at_c, p.phi);
    load_rows(sK, kDepth, p.k, p.Dk, p.Dk, d0, p, at_c, p.phi);
    load_gates(sG, kDepth, p, at_c, d0);
    load_state(sS, kDepth, kTileCols, S, p, d0, n0);
    __syncthreads();
    if (gated) {
      sub_chunk_scalings(sQt, sQ, sKt, sK, sF, sG, kDepth);
      for (int e = tid; e < kSubs * kDepth; e += kThreads) {
        const int I = load_row(e, kDepth), d = load_col(e, kDepth);
        sE[at(I, d, kDepth)] = kTransposed ? expf(sG[at(kChunk - 1, d, kDepth)] - sG[at(I * kSub + kSub - 1, d, kDepth)])
                                           : expf(sG[at(I * kSub, d, kDepth)]);
      }
      __syncthreads();
    }
    const float* sR = kTransposed ? (gated ? sKt : sK) : (gated ? sQt : sQ);  // the state term's rows
    if constexpr (kTc) {
#pragma unroll 2
      for (int e = tid; e < kChunk * kDepth; e += kThreads) {
        const int i = load_row(e, kDepth), d = load_col(e, kDepth);
        oR[Op::at(i, d, kDepth)] = Op::from(sR[at(i, d, kDepth)] * (gated ? sE[at(i / kSub, d, kDepth)] : 1.0f));
        oQ[Op::at(i, d, kDepth)] = Op::from((gated ? sQt : sQ)[at(i, d, kDepth)]);
        if (!gated) oK[Op::at(i, d, kDepth)] = Op::from(sK[at(i, d, kDepth)]);
      }
      if (gated) pair_operands<P>(oK, sK, sG, sF, kDepth, true);
      to_operand<P>(oS, sS, kDepth, kTileCols);
      __syncthreads();
      // accS += R̃ S (both row_major); A += Q Kᵀ (K read col_major), gated only the blocks I > J as
      // Q̃_I (K̃_J F_IJ)ᵀ
      const int I = frag_row(w), ldc = tc_pitch(kDepth, sizeof(E)), lds = tc_pitch(kTileCols, sizeof(E));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int J = frag_col(w, t);
        mac<P, wmma::row_major, wmma::row_major>(fS[t], row_block<wmma::row_major>(oR, ldc, I), ldc,
                                                 col_block<wmma::row_major>(oS, lds, J), lds, kDepth);
        if (gated ? J < I : J <= I)
          mac<P, wmma::row_major, wmma::col_major>(fA[t], row_block<wmma::row_major>(oQ, ldc, I), ldc,
                                                   col_block<wmma::col_major>(oK, ldc, gated ? pair_index(I, J) : J),
                                                   ldc, kDepth);
      }
    }
    // CUDA cores: everything in float32
    if constexpr (!kTc)
      for (int d = 0; d < kDepth; ++d) {
        int j[kColsPerThread];
        float kk[kColsPerThread], kt[kColsPerThread], gj[kColsPerThread], st[kColsPerThread];
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) {
          j[s] = tile_col(tid, s);
          kk[s] = sK[at(j[s], d, kDepth)];  // column run
          kt[s] = gated ? sKt[at(j[s], d, kDepth)] : 0.0f;
          gj[s] = gated ? sG[at(j[s], d, kDepth)] : 0.0f;
          st[s] = sS[at(d, j[s], kTileCols)];  // row run (j[s] is also the value column n)
        }
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
          const int i = tile_row(tid, r), I = r / 2;  // i / kSub, as i = warp + 8 r
          const float rv = sR[at(i, d, kDepth)] * (gated ? sE[at(I, d, kDepth)] : 1.0f);
          const float q = sQ[at(i, d, kDepth)];  // broadcast
#pragma unroll
          for (int s = 0; s < kColsPerThread; ++s) accS[r][s] += rv * st[s];
          if (!gated) {
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s)
              if (j[s] <= i) accA[r][s] += q * kk[s];
          } else {
            const float qt = sQt[at(i, d, kDepth)], gi = sG[at(i, d, kDepth)];
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s) {
              const int J = j[s] / kSub;
              if (I > J) {
                accA[r][s] += qt * sF[at(I * kSubs + J, d, kDepth)] * kt[s];
              } else if (I == J && j[s] <= i) {
                accA[r][s] += q * kk[s] * expf(gi - gj[s]);
              }
            }
          }
        }
      }
    // Tensor cores, GLA: the diagonal sub-chunk blocks I = J on the CUDA cores, each thread only its
    // own entries of them, rows diag_row(tid, s, h) = diag_row(tid, 0, 0) + 32 s + 8 h of columns
    // tile_col(tid, s) = tile_col(tid, 0) + 32 s, every lane busy (j <= i does not depend on s).
    // Not unrolled, and addressed from four row starts: two blocks per SM leave 128 registers.
    if (kTc && gated) {
      const float* qi = sQ + at(diag_row(tid, 0, 0), 0, kDepth);  // two broadcasts (one per half-warp)
      const float* gi = sG + at(diag_row(tid, 0, 0), 0, kDepth);
      const float* kj = sK + at(tile_col(tid, 0), 0, kDepth);  // column runs
      const float* gj = sG + at(tile_col(tid, 0), 0, kDepth);
      bool lower[2];  // j <= i
#pragma unroll
      for (int h = 0; h < 2; ++h) lower[h] = tile_col(tid, 0) % kSub <= diag_row(tid, 0, h) % kSub;
#pragma unroll 1
      for (int d = 0; d < kDepth; ++d)
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) {
          const float k = kj[at(32 * s, d, kDepth)], g = gj[at(32 * s, d, kDepth)];
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (lower[h]) diag[s][h] += qi[at(32 * s + 8 * h, d, kDepth)] * k * expf(gi[at(32 * s + 8 * h, d, kDepth)] - g);
        }
    }
    __syncthreads();
  }
  if constexpr (kTc) {  // the fragments' share of A (masked to j <= i), the diagonal blocks, the state term
    fragments_to_threads(accA, fA, sm);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
      for (int s = 0; s < kColsPerThread; ++s) {
        if (tile_col(tid, s) > tile_row(tid, r)) accA[r][s] = 0.0f;
        if (tile_row(tid, r) == diag_row(tid, s, r % 2)) accA[r][s] += diag[s][r % 2];
      }
    fragments_to_threads(accS, fS, sm);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s)
      sA[at(tile_row(tid, r), tile_col(tid, s), kChunk)] = accA[r][s];  // zero above the diagonal already
  // out[row][n0 + tile_col] = a accS + b accY for row = tile_row(r), accY = Σ_m A[row][m] Y[m][n] (transposed: A[m][row])
  auto store = [&](int r, const float (&accY)[kColsPerThread]) {
    const int row = tile_row(tid, r);
    if (row >= at_c.L) return;
    float* o = out.p + row_at(p, at_c, at_c.t0 + row, out.ld);
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s) {
      const int64_t n = n0 + tile_col(tid, s);
      if (n >= out.cols) continue;
      const float val = a * accS[r][s] + b * accY[s];
      o[n] = out.accumulate ? o[n] + val : val;
    }
  };
  if constexpr (!kTc) {
    load_rows(sY, kTileCols, Y.p, Y.ld, p.W, n0, p, at_c, FeatureMap::identity);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = tile_row(tid, r);
      float acc[kColsPerThread] = {};
      for (int m = 0; m < kChunk; ++m) {
        const float am = kTransposed ? sA[at(m, row, kChunk)] : sA[at(row, m, kChunk)];  // broadcast
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) acc[s] += am * sY[at(m, tile_col(tid, s), kTileCols)];  // row run
      }
      store(r, acc);
    }
  } else {  // A row_major (transposed: read col_major), Y row_major
    load_rows<P>(oY, kTileCols, Y.p, Y.ld, p.W, n0, p, at_c, FeatureMap::identity);
    __syncthreads();
    to_operand<P>(oA, sA, kChunk, kChunk);
    __syncthreads();
    using LA = std::conditional_t<kTransposed, wmma::col_major, wmma::row_major>;
    const int lda = tc_pitch(kChunk, sizeof(E)), ldy = tc_pitch(kTileCols, sizeof(E));
    typename Op::Acc f[2];
    zero(f);
#pragma unroll
    for (int t = 0; t < 2; ++t)
      mac<P, LA, wmma::row_major>(f[t], row_block<LA>(oA, lda, frag_row(w)), lda,
                                  col_block<wmma::row_major>(oY, ldy, frag_col(w, t)), ldy, kChunk);
    float accY[kRowsPerThread][kColsPerThread];
    fragments_to_threads(accY, f, sm);
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) store(r, accY[r]);
  }
}

// ---- dq, dk and the in-chunk gate gradient ----

// Per chunk and key tile (columns n), with dP = dO Vᵀ masked to j <= i:
//   dq_in = scale (e^(G_in) Σ_m dO_im S_c[n][m] + Σ_{j<=i} dP_ij φ(k_jn) e^(G_in − G_jn))
//   dk_jn = e^(G_Cn − G_jn) Σ_m v_jm dS_{c+1}[n][m] + scale Σ_{i>=j} dP_ij φ(q_in) e^(G_in − G_jn)
// (forward: o_i = scale ((q_i ⊙ e^G_i) S_c + Σ_j A_ij v_j), S_{c+1} = e^G_C S_c + Σ_j (k_j ⊙ e^(G_C − G_j)) v_jᵀ),
// the gates by sub-chunks as in the forward but on the output column. Then dq, dk += them times φ';
// with gates, dg_t += Σ_{u>=t in the chunk} (q_u dq_u − k_u dk_u) and dg_chunks = the chunk's total.
template <MatmulPrecision P>
__global__ void __launch_bounds__(kThreads, 2) chunk_dqk_kernel(float* dq, float* dk, float* dg, float* dg_chunks,
                                                             Problem p, Rows dO, const float* states,
                                                             const float* dstates, bool write) {
  using Op = Operand<P>;
  using E = typename Op::Elem;
  constexpr bool kTc = Op::kTensorCores;
  LINATTN_DYNAMIC_SHARED(float, sm);
  // The loop over value slices: [kChunk, kDepth] tiles (tensor cores: as operands, oDO .. odS).
  float* sDO = sm;
  float* sV = sDO + words(kChunk, kDepth);
  float* sSc = sV + words(kChunk, kDepth);    // S_c[n][m], n a key column of the tile
  float* sdS = sSc + words(kChunk, kDepth);   // dS_{c+1}[n][m]
  E* oDO = reinterpret_cast<E*>(sm);
  E* oV = oDO + Op::size(kChunk, kDepth);
  E* oSc = oV + Op::size(kChunk, kDepth);
  E* odS = oSc + Op::size(kChunk, kDepth);
  // After it: [kChunk, kTileCols] tiles (chunk_layout.h's qk_tiles).
  constexpr QkTiles tiles = qk_tiles(kTc);
  float* sX = sm + tiles.X;    // φ(k), then φ(q)
  float* sXt = kTc ? nullptr : sm + tiles.Xt;  // float32: φ(k_j) e^(c_J − G_j), then φ(q_i) e^(G_i − b_I)
  float* sG = sm + tiles.G;    // G
  float* sF = sm + tiles.F;    // [kSubs * kSubs, kTileCols] e^(b_I − c_J)
  float* sDk = sm + tiles.Dk;  // Σ_m v_jm dS_{c+1}[n][m]
  float* sDG = sm + tiles.DG;  // q dq − k dk (with gates)
  // (Kept in shared memory rather than registers, so that two blocks fit on an SM without spills.)
  // dP masked [kChunk, kChunk]: float32 a tile there; tensor cores an operand after the tiles, read by
  // dq's and dk's products and by the diagonal sub-chunk blocks. Then, tensor cores, the operand φ(k)
  // (φ(q)), gated the pairs [kPairs * kSub, kTileCols], with the staging tile over it.
  char* const base = reinterpret_cast<char*>(sm);
  E* oP = kTc ? reinterpret_cast<E*>(base + tc_qk_p_offset()) : reinterpret_cast<E*>(sm + tiles.P);
  E* oX = reinterpret_cast<E*>(base + tc_qk_x_offset(sizeof(E)));
  float* staging = reinterpret_cast<float*>(oX);
  const int tid = threadIdx.x, w = tid / 32;
  const int64_t n0 = int64_t(blockIdx.y) * kTileCols;
  const ChunkAt at_c = chunk_at(p, blockIdx.x, blockIdx.z);
  if (at_c.L == 0) return;  // an idle tile: the whole block
  const bool gated = p.G != nullptr;
  const float* Sc = states + state_at(p, at_c.slot, at_c.h);
  const float* dS = dstates + state_at(p, at_c.slot + 1, at_c.h);
  float dP[kRowsPerThread][kColsPerThread] = {};  // [i][j]
  float Dq[kRowsPerThread][kColsPerThread] = {};  // Σ_m dO_im S_c[n][m]
  float Dk[kRowsPerThread][kColsPerThread] = {};  // [j][n]
  typename Op::Acc fP[2], fQ[2], fK[2];            // tensor cores: dP, Dq, Dk
  if constexpr (kTc) zero(fP), zero(fQ), zero(fK);
  for (int64_t m0 = 0; m0 < p.W; m0 += kDepth) {
    if constexpr (!kTc) {
      load_rows(sDO, kDepth, dO.p, dO.ld, p.W, m0, p, at_c, FeatureMap::identity);
      load_rows(sV, kDepth, p.v.p, p.v.ld, p.W, m0, p, at_c, FeatureMap::identity);
      load_state(sSc, kChunk, kDepth, Sc, p, n0, m0);
      load_state(sdS, kChunk, kDepth, dS, p, n0, m0);
      __syncthreads();
      for (int m = 0; m < kDepth; ++m) {
        float vj[kColsPerThread], sc[kColsPerThread], ds[kColsPerThread];
#pragma unroll
        for (int s = 0; s < kColsPerThread; ++s) {  // column runs
          const int j = tile_col(tid, s);
          vj[s] = sV[at(j, m, kDepth)], sc[s] = sSc[at(j, m, kDepth)], ds[s] = sdS[at(j, m, kDepth)];
        }
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
          const int i = tile_row(tid, r);
          const float o = sDO[at(i, m, kDepth)], v = sV[at(i, m, kDepth)];  // broadcasts
#pragma unroll
          for (int s = 0; s < kColsPerThread; ++s) {
            dP[r][s] += o * vj[s];
            Dq[r][s] += o * sc[s];
            Dk[r][s] += v * ds[s];
          }
        }
      }
    } else {  // dP = dO Vᵀ, Dq = dO S_cᵀ, Dk = V dSᵀ: the right operands read col_major
      load_rows<P>(oDO, kDepth, dO.p, dO.ld, p.W, m0, p, at_c, FeatureMap::identity);
      load_rows<P>(oV, kDepth, p.v.p, p.v.ld, p.W, m0, p, at_c, FeatureMap::identity);
      load_state<P>(oSc, kChunk, kDepth, Sc, p, n0, m0);
      load_state<P>(odS, kChunk, kDepth, dS, p, n0, m0);
      __syncthreads();
      const int ld = tc_pitch(kDepth, sizeof(E)), I = frag_row(w);
      using R = wmma::row_major;
      using C = wmma::col_major;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int J = frag_col(w, t);
        mac<P, R, C>(fP[t], row_block<R>(oDO, ld, I), ld, col_block<C>(oV, ld, J), ld, kDepth);
        mac<P, R, C>(fQ[t], row_block<R>(oDO, ld, I), ld, col_block<C>(oSc, ld, J), ld, kDepth);
        mac<P, R, C>(fK[t], row_block<R>(oV, ld, I), ld, col_block<C>(odS, ld, J), ld, kDepth);
      }
    }
    __syncthreads();
  }
  if constexpr (kTc) {
    fragments_to_threads(dP, fP, sm);
    fragments_to_threads(Dq, fQ, sm);
    fragments_to_threads(Dk, fK, sm);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
    for (int s = 0; s < kColsPerThread; ++s) {
      const int i = tile_row(tid, r), j = tile_col(tid, s);
      oP[Op::at(i, j, kChunk)] = Op::from(j <= i ? dP[r][s] : 0.0f);  // row runs
      sDk[at(i, j, kTileCols)] = Dk[r][s];  // here i is a token row and j a key column
    }
  load_rows(sX, kTileCols, p.k, p.Dk, p.Dk, n0, p, at_c, p.phi);
  load_gates(sG, kTileCols, p, at_c, n0);
  __syncthreads();
  if (gated) {
    sub_chunk_scalings(nullptr, nullptr, kTc ? nullptr : sXt, sX, sF, sG, kTileCols);
    __syncthreads();
  }
  const int ldp = tc_pitch(kChunk, sizeof(E)), ldx = tc_pitch(kTileCols, sizeof(E));

  // dq: rows i = tile_row (sub-chunk I = r / 2), key columns n = tile_col
  {
    float off[kRowsPerThread][kColsPerThread] = {}, diag[kRowsPerThread][kColsPerThread] = {};
    if constexpr (kTc) {  // Σ_{j<=i} dP_ij φ(k_j), gated Σ_{J<I} dP_IJ (K̃_J F_IJ): dP and K row_major
      if (gated)
        pair_operands<P>(oX, sX, sG, sF, kTileCols, true);
      else
        to_operand<P>(oX, sX, kChunk, kTileCols);
      __syncthreads();
      const int I = frag_row(w);
      typename Op::Acc f[2];
      zero(f);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int N = frag_col(w, t);
        if (!gated)
          mac<P, wmma::row_major, wmma::row_major>(f[t], row_block<wmma::row_major>(oP, ldp, I), ldp,
                                                   col_block<wmma::row_major>(oX, ldx, N), ldx, kFrag * (I + 1));
        else
          for (int J = 0; J < I; ++J)
            mac<P, wmma::row_major, wmma::row_major>(f[t], row_block<wmma::row_major>(oP, ldp, I) + J * kFrag, ldp,
                                                     col_block<wmma::row_major>(oX, ldx, N) + pair_index(I, J) * kFrag * ldx,
                                                     ldx, kFrag);
      }
      fragments_to_part(off, diag, f, staging, gated);
    }
    if (!kTc || gated)  // CUDA cores: everything in float32; with tensor cores the diagonal sub-chunks
#pragma unroll
      for (int J = 0; J < kSubs; ++J) {
        float tmp[kRowsPerThread][kColsPerThread] = {};
        for (int jj = 0; jj < kSub; ++jj) {
          const int j = J * kSub + jj;
          float kk[kColsPerThread], kt[kColsPerThread], gj[kColsPerThread];
#pragma unroll
          for (int s = 0; s < kColsPerThread; ++s) {  // row runs
            const int n = tile_col(tid, s);
            kk[s] = sX[at(j, n, kTileCols)];
            kt[s] = gated && !kTc ? sXt[at(j, n, kTileCols)] : 0.0f;
            gj[s] = gated ? sG[at(j, n, kTileCols)] : 0.0f;
          }
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            const int i = tile_row(tid, r), I = r / 2;
            if (I < J || j > i || (kTc && I != J)) continue;
            const float pij = Op::to_float(oP[Op::at(i, j, kChunk)]);  // broadcast
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s) {
              if (!gated)
                diag[r][s] += pij * kk[s];
              else if (I > J)
                tmp[r][s] += pij * kt[s];
              else
                diag[r][s] += pij * kk[s] * expf(sG[at(i, tile_col(tid, s), kTileCols)] - gj[s]);
            }
          }
        }
        if (gated && !kTc)
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s)
              if (r / 2 > J) off[r][s] += sF[at((r / 2) * kSubs + J, tile_col(tid, s), kTileCols)] * tmp[r][s];
      }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int i = tile_row(tid, r), first = r / 2 * kSub;
#pragma unroll
      for (int s = 0; s < kColsPerThread; ++s) {
        const int n = tile_col(tid, s);
        const float gi = sG[at(i, n, kTileCols)];
        const float inter = gated ? expf(gi) * Dq[r][s] : Dq[r][s];
        const float o = gated ? expf(gi - sG[at(first, n, kTileCols)]) * off[r][s] : 0.0f;
        const float dq1 = p.scale * (inter + o + diag[r][s]);
        float dG = 0;
        if (i < at_c.L && n0 + n < p.Dk) {
          const int64_t x = row_at(p, at_c, at_c.t0 + i, p.Dk) + n0 + n;
          if (dq) dq[x] = (write ? 0.0f : dq[x]) + dq1 * dphi_of(p.phi, p.q[x]);
          dG = phi_of(p.phi, p.q[x]) * dq1;
        }
        if (dg) sDG[at(i, n, kTileCols)] = dG;
      }
    }
  }
  __syncthreads();
  load_rows(sX, kTileCols, p.q, p.Dk, p.Dk, n0, p, at_c, p.phi);
  __syncthreads();
  if (gated && !kTc) {
    sub_chunk_scalings(sXt, sX, nullptr, nullptr, nullptr, sG, kTileCols);
    __syncthreads();
  }

  // dk: rows j = tile_row (sub-chunk J = r / 2), key columns n = tile_col
  {
    float off[kRowsPerThread][kColsPerThread] = {}, diag[kRowsPerThread][kColsPerThread] = {};
    if constexpr (kTc) {  // Σ_{i>=j} dP_ij φ(q_i), gated Σ_{I>J} dP_IJᵀ (Q̃_I F_IJ): dPᵀ read col_major
      if (gated)
        pair_operands<P>(oX, sX, sG, sF, kTileCols, false);
      else
        to_operand<P>(oX, sX, kChunk, kTileCols);
      __syncthreads();
      const int J = frag_row(w);
      typename Op::Acc f[2];
      zero(f);
      // dPᵀ's row block J over the columns i >= 16 J: rows i of dP from 16 J on, its columns from 16 J
      const E* pt = oP + J * kFrag * ldp + J * kFrag;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int N = frag_col(w, t);
        if (!gated)
          mac<P, wmma::col_major, wmma::row_major>(f[t], pt, ldp, col_block<wmma::row_major>(oX, ldx, N) + J * kFrag * ldx,
                                                   ldx, kChunk - kFrag * J);
        else
          for (int I = J + 1; I < kSubs; ++I)
            mac<P, wmma::col_major, wmma::row_major>(f[t], pt + (I - J) * kFrag * ldp, ldp,
                                                     col_block<wmma::row_major>(oX, ldx, N) + pair_index(I, J) * kFrag * ldx,
                                                     ldx, kFrag);
      }
      fragments_to_part(off, diag, f, staging, gated);
    }
    if (!kTc || gated)  // CUDA cores: everything in float32; with tensor cores the diagonal sub-chunks
#pragma unroll
      for (int I = 0; I < kSubs; ++I) {
        float tmp[kRowsPerThread][kColsPerThread] = {};
        for (int ii = 0; ii < kSub; ++ii) {
          const int i = I * kSub + ii;
          float qq[kColsPerThread], qt[kColsPerThread], gi[kColsPerThread];
#pragma unroll
          for (int s = 0; s < kColsPerThread; ++s) {  // row runs
            const int n = tile_col(tid, s);
            qq[s] = sX[at(i, n, kTileCols)];
            qt[s] = gated && !kTc ? sXt[at(i, n, kTileCols)] : 0.0f;
            gi[s] = gated ? sG[at(i, n, kTileCols)] : 0.0f;
          }
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            const int j = tile_row(tid, r), J = r / 2;
            if (I < J || i < j || (kTc && I != J)) continue;
            const float pij = Op::to_float(oP[Op::at(i, j, kChunk)]);  // broadcast
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s) {
              if (!gated)
                diag[r][s] += pij * qq[s];
              else if (I > J)
                tmp[r][s] += pij * qt[s];
              else
                diag[r][s] += pij * qq[s] * expf(gi[s] - sG[at(j, tile_col(tid, s), kTileCols)]);
            }
          }
        }
        if (gated && !kTc)
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r)
#pragma unroll
            for (int s = 0; s < kColsPerThread; ++s)
              if (I > r / 2) off[r][s] += sF[at(I * kSubs + r / 2, tile_col(tid, s), kTileCols)] * tmp[r][s];
      }
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int j = tile_row(tid, r), last = r / 2 * kSub + kSub - 1;
#pragma unroll
      for (int s = 0; s < kColsPerThread; ++s) {
        const int n = tile_col(tid, s);
        const float gj = sG[at(j, n, kTileCols)];
        const float Dkn = sDk[at(j, n, kTileCols)];
        const float inter = gated ? expf(sG[at(kChunk - 1, n, kTileCols)] - gj) * Dkn : Dkn;
        const float o = gated ? expf(sG[at(last, n, kTileCols)] - gj) * off[r][s] : 0.0f;
        const float dk1 = inter + p.scale * (o + diag[r][s]);
        if (j < at_c.L && n0 + n < p.Dk) {
          const int64_t x = row_at(p, at_c, at_c.t0 + j, p.Dk) + n0 + n;
          if (dk) dk[x] = (write ? 0.0f : dk[x]) + dk1 * dphi_of(p.phi, p.k[x]);
          if (dg) sDG[at(j, n, kTileCols)] -= phi_of(p.phi, p.k[x]) * dk1;  // this thread's own entry of the dq phase
        }
      }
    }
  }
  if (!dg) return;  // uniform over the block

  // dG_t = q_t dq_t − k_t dk_t, summed from the chunk's end (derivations.md, "GLA")
  __syncthreads();
  if (tid < kTileCols && n0 + tid < p.Dk) {
    float acc = 0;
    for (int row = at_c.L - 1; row >= 0; --row) {
      acc += sDG[at(row, tid, kTileCols)];  // row run
      float& out = dg[row_at(p, at_c, at_c.t0 + row, p.Dk) + n0 + tid];
      out = (write ? 0.0f : out) + acc;
    }
    dg_chunks[(int64_t(blockIdx.x) * p.H + at_c.h) * p.Dk + n0 + tid] = acc;
  }
}

// ---- the rest of the gate gradient ----

// One thread per (sequence, h, d): what reaches chunk c from the sequence's later ones, Σ_{c' > c}
// totals + rowsum(dht ⊙ S_T) (dht: the row's where the sequence ends it), replaces dg_chunks[c].
__global__ void gate_pass_kernel(float* dg_chunks, Problem p, const float* dht, const float* states) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= p.sequences() * p.H * p.Dk) return;
  const int64_t s = e / (p.H * p.Dk), h = e / p.Dk % p.H, d = e % p.Dk;
  const SequenceAt at = sequence_at(p, s);
  const int64_t NC = at.chunks, tile0 = tile_index(p.seqs, s, p.T, kChunk, 0), row = final_state_row(p.seqs, s, p.T);
  float carry = 0;
  if (dht && row >= 0) {
    const float* ST = states + state_at(p, at.slot + NC, h) + d * p.W;
    for (int64_t m = 0; m < p.W; ++m) carry += dht[((row * p.H + h) * p.Dk + d) * p.W + m] * ST[m];
  }
  for (int64_t c = NC - 1; c >= 0; --c) {
    float* x = dg_chunks + ((tile0 + c) * p.H + h) * p.Dk + d;
    const float total = *x;
    *x = carry;
    carry += total;
  }
}

__global__ void gate_offset_kernel(float* dg, const float* dg_chunks, Problem p) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // [B, T, H, Dk]
  if (e >= p.B * p.T * p.H * p.Dk) return;
  const int64_t d = e % p.Dk, h = e / p.Dk % p.H, t = e / (p.Dk * p.H);  // t: a position of the B * T
  const int64_t s = sequence_of(p.seqs, t, p.T);
  const int64_t tile = tile_index(p.seqs, s, p.T, kChunk, (t - sequence(p.seqs, s, p.T).start) / kChunk);
  dg[e] += dg_chunks[(tile * p.H + h) * p.Dk + d];
}

// ---- pointwise ----

__global__ void append_column_kernel(float* dst, Floats src, const float* extra, int64_t rows, int64_t W,
                                     float fill) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * (W + 1)) return;
  const int64_t row = i / (W + 1), j = i % (W + 1);
  dst[i] = j < W ? (src ? src[row * W + j] : 0.0f) : (extra ? extra[row] : fill);
}

__global__ void normalized_output_kernel(float* o, const float* o2, int64_t rows, int64_t Dv) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * Dv) return;
  const int64_t row = i / Dv;
  o[i] = o2[row * (Dv + 1) + i % Dv] / (o2[row * (Dv + 1) + Dv] + float(kLinearAttnEps));
}

__global__ void normalized_grad_kernel(float* dO2, const float* dO, const float* o, const float* den, int64_t rows,
                                       int64_t Dv) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * (Dv + 1)) return;
  const int64_t row = i / (Dv + 1), j = i % (Dv + 1);
  const float dd = den[row] + float(kLinearAttnEps);
  if (j < Dv) {
    dO2[i] = dO[row * Dv + j] / dd;
  } else {
    float dot = 0;
    for (int64_t m = 0; m < Dv; ++m) dot += dO[row * Dv + m] * o[row * Dv + m];
    dO2[i] = -dot / dd;
  }
}

// One thread per (sequence, h, d, n); the sequences that start (end) no row write nothing.
__global__ void state_out_kernel(float* dst, float* dst_last, const float* states, bool final, Problem p,
                                 int64_t Dv, bool accumulate) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // (s, h, d, n)
  if (e >= p.sequences() * p.H * p.Dk * p.W) return;
  const int64_t h = e / (p.Dk * p.W) % p.H, d = e / p.W % p.Dk, n = e % p.W;
  const int64_t s = e / (p.H * p.Dk * p.W);
  const SequenceAt at = sequence_at(p, s);
  const int64_t row = final ? final_state_row(p.seqs, s, p.T) : initial_state_row(p.seqs, s, p.T);
  if (row < 0) return;
  const int64_t bh = row * p.H + h;
  const float val = states[state_at(p, final ? at.slot + at.chunks : at.slot, h) + d * p.W + n];
  float* x = n < Dv ? (dst ? dst + (bh * p.Dk + d) * Dv + n : nullptr)
                    : (dst_last && n == Dv ? dst_last + bh * p.Dk + d : nullptr);
  if (x) *x = accumulate ? *x + val : val;
}

// ---- launches ----

// Opts `kernel` in to its plan's dynamic shared memory (fixed sizes: at most 102 KiB in float32, 112
// KiB for the tf32 dq/dk kernel, which sm_80 and sm_90 GPUs have); a GPU with less is refused by name.
template <class Kernel>
LaunchPlan with_shared(LaunchPlan plan, Kernel kernel, const char* what) {
  LINATTN_CHECK(plan.grid.z <= 65535 && plan.grid.y <= 65535 && plan.grid.x <= INT32_MAX, "chunk kernels: H = ",
                plan.grid.z, " (at most 65,535), ", plan.grid.y, " column tiles or ", plan.grid.x,
                " chunks exceed the CUDA grid");
  const int limit = opt_in_dynamic_shared(kernel, plan.shared_bytes);  // remembered: no CUDA call per launch
  LINATTN_CHECK(plan.shared_bytes <= limit, "linear attention / GLA on CUDA (", what, "): the kernel needs ",
                plan.shared_bytes / 1024, " KiB of shared memory per thread block, more than this GPU's ",
                limit / 1024, " KiB; run linear attention and GLA on an sm_80 or sm_90 GPU (or on the CPU, or with ",
                "train.precision f32 / no train.tf32, which need less)");
  return plan;
}

bool empty(const Problem& p) { return p.B * p.H == 0 || p.T == 0 || p.Dk == 0 || p.W == 0; }

// The number of sequences the launch plans take (launch_plan.h): 0 = the rows.
int64_t documents(const Problem& p) { return p.seqs.count; }

}  // namespace

// The blocks are reused by later calls only through kernels queued after these on the compute stream.
Scratch::~Scratch() {
  for (void* p : buffers_) release(p);
}

float* Scratch::floats(int64_t n) {
  void* p = allocate(size_t(n > 0 ? n : 1) * sizeof(float));
  buffers_.push_back(p);
  return static_cast<float*>(p);
}

namespace {

// Calls f(std::integral_constant<MatmulPrecision, P>) for P = `precision`: the instantiation to launch.
template <class F>
void with_precision(MatmulPrecision precision, F&& f) {
  switch (precision) {
    case MatmulPrecision::bf16: return f(std::integral_constant<MatmulPrecision, MatmulPrecision::bf16>{});
    case MatmulPrecision::tf32: return f(std::integral_constant<MatmulPrecision, MatmulPrecision::tf32>{});
    case MatmulPrecision::f32: return f(std::integral_constant<MatmulPrecision, MatmulPrecision::f32>{});
  }
}

template <bool kBackward>
void chunk_states(float* states, const Problem& p, Rows Y, const char* what) {
  with_precision(p.precision, [&](auto precision) {
    constexpr MatmulPrecision P = decltype(precision)::value;
    const LaunchPlan plan = with_shared(chunk_state_plan(kBackward, p.B, p.T, p.H, p.Dk, p.W, P, documents(p)),
                                        chunk_state_kernel<kBackward, P>, what);
    LINATTN_LAUNCH_PLAN(plan, stream(), chunk_state_kernel<kBackward, P>)(states, p, Y);
    LINATTN_CUDA_CHECK_LAUNCH();
  });
}

template <bool kTransposed>
void chunk_apply(OutRows out, const Problem& p, Rows Y, const float* states, float a, float b, const char* what) {
  with_precision(p.precision, [&](auto precision) {
    constexpr MatmulPrecision P = decltype(precision)::value;
    const LaunchPlan plan = with_shared(chunk_apply_plan(kTransposed, p.B, p.T, p.H, p.W, P, documents(p)),
                                        chunk_apply_kernel<kTransposed, P>, what);
    LINATTN_LAUNCH_PLAN(plan, stream(), chunk_apply_kernel<kTransposed, P>)(out, p, Y, states, a, b);
    LINATTN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void gate_cumsum(float* G, Floats g, const Problem& p) {
  if (empty(p)) return;
  LINATTN_LAUNCH_PLAN(gate_cumsum_plan(p.B, p.T, p.H, p.Dk, documents(p)), stream(), gate_cumsum_kernel)(G, g, p);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void forward_states(float* states, const Problem& p, const float* h0) {
  if (p.B * p.H * p.Dk * p.W == 0) return;
  if (p.T > 0) chunk_states<false>(states, p, p.v, "forward_states");
  LINATTN_LAUNCH_PLAN(state_pass_plan(false, p.B, p.H, p.Dk, p.W, documents(p)), stream(), state_pass_kernel<false>)(
      states, p, h0);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void backward_states(float* dstates, const Problem& p, Rows dO, const float* dht) {
  if (p.B * p.H * p.Dk * p.W == 0) return;
  if (p.T > 0) chunk_states<true>(dstates, p, dO, "backward_states");
  LINATTN_LAUNCH_PLAN(state_pass_plan(true, p.B, p.H, p.Dk, p.W, documents(p)), stream(), state_pass_kernel<true>)(
      dstates, p, dht);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void output(OutRows out, const Problem& p, const float* states, float a, float b) {
  if (empty(p)) return;
  chunk_apply<false>(out, p, p.v, states, a, b, "output");
}

void grad_v(OutRows dv, const Problem& p, Rows dO, const float* dstates) {
  if (empty(p) || !dv.p) return;
  chunk_apply<true>(dv, p, dO, dstates, 1.0f, p.scale, "grad_v");
}

void grad_qk(float* dq, float* dk, float* dg, float* dg_chunks, const Problem& p, Rows dO, const float* states,
             const float* dstates, bool write) {
  if (empty(p)) return;
  with_precision(p.precision, [&](auto precision) {
    constexpr MatmulPrecision P = decltype(precision)::value;
    const LaunchPlan plan =
        with_shared(chunk_dqk_plan(p.B, p.T, p.H, p.Dk, P, documents(p)), chunk_dqk_kernel<P>, "grad_qk");
    LINATTN_LAUNCH_PLAN(plan, stream(), chunk_dqk_kernel<P>)(dq, dk, dg, dg_chunks, p, dO, states, dstates,
                                                                        write);
    LINATTN_CUDA_CHECK_LAUNCH();
  });
}

void gate_grad_finish(float* dg, float* dg_chunks, const Problem& p, const float* dht, const float* states) {
  if (empty(p)) return;
  LINATTN_LAUNCH_PLAN(gate_pass_plan(p.B, p.H, p.Dk, documents(p)), stream(), gate_pass_kernel)(dg_chunks, p, dht,
                                                                                                states);
  LINATTN_CUDA_CHECK_LAUNCH();
  LINATTN_LAUNCH_PLAN(gate_offset_plan(p.B, p.T, p.H, p.Dk), stream(), gate_offset_kernel)(dg, dg_chunks, p);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void append_column(float* dst, Floats src, const float* extra, int64_t rows, int64_t W, float fill) {
  if (rows == 0) return;
  LINATTN_LAUNCH_PLAN(append_column_plan(rows, W), stream(), append_column_kernel)(dst, src, extra, rows, W, fill);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void normalized_output(float* o, const float* o2, int64_t rows, int64_t Dv) {
  if (rows * Dv == 0) return;
  LINATTN_LAUNCH_PLAN(normalized_output_plan(rows, Dv), stream(), normalized_output_kernel)(o, o2, rows, Dv);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void normalized_grad(float* dO2, const float* dO, const float* o, const float* den, int64_t rows, int64_t Dv) {
  if (rows == 0) return;
  LINATTN_LAUNCH_PLAN(normalized_grad_plan(rows, Dv), stream(), normalized_grad_kernel)(dO2, dO, o, den, rows, Dv);
  LINATTN_CUDA_CHECK_LAUNCH();
}

void state_out(float* dst, float* dst_last, const float* states, bool final, const Problem& p, int64_t Dv,
               bool accumulate) {
  if ((!dst && !dst_last) || p.B * p.H * p.Dk * p.W == 0) return;
  LINATTN_LAUNCH_PLAN(state_out_plan(p.B, p.H, p.Dk, p.W, documents(p)), stream(), state_out_kernel)(
      dst, dst_last, states, final, p, Dv, accumulate);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda::chunk
