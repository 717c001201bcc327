// CUDA DeltaNet and Gated DeltaNet: the launches of the block programs of deltanet_block.h.
//
// Tensor cores (DeltaNetArgs::precision bf16 or tf32): the per-chunk products of the forward, in
// chunk_factors_tc_kernel the Gram K Kᵀ and the scores Q Kᵀ (64 x 64 x Dk each), in
// chunk_outputs_tc_kernel diag(gamma) Q S0 + P U' (64 x Dv x (Dk + 64)), run on WMMA fragments with
// float32 accumulators: the operands, formed in float32 as the f32 path forms them, are rounded to the
// fragment's type in shared memory (chunk_layout.h's tc layout, padded to 64 rows and Dk to a multiple
// of 16 with zeros), and the products reach the f32 path's epilogues through float staging tiles. The
// backward's per-chunk launches likewise (chunk_backward_inputs_tc_kernel: P^T dO and Q^T diag(gamma)
// dO; chunk_backward_grads_tc_kernel: the eight products of dq and dk, further down), for Dk, Dv <= 64.
// The forward substitution for A⁻¹ and the two sequential passes stay float32 on the CUDA cores;
// float32 runs the CUDA-core kernels (chunk_factors_kernel, chunk_outputs_kernel,
// chunk_backward_inputs_kernel, chunk_backward_grads_kernel), unchanged.
#include <mma.h>
#include <type_traits>

#include <cuda_bf16.h>

#include "kernels/cuda/deltanet.h"

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {
namespace {

namespace wmma = nvcuda::wmma;

// Threads per head: enough for the [C, D] phases (C * D = 4096 elements at C = D = 64).
constexpr int kHeadThreads = kDeltaNetHeadThreads;

// A tensor-core precision's operands: bf16, or float rounded to tf32 (as chunk_gla.cu stores them).
template <MatmulPrecision P>
struct TcOperand;
template <>
struct TcOperand<MatmulPrecision::bf16> {
  using Elem = __nv_bfloat16;
  using Frag = __nv_bfloat16;
  static constexpr int kK = 16, kBytes = 2;  // kK: a step of the contracted dimension
  __device__ static Elem from(float x) { return __float2bfloat16(x); }
};
template <>
struct TcOperand<MatmulPrecision::tf32> {
  using Elem = float;
  using Frag = wmma::precision::tf32;
  static constexpr int kK = 8, kBytes = 4;
  __device__ static Elem from(float x) { return wmma::__float_to_tf32(x); }
};

// delta::chunk_factors with its two products on the tensor cores (sh: delta::factors_tc_shared_bytes).
// Same stages, same results up to the operands' rounding: gram_kkt's and causal_scores_qk's dot
// products come from the staging tiles, times D_ij as there; solve_unit_lower is the f32 path's.
// Warp w computes the fragments (frag_row(w), frag_col(w, t)), t < 2, of both 64 x 64 products; the
// B operand Kᵀ is K's tile read col_major, so one fragment of it serves both.
template <MatmulPrecision P>
__device__ void chunk_factors_tc(const DeltaNetArgs<float>& p, int64_t bh, int64_t c, char* sh) {
  using Op = TcOperand<P>;
  using E = typename Op::Elem;
  using chunk::frag_col, chunk::frag_row, chunk::kChunk, chunk::kFrag, chunk::tc_at;
  const DeviceBlock blk;
  const delta::Dims d = delta::dims(p);
  const int64_t C = d.C, Dk = d.Dk;
  const int depth = delta::tc_depth(d), ld = chunk::tc_pitch(depth, Op::kBytes);
  const int ld_staging = chunk::tc_pitch(kChunk, 4);
  float* f = reinterpret_cast<float*>(sh);
  const delta::Gates<float> g{f, f + C, f + 2 * C, f + 3 * C};
  float* M = f + 4 * C;  // K Kᵀ . D for the solve, [C, C]
  E* ko = reinterpret_cast<E*>(sh + delta::factors_tc_gates_bytes(d));                  // [kChunk, depth]
  E* qo = reinterpret_cast<E*>(sh + delta::factors_tc_gates_bytes(d) + delta::factors_tc_operand_bytes(d, Op::kBytes));
  float* gram = reinterpret_cast<float*>(sh + delta::factors_tc_gates_bytes(d) +
                                         2 * delta::factors_tc_operand_bytes(d, Op::kBytes));  // [kChunk, kChunk]
  float* scores = gram + delta::factors_tc_staging_bytes() / 4;                                // [kChunk, kChunk]
  const delta::ChunkAt at = delta::chunk_at(d, bh, c);
  const delta::Shape s = delta::shape(d, at);
  const int64_t n = at.n, ldk = s.ldk;
  float* ainv_s = p.saved + at.slot * d.block() + d.state();
  float* pg = ainv_s + C * C;
  const float *q = p.q + at.qk, *k = p.k + at.qk;
  delta::chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, n);
  // K and Q rounded into their tiles; rows past the chunk's n tokens and columns past Dk are zeros
  blk.each(kChunk * depth, [=](int64_t e) {
    const delta::RowCol rc = delta::split(e, depth);
    const int64_t i = rc.row, x = rc.col;
    const bool inside = i < n && x < Dk;
    ko[tc_at(int(i), int(x), depth, Op::kBytes)] = Op::from(inside ? k[i * ldk + x] : 0.0f);
    qo[tc_at(int(i), int(x), depth, Op::kBytes)] = Op::from(inside ? q[i * ldk + x] : 0.0f);
  });
  blk.sync();
  const int w = int(threadIdx.x) / 32;
  wmma::fragment<wmma::accumulator, kFrag, kFrag, Op::kK, float> fg[2], fs[2];  // K Kᵀ, Q Kᵀ
#pragma unroll
  for (int t = 0; t < 2; ++t) wmma::fill_fragment(fg[t], 0.0f), wmma::fill_fragment(fs[t], 0.0f);
  for (int x = 0; x < depth; x += Op::kK) {
    wmma::fragment<wmma::matrix_a, kFrag, kFrag, Op::kK, typename Op::Frag, wmma::row_major> fk, fq;
    wmma::load_matrix_sync(fk, ko + tc_at(kFrag * frag_row(w), x, depth, Op::kBytes), unsigned(ld));
    wmma::load_matrix_sync(fq, qo + tc_at(kFrag * frag_row(w), x, depth, Op::kBytes), unsigned(ld));
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, Op::kK, typename Op::Frag, wmma::col_major> fkt;
      wmma::load_matrix_sync(fkt, ko + tc_at(kFrag * frag_col(w, t), x, depth, Op::kBytes), unsigned(ld));
      wmma::mma_sync(fg[t], fk, fkt, fg[t]);
      wmma::mma_sync(fs[t], fq, fkt, fs[t]);
    }
  }
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int at_frag = tc_at(kFrag * frag_row(w), kFrag * frag_col(w, t), kChunk, 4);
    wmma::store_matrix_sync(gram + at_frag, fg[t], unsigned(ld_staging), wmma::mem_row_major);
    wmma::store_matrix_sync(scores + at_frag, fs[t], unsigned(ld_staging), wmma::mem_row_major);
  }
  blk.sync();
  // gram_kkt and causal_scores_qk from the dot products: M = K Kᵀ . D; PG = K Kᵀ . D above the
  // diagonal, P = tril(Q Kᵀ) . D on and below it
  blk.each(n * n, [=](int64_t e) {
    const delta::RowCol rc = delta::split(e, n);
    const int64_t i = rc.row, j = rc.col;
    const float dij = delta::decay_ratio(g.G, i, j);
    const float x = gram[tc_at(int(i), int(j), kChunk, 4)] * dij;
    M[i * C + j] = x;
    pg[i * C + j] = j > i ? x : scores[tc_at(int(i), int(j), kChunk, 4)] * dij;
  });
  blk.sync();
  delta::solve_unit_lower(blk, ainv_s, ainv_s, M, g, s);
  blk.sync();
}

// delta::chunk_outputs with its products on the tensor cores (sh: delta::outputs_tc_shared_bytes):
// O = scale (Q̃ S0 + P U') with Q̃ = diag(gamma) Q formed in float32 and rounded, as one chain of
// fragment products over [Q̃ | P] and [S0 ; U'], per 64-column tile of O. P is zero above the diagonal,
// so row block I of P U' stops after column block I.
template <MatmulPrecision P>
__device__ void chunk_outputs_tc(const DeltaNetArgs<float>& p, int64_t bh, int64_t c, char* sh) {
  using Op = TcOperand<P>;
  using E = typename Op::Elem;
  using chunk::frag_col, chunk::frag_row, chunk::kChunk, chunk::kFrag, chunk::tc_at, chunk::tc_bytes;
  const DeviceBlock blk;
  const delta::Dims d = delta::dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv;
  const int depth = delta::tc_depth(d), b = Op::kBytes;
  const int ldq = chunk::tc_pitch(depth, b), ld = chunk::tc_pitch(kChunk, b), ld_staging = chunk::tc_pitch(kChunk, 4);
  float* f = reinterpret_cast<float*>(sh);
  const delta::Gates<float> g{f, f + C, f + 2 * C, f + 3 * C};
  char* next = sh + delta::outputs_tc_gates_bytes(d);
  E* qo = reinterpret_cast<E*>(next);  // diag(gamma) Q [kChunk, depth]
  next += tc_bytes(kChunk, depth, b);
  E* po = reinterpret_cast<E*>(next);  // P [kChunk, kChunk]
  next += tc_bytes(kChunk, kChunk, b);
  E* so = reinterpret_cast<E*>(next);  // S0's columns [j0, j0 + 64): [depth, kChunk]
  next += tc_bytes(depth, kChunk, b);
  E* uo = reinterpret_cast<E*>(next);  // U''s columns [j0, j0 + 64): [kChunk, kChunk]
  next += tc_bytes(kChunk, kChunk, b);
  float* staging = reinterpret_cast<float*>(next);  // [kChunk, kChunk]
  const delta::ChunkAt at = delta::chunk_at(d, bh, c);
  const int64_t n = at.n, ldk = d.H * Dk, ldv = d.H * Dv;
  const float* S0 = p.saved + at.slot * d.block();
  const float *pg = S0 + d.state() + C * C, *U = pg + C * C, *q = p.q + at.qk;
  float* o = p.o + at.vo;
  const float scale = p.scale;
  delta::chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, n);
  blk.each(kChunk * kChunk, [=](int64_t e) {  // P on and below the diagonal, zeros elsewhere
    const int i = int(e) / kChunk, m = int(e) % kChunk;
    po[tc_at(i, m, kChunk, b)] = Op::from(m <= i && i < n ? pg[i * C + m] : 0.0f);
  });
  blk.sync();  // Q̃ reads the decays
  blk.each(kChunk * depth, [=](int64_t e) {
    const delta::RowCol rc = delta::split(e, depth);
    const int64_t i = rc.row, x = rc.col;
    qo[tc_at(int(i), int(x), depth, b)] = Op::from(i < n && x < Dk ? g.gamma[i] * q[i * ldk + x] : 0.0f);
  });
  const int w = int(threadIdx.x) / 32, I = frag_row(w);
  for (int64_t j0 = 0; j0 < Dv; j0 += kChunk) {
    const int64_t nv = delta::min64(kChunk, Dv - j0);
    blk.each(depth * kChunk, [=](int64_t e) {  // rows past Dk and columns past Dv are zeros
      const int x = int(e) / kChunk, j = int(e) % kChunk;
      so[tc_at(x, j, kChunk, b)] = Op::from(x < Dk && j < nv ? S0[x * Dv + j0 + j] : 0.0f);
    });
    blk.each(kChunk * kChunk, [=](int64_t e) {
      const int m = int(e) / kChunk, j = int(e) % kChunk;
      uo[tc_at(m, j, kChunk, b)] = Op::from(m < n && j < nv ? U[m * Dv + j0 + j] : 0.0f);
    });
    blk.sync();
    wmma::fragment<wmma::accumulator, kFrag, kFrag, Op::kK, float> acc[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) wmma::fill_fragment(acc[t], 0.0f);
    using A = wmma::fragment<wmma::matrix_a, kFrag, kFrag, Op::kK, typename Op::Frag, wmma::row_major>;
    using B = wmma::fragment<wmma::matrix_b, kFrag, kFrag, Op::kK, typename Op::Frag, wmma::row_major>;
    for (int x = 0; x < depth; x += Op::kK) {  // Q̃ S0
      A fa;
      wmma::load_matrix_sync(fa, qo + tc_at(kFrag * I, x, depth, b), unsigned(ldq));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        B fb;
        wmma::load_matrix_sync(fb, so + tc_at(x, kFrag * frag_col(w, t), kChunk, b), unsigned(ld));
        wmma::mma_sync(acc[t], fa, fb, acc[t]);
      }
    }
    for (int m = 0; m < kFrag * (I + 1); m += Op::kK) {  // + P U'
      A fa;
      wmma::load_matrix_sync(fa, po + tc_at(kFrag * I, m, kChunk, b), unsigned(ld));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        B fb;
        wmma::load_matrix_sync(fb, uo + tc_at(m, kFrag * frag_col(w, t), kChunk, b), unsigned(ld));
        wmma::mma_sync(acc[t], fa, fb, acc[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < 2; ++t)
      wmma::store_matrix_sync(staging + tc_at(kFrag * I, kFrag * frag_col(w, t), kChunk, 4), acc[t],
                              unsigned(ld_staging), wmma::mem_row_major);
    blk.sync();
    blk.each(n * nv, [=](int64_t e) {
      const delta::RowCol rc = delta::split(e, nv);
      o[rc.row * ldv + j0 + rc.col] = scale * staging[tc_at(int(rc.row), int(rc.col), kChunk, 4)];
    });
    blk.sync();  // the next tile overwrites S0's and U''s tiles and the staging tile
  }
}

// ---- the backward's per-chunk launches on the tensor cores (Dk, Dv <= 64: delta::backward_tc_fits) ----
//
// The same stages as deltanet_block.h's chunk_backward_inputs and chunk_backward_grads, with their
// products as WMMA fragment chains over [kChunk, kChunk] operand tiles (delta::backward_tc_* sizes),
// float32 accumulators, and the f32 path's epilogues reading the products from float staging tiles.
// Warp w computes the fragments (frag_row(w), frag_col(w, t)), t < 2, of every 64 x 64 product.
// Epilogue phases walk whole 64-column rows of the staging tiles (columns past the head's dimension
// skipped), so a warp reads one row run whatever Dk and Dv are; one thread per row sums a row along
// delta::skewed_col (conflict-free on the staging pitch).

template <MatmulPrecision P>
using FragA = wmma::fragment<wmma::matrix_a, chunk::kFrag, chunk::kFrag, TcOperand<P>::kK, typename TcOperand<P>::Frag,
                             wmma::row_major>;
template <MatmulPrecision P>
using FragAT = wmma::fragment<wmma::matrix_a, chunk::kFrag, chunk::kFrag, TcOperand<P>::kK,
                              typename TcOperand<P>::Frag, wmma::col_major>;  // the tile transposed
template <MatmulPrecision P>
using FragB = wmma::fragment<wmma::matrix_b, chunk::kFrag, chunk::kFrag, TcOperand<P>::kK, typename TcOperand<P>::Frag,
                             wmma::row_major>;
template <MatmulPrecision P>
using FragBT = wmma::fragment<wmma::matrix_b, chunk::kFrag, chunk::kFrag, TcOperand<P>::kK,
                              typename TcOperand<P>::Frag, wmma::col_major>;  // the tile transposed
template <MatmulPrecision P>
using FragAcc = wmma::fragment<wmma::accumulator, chunk::kFrag, chunk::kFrag, TcOperand<P>::kK, float>;

// A [kChunk, kChunk] operand tile in sh: element (i, j) is value(i, j) rounded, for i < rows and
// j < cols; zeros elsewhere. value reads float32 memory.
template <MatmulPrecision P, class F>
__device__ void fill_operand(const DeviceBlock& blk, typename TcOperand<P>::Elem* tile, int64_t rows, int64_t cols,
                             F value) {
  using chunk::kChunk;
  blk.each(kChunk * kChunk, [=](int64_t e) {
    const int i = int(e) / kChunk, j = int(e) % kChunk;
    tile[chunk::tc_at(i, j, kChunk, TcOperand<P>::kBytes)] =
        TcOperand<P>::from(i < rows && j < cols ? value(i, j) : 0.0f);
  });
}

// acc[t] += A_I B_t over the inner index k in [lo, hi), t < 2: A_I the row block I (16 rows) of the
// [kChunk, kChunk] operand tile a, read as stored or, kTransposedA, transposed (its column block I);
// B_t the warp's column block frag_col(w, t) of the operand tile b.
template <MatmulPrecision P, bool kTransposedA>
__device__ void mac_row_block(FragAcc<P> (&acc)[2], const typename TcOperand<P>::Elem* a,
                              const typename TcOperand<P>::Elem* b, int I, int lo, int hi) {
  using chunk::frag_col, chunk::kChunk, chunk::kFrag, chunk::tc_at;
  using FragARead = std::conditional_t<kTransposedA, FragAT<P>, FragA<P>>;
  constexpr int bytes = TcOperand<P>::kBytes;
  const unsigned ld = unsigned(chunk::tc_pitch(kChunk, bytes));
  const int w = int(threadIdx.x) / 32;
  for (int m = lo; m < hi; m += TcOperand<P>::kK) {
    FragARead fa;
    const int at = kTransposedA ? tc_at(m, kFrag * I, kChunk, bytes) : tc_at(kFrag * I, m, kChunk, bytes);
    wmma::load_matrix_sync(fa, a + at, ld);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      FragB<P> fb;
      wmma::load_matrix_sync(fb, b + tc_at(m, kFrag * frag_col(w, t), kChunk, bytes), ld);
      wmma::mma_sync(acc[t], fa, fb, acc[t]);
    }
  }
}

// The warp's two accumulators into a float staging tile [kChunk, kChunk].
template <MatmulPrecision P>
__device__ void store_staging(float* staging, FragAcc<P> (&acc)[2]) {
  using chunk::frag_col, chunk::frag_row, chunk::kChunk, chunk::kFrag, chunk::tc_at;
  const int w = int(threadIdx.x) / 32;
#pragma unroll
  for (int t = 0; t < 2; ++t)
    wmma::store_matrix_sync(staging + tc_at(kFrag * frag_row(w), kFrag * frag_col(w, t), kChunk, 4), acc[t],
                            unsigned(chunk::tc_pitch(kChunk, 4)), wmma::mem_row_major);
}

// The sum over the columns j of row i of a staging tile of term(j, value), in delta::skewed_col order
// (term returns 0 for the columns left out; every column of the tile is readable).
template <class F>
__device__ float staging_row_sum(const float* staging, int i, F term) {
  float acc = 0.0f;
  for (int step = 0; step < chunk::kChunk; ++step) {
    const int j = delta::skewed_col(i, step);
    acc += term(j, staging[chunk::tc_at(i, j, chunk::kChunk, 4)]);
  }
  return acc;
}

// delta::chunk_backward_inputs on the tensor cores (sh: delta::backward_inputs_tc_shared_bytes):
//   du0 = scale P^T dO (into X) and hq = scale Q^T diag(gamma) dO (into dS), P^T and (diag(gamma) Q)^T
// as their tiles read col_major. P^T is upper triangular: row block I of du0 starts at token 16 I.
template <MatmulPrecision P>
__device__ void chunk_backward_inputs_tc(const DeltaNetArgs<float>& p, float* work, int64_t bh, int64_t c, char* sh) {
  using Op = TcOperand<P>;
  using E = typename Op::Elem;
  using chunk::frag_col, chunk::frag_row, chunk::kChunk, chunk::kFrag, chunk::tc_at;
  const DeviceBlock blk;
  const delta::Dims d = delta::dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv;
  const int b = Op::kBytes;
  float* f = reinterpret_cast<float*>(sh);
  const delta::Gates<float> g{f, f + C, f + 2 * C, f + 3 * C};
  char* next = sh + delta::backward_inputs_tc_floats_bytes(d);
  E* po = reinterpret_cast<E*>(next);  // P [kChunk, kChunk], zero above the diagonal
  next += delta::backward_tc_operand_bytes(b);
  E* doo = reinterpret_cast<E*>(next);  // dO [kChunk, kChunk]
  next += delta::backward_tc_operand_bytes(b);
  E* qo = reinterpret_cast<E*>(next);  // diag(gamma) Q [kChunk, kChunk]
  next += delta::backward_tc_operand_bytes(b);
  float* du0 = reinterpret_cast<float*>(next);  // [kChunk, kChunk]
  float* hq = du0 + delta::backward_tc_staging_bytes() / 4;
  const delta::ChunkAt at = delta::chunk_at(d, bh, c);
  const int64_t n = at.n, ldk = d.H * Dk, ldv = d.H * Dv;
  const delta::WorkChunk wc = delta::work_chunk(d, bh, c);
  const float* pg = p.saved + at.slot * d.block() + d.state() + C * C;
  const float *q = p.q + at.qk, *dO = p.dO + at.vo;
  const float scale = p.scale;
  delta::chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, n);
  fill_operand<P>(blk, po, n, n, [=](int m, int i) { return i <= m ? pg[m * C + i] : 0.0f; });
  fill_operand<P>(blk, doo, n, Dv, [=](int m, int j) { return dO[m * ldv + j]; });
  blk.sync();  // diag(gamma) Q reads the decays
  fill_operand<P>(blk, qo, n, Dk, [=](int m, int t) { return g.gamma[m] * q[m * ldk + t]; });
  blk.sync();
  const int w = int(threadIdx.x) / 32, I = frag_row(w);
  FragAcc<P> fu[2], fh[2];
#pragma unroll
  for (int t = 0; t < 2; ++t) wmma::fill_fragment(fu[t], 0.0f), wmma::fill_fragment(fh[t], 0.0f);
  mac_row_block<P, true>(fh, qo, doo, I, 0, kChunk);  // Q^T diag(gamma) dO
  mac_row_block<P, true>(fu, po, doo, I, kFrag * I, kChunk);  // P^T dO: P^T's row block I is zero left of 16 I
  store_staging<P>(du0, fu);
  store_staging<P>(hq, fh);
  blk.sync();
  float *x = work + wc.X, *dS = work + wc.dS;
  blk.each(kChunk * kChunk, [=](int64_t e) {
    const int i = int(e) / kChunk, j = int(e) % kChunk;
    if (j >= Dv) return;
    if (i < n) x[i * Dv + j] = scale * du0[tc_at(i, j, kChunk, 4)];
    if (i < Dk) dS[i * Dv + j] = scale * hq[tc_at(i, j, kChunk, 4)];
  });
  blk.sync();
}

// delta::chunk_backward_grads on the tensor cores (sh: delta::backward_grads_tc_shared_bytes), its
// products in three rounds, each into staging tiles and then the f32 path's epilogue on them:
//  1. over Dv: W = U' dS1^T, XS = X S0^T, Z = dO S0^T ([C, Dk]):  dK += diag(lambda) W -
//     diag(gamma beta) XS, dQ += scale diag(gamma) Z, and with gates lambda_i dlambda_i =
//     lambda_i k_i . W_i, gamma_i dgamma_i += scale gamma_i q_i . Z_i (state_pass_backward,
//     inter_output_backward); gamma_last's <dS1, S0> through a staging tile;
//  2. over Dv: dP = dO U'^T and L = U' X^T ([C, C]):  M = scale tril(dP) . D, N = scale tril(dP) . P
//     (scores_backward); dLT_ji = -L_ji, F_ij = beta_i dLT_ji D_ij, N'_ji = dLT_ji gd_ij, i > j
//     (gram_solve_backward); their row and column sums into dG and dbeta. Every element of these
//     is a function of the same element of dP or L (F held transposed, F^T_ji = F_ij), so no warp
//     reads down a column of a staging tile (its pitch, 68 words, would make that a 4-way conflict);
//  3. over the chunk: dQ += M K, dK += M^T Q + (F + F^T) K, F^T and F as their tile read row_major
//     and col_major.
// wy_backward (no product) and decay_backward are the f32 path's; wy_backward's E lives in a staging tile.
template <MatmulPrecision P>
__device__ void chunk_backward_grads_tc(const DeltaNetArgs<float>& p, const float* work, int64_t bh, int64_t c,
                                        char* sh) {
  using Op = TcOperand<P>;
  using E = typename Op::Elem;
  using chunk::frag_col, chunk::frag_row, chunk::kChunk, chunk::kFrag, chunk::tc_at;
  const DeviceBlock blk;
  const delta::Dims d = delta::dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv;
  const int b = Op::kBytes, ld = chunk::tc_pitch(kChunk, b), depth_v = int((Dv + kFrag - 1) / kFrag * kFrag);
  const bool gated = p.a != nullptr;
  float* f = reinterpret_cast<float*>(sh);
  const delta::Gates<float> g{f, f + C, f + 2 * C, f + 3 * C};
  const delta::GateGrads<float> gg{f + 4 * C, f + 5 * C, f + 6 * C, f + 7 * C};
  float* part = f + 8 * C;  // [Dk]
  char* next = sh + delta::backward_grads_tc_floats_bytes(d);
  auto operand = [&] {
    E* tile = reinterpret_cast<E*>(next);
    next += delta::backward_tc_operand_bytes(b);
    return tile;
  };
  E *uo = operand(), *xo = operand(), *doo = operand(), *dso = operand(), *s0o = operand();  // [kChunk, kChunk]
  // [kChunk, kChunk] each: the first own_staging after the operands, the others over dS1 and S0
  constexpr int own_staging = delta::backward_grads_tc_own_staging(Op::kBytes);
  constexpr int sb = delta::backward_tc_staging_bytes();
  char* dead = reinterpret_cast<char*>(dso);  // dS1 and S0, contiguous, once round 1's loop has read them
  float* st0 = reinterpret_cast<float*>(next);
  float* st1 = reinterpret_cast<float*>(own_staging > 1 ? next + sb : dead);
  float* st2 = reinterpret_cast<float*>(own_staging > 2 ? next + 2 * sb : dead + (own_staging > 1 ? 0 : sb));
  // round 3's operands over rounds 1 and 2's (Q over st2, which round 1's epilogue is the last to read)
  E *mo = uo, *fuo = xo, *ko = doo, *qo = reinterpret_cast<E*>(st2);
  const delta::ChunkAt at = delta::chunk_at(d, bh, c);
  const delta::Shape s = delta::shape(d, at);
  const int64_t n = at.n, ldk = s.ldk, ldv = s.ldv;
  const delta::WorkChunk wc = delta::work_chunk(d, bh, c);
  const float *dS1 = work + wc.dS, *x = work + wc.X;
  const float* S0 = p.saved + at.slot * d.block();
  const float *pg = S0 + d.state() + C * C, *U = pg + C * C, *R = U + C * Dv;
  const float *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *dO = p.dO + at.vo;
  float *dq = p.dq + at.qk, *dk = p.dk + at.qk, *dv = p.dv + at.vo;
  const float scale = p.scale;
  delta::chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, n);
  blk.each(n, [=](int64_t i) { gg.gdg[i] = gg.ldl[i] = gg.dG[i] = gg.db[i] = 0; });
  fill_operand<P>(blk, uo, n, Dv, [=](int i, int j) { return U[i * Dv + j]; });
  fill_operand<P>(blk, xo, n, Dv, [=](int i, int j) { return x[i * Dv + j]; });
  fill_operand<P>(blk, doo, n, Dv, [=](int i, int j) { return dO[i * ldv + j]; });
  fill_operand<P>(blk, dso, Dk, Dv, [=](int t, int j) { return dS1[t * Dv + j]; });
  fill_operand<P>(blk, s0o, Dk, Dv, [=](int t, int j) { return S0[t * Dv + j]; });
  blk.sync();
  delta::wy_backward(blk, dv, st0, gg, x, R, v, delta::padded_pitch(Dk > Dv ? Dk : Dv), gated, g, s);
  const int w = int(threadIdx.x) / 32, I = frag_row(w);
  {  // round 1
    FragAcc<P> fw[2], fx[2], fz[2];
#pragma unroll
    for (int t = 0; t < 2; ++t)
      wmma::fill_fragment(fw[t], 0.0f), wmma::fill_fragment(fx[t], 0.0f), wmma::fill_fragment(fz[t], 0.0f);
    for (int j = 0; j < depth_v; j += Op::kK) {
      FragA<P> fu, fxa, fo;
      wmma::load_matrix_sync(fu, uo + tc_at(kFrag * I, j, kChunk, b), unsigned(ld));
      wmma::load_matrix_sync(fxa, xo + tc_at(kFrag * I, j, kChunk, b), unsigned(ld));
      wmma::load_matrix_sync(fo, doo + tc_at(kFrag * I, j, kChunk, b), unsigned(ld));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        FragBT<P> fd, fs;
        wmma::load_matrix_sync(fd, dso + tc_at(kFrag * frag_col(w, t), j, kChunk, b), unsigned(ld));
        wmma::load_matrix_sync(fs, s0o + tc_at(kFrag * frag_col(w, t), j, kChunk, b), unsigned(ld));
        wmma::mma_sync(fw[t], fu, fd, fw[t]);
        wmma::mma_sync(fx[t], fxa, fs, fx[t]);
        wmma::mma_sync(fz[t], fo, fs, fz[t]);
      }
    }
    blk.sync();                 // every warp has read dS1 and S0, which st1 or st2 go over
    store_staging<P>(st0, fw);  // over wy_backward's E, spent
    store_staging<P>(st1, fx);
    store_staging<P>(st2, fz);
  }
  blk.sync();
  blk.each(kChunk * kChunk, [=](int64_t e) {
    const int i = int(e) / kChunk, t = int(e) % kChunk, a = tc_at(i, t, kChunk, 4);
    if (i >= n || t >= Dk) return;
    const float wt = st0[a], xs = st1[a], z = st2[a];
    dk[i * ldk + t] += g.lambda[i] * wt - g.gamma[i] * g.bt[i] * xs;
    dq[i * ldk + t] += scale * g.gamma[i] * z;
    if (gated) st0[a] = g.lambda[i] * k[i * ldk + t] * wt, st2[a] = scale * g.gamma[i] * q[i * ldk + t] * z;
  });
  blk.sync();
  if (gated) {
    blk.each(kChunk * kChunk, [=](int64_t e) {  // dS1 . S0 over XS, spent
      const int t = int(e) / kChunk, j = int(e) % kChunk;
      if (t < Dk && j < Dv) st1[tc_at(t, j, kChunk, 4)] = dS1[t * Dv + j] * S0[t * Dv + j];
    });
    blk.each(n, [=](int64_t i) {
      gg.ldl[i] = staging_row_sum(st0, int(i), [=](int j, float y) { return j < Dk ? y : 0.0f; });
      gg.gdg[i] += staging_row_sum(st2, int(i), [=](int j, float y) { return j < Dk ? y : 0.0f; });
    });
    blk.sync();
    blk.each(Dk, [=](int64_t t) {
      part[t] = staging_row_sum(st1, int(t), [=](int j, float y) { return j < Dv ? y : 0.0f; });
    });
  }
  blk.sync();
  {  // round 2
    FragAcc<P> fp[2], fl[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) wmma::fill_fragment(fp[t], 0.0f), wmma::fill_fragment(fl[t], 0.0f);
    for (int j = 0; j < depth_v; j += Op::kK) {
      FragA<P> fo, fu;
      wmma::load_matrix_sync(fo, doo + tc_at(kFrag * I, j, kChunk, b), unsigned(ld));
      wmma::load_matrix_sync(fu, uo + tc_at(kFrag * I, j, kChunk, b), unsigned(ld));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        FragBT<P> fut, fxt;
        wmma::load_matrix_sync(fut, uo + tc_at(kFrag * frag_col(w, t), j, kChunk, b), unsigned(ld));
        wmma::load_matrix_sync(fxt, xo + tc_at(kFrag * frag_col(w, t), j, kChunk, b), unsigned(ld));
        wmma::mma_sync(fp[t], fo, fut, fp[t]);  // dP_ij = dO_i . U'_j
        wmma::mma_sync(fl[t], fu, fxt, fl[t]);  // L_ji = U'_j . X_i (row j, column i)
      }
    }
    store_staging<P>(st0, fp);
    store_staging<P>(st1, fl);
  }
  blk.sync();  // round 3's operands go over round 2's
  blk.each(kChunk * kChunk, [=](int64_t e) {  // every thread reads and writes its own element only
    const int i = int(e) / kChunk, j = int(e) % kChunk, a = tc_at(i, j, kChunk, 4), o = tc_at(i, j, kChunk, b);
    const bool inside = i < n && j < n;
    const float dij = inside ? delta::decay_ratio(g.G, i, j) : 0.0f;
    const float dp = inside && j <= i ? scale * st0[a] : 0.0f;
    const float l = inside && i < j ? st1[a] : 0.0f;  // L_ij = U'_i . X_j = -dLT_ij, i < j
    mo[o] = Op::from(dp * dij);
    fuo[o] = Op::from(inside ? -g.bt[j] * l * dij : 0.0f);  // F_ji, held as its transpose: upper triangular
    if (inside) st0[a] = dp * pg[i * C + j];  // N
    if (inside) st1[a] = -l * pg[i * C + j];  // N'_ij
  });
  fill_operand<P>(blk, ko, n, Dk, [=](int m, int t) { return k[m * ldk + t]; });
  fill_operand<P>(blk, qo, n, Dk, [=](int m, int t) { return q[m * ldk + t]; });
  blk.sync();
  blk.each(n, [=](int64_t i64) {
    const int i = int(i64);
    float scores = staging_row_sum(st0, i, [=](int j, float y) { return j < i ? y : 0.0f; });
    float beta_sum = 0.0f;
    for (int m = 0; m < n; ++m) {  // column i: a warp's consecutive i read consecutive words
      if (m > i) scores -= st0[tc_at(m, i, kChunk, 4)];
      if (m < i) beta_sum += st1[tc_at(m, i, kChunk, 4)];
    }
    const float gram = staging_row_sum(st1, i, [=](int m, float y) { return m > i && m < n ? g.bt[m] * y : 0.0f; });
    gg.db[i] += beta_sum;
    gg.dG[i] += scores + g.bt[i] * beta_sum - gram;
  });
  blk.sync();  // round 3's results go over N and N'
  {  // round 3
    FragAcc<P> fq[2], fk[2];
#pragma unroll
    for (int t = 0; t < 2; ++t) wmma::fill_fragment(fq[t], 0.0f), wmma::fill_fragment(fk[t], 0.0f);
    mac_row_block<P, false>(fq, mo, ko, I, 0, kFrag * (I + 1));  // M K: M's row block I is zero right of 16 (I + 1)
    mac_row_block<P, true>(fk, mo, qo, I, kFrag * I, kChunk);  // M^T Q: M^T's row block I is zero left of 16 I
    mac_row_block<P, false>(fk, fuo, ko, I, kFrag * I, kChunk);  // F^T K: F^T's row block I is zero left of 16 I
    mac_row_block<P, true>(fk, fuo, ko, I, 0, kFrag * (I + 1));  // F K: F's row block I is zero right of 16 (I + 1)
    store_staging<P>(st0, fq);
    store_staging<P>(st1, fk);
  }
  blk.sync();
  blk.each(kChunk * kChunk, [=](int64_t e) {
    const int i = int(e) / kChunk, t = int(e) % kChunk, a = tc_at(i, t, kChunk, 4);
    if (i >= n || t >= Dk) return;
    dq[i * ldk + t] += st0[a];
    dk[i * ldk + t] += st1[a];
  });
  blk.sync();
  delta::decay_backward(blk, p.dbeta + at.s, p.da ? p.da + at.s : nullptr, gg, part, g, d.H, Dk, n);
}

// The chunkwise forward's three launches (deltanet_block.h): grid (tiles, H) for the per-chunk work
// (a block per tile index of kernels/sequences.h and head: one chunk of one sequence, or nothing),
// (state tiles, sequences * H) for the state pass. The per-chunk launches are float32 on the CUDA
// cores, or their *_tc_kernel twins in precision P (bf16, tf32) on the tensor cores.
__global__ void __launch_bounds__(kHeadThreads) chunk_factors_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) delta::chunk_factors(DeviceBlock{}, p, t.bh, t.c, sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_states_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_states(DeviceBlock{}, p, blockIdx.y, delta::state_columns(delta::dims(p), blockIdx.x), sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_outputs_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) delta::chunk_outputs(DeviceBlock{}, p, t.bh, t.c, sh);
}

// (with a hint of blocks per SM, so that ptxas sizes the registers to the 2 (tf32) or 3 (bf16) blocks
// that the shared memory allows at Dk = 64: without it, it kept tf32's to 80 registers on sm_80 and spilled)
template <MatmulPrecision P>
__global__ void __launch_bounds__(kHeadThreads, P == MatmulPrecision::bf16 ? 3 : 2)
    chunk_factors_tc_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) chunk_factors_tc<P>(p, t.bh, t.c, reinterpret_cast<char*>(sh));
}

template <MatmulPrecision P>
__global__ void __launch_bounds__(kHeadThreads) chunk_outputs_tc_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) chunk_outputs_tc<P>(p, t.bh, t.c, reinterpret_cast<char*>(sh));
}

// The chunkwise backward's three launches: grid (tiles, H) for the per-chunk work, (state tiles,
// sequences * H) for the sequential pass of dS.
__global__ void __launch_bounds__(kHeadThreads) chunk_backward_inputs_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) delta::chunk_backward_inputs(DeviceBlock{}, p, work, t.bh, t.c, sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_backward_states_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_backward_states(DeviceBlock{}, p, work, blockIdx.y, delta::state_columns(delta::dims(p), blockIdx.x),
                               sh);
}

// (at least 2 blocks per SM: the hint lets ptxas use up to 128 registers, where by itself it took 64
// and spilled)
__global__ void __launch_bounds__(kHeadThreads, 2)
    chunk_backward_grads_kernel(DeltaNetArgs<float> p, const float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) delta::chunk_backward_grads(DeviceBlock{}, p, work, t.bh, t.c, sh);
}

// The backward's per-chunk launches on the tensor cores (with hints of the blocks per SM that their
// shared memory allows at chunk 64: inputs 3 (bf16) or 2 (tf32), grads 2).
template <MatmulPrecision P>
__global__ void __launch_bounds__(kHeadThreads, P == MatmulPrecision::bf16 ? 3 : 2)
    chunk_backward_inputs_tc_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) chunk_backward_inputs_tc<P>(p, work, t.bh, t.c, reinterpret_cast<char*>(sh));
}

template <MatmulPrecision P>
__global__ void __launch_bounds__(kHeadThreads, 2)
    chunk_backward_grads_tc_kernel(DeltaNetArgs<float> p, const float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const delta::TileChunk t = delta::tile_chunk(delta::dims(p), blockIdx.x, blockIdx.y);
  if (!t.idle) chunk_backward_grads_tc<P>(p, work, t.bh, t.c, reinterpret_cast<char*>(sh));
}

__global__ void __launch_bounds__(kHeadThreads) recurrent_forward_kernel(DeltaNetArgs<float> p, float* state) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const int64_t bh = blockIdx.x;
  delta::recurrent_forward_head(DeviceBlock{}, p, state + bh * p.Dk * p.Dv, bh, sh);
}

// Lets kernel take `bytes` of dynamic shared memory (chunk_factors_kernel: above the default 48 KiB
// from Dk = 128 at chunk 64; chunk_backward_grads_kernel: from Dk = Dv = 64); a GPU with less is
// refused by name.
template <class Kernel>
void opt_in_shared(Kernel kernel, int64_t bytes, const char* pass) {
  const int limit = opt_in_dynamic_shared(kernel, bytes);  // remembered: no CUDA call per launch
  LINATTN_CHECK(bytes <= limit, "deltanet (cuda): the ", pass, " needs ", bytes / 1024, " KiB of shared memory per ",
                "thread block, more than this GPU's ", limit / 1024, " KiB; use a smaller chunk_size or head ",
                "dimension, or run DeltaNet on an sm_80 or sm_90 GPU (or on the CPU)");
}

// The forward's three launches (plans: deltanet_forward_plans), the per-chunk products in precision P.
template <MatmulPrecision P>
void forward_launches(const LaunchPlans& plans, const DeltaNetArgs<float>& p) {
  if constexpr (P == MatmulPrecision::f32) {
    opt_in_shared(chunk_factors_kernel, plans[0].shared_bytes, "forward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_factors_kernel)(p);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_states_kernel)(p);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_outputs_kernel)(p);
  } else {
    opt_in_shared(chunk_factors_tc_kernel<P>, plans[0].shared_bytes, "forward");
    opt_in_shared(chunk_outputs_tc_kernel<P>, plans[2].shared_bytes, "forward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_factors_tc_kernel<P>)(p);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_states_kernel)(p);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_outputs_tc_kernel<P>)(p);
  }
}

// The backward's three launches (plans: deltanet_backward_plans), the per-chunk products in precision P.
template <MatmulPrecision P>
void backward_launches(const LaunchPlans& plans, const DeltaNetArgs<float>& p, float* work) {
  opt_in_shared(chunk_backward_states_kernel, plans[1].shared_bytes, "backward");
  if constexpr (P == MatmulPrecision::f32) {
    opt_in_shared(chunk_backward_grads_kernel, plans[2].shared_bytes, "backward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_backward_inputs_kernel)(p, work);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_backward_states_kernel)(p, work);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_backward_grads_kernel)(p, work);
  } else {
    opt_in_shared(chunk_backward_inputs_tc_kernel<P>, plans[0].shared_bytes, "backward");
    opt_in_shared(chunk_backward_grads_tc_kernel<P>, plans[2].shared_bytes, "backward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_backward_inputs_tc_kernel<P>)(p, work);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_backward_states_kernel)(p, work);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_backward_grads_tc_kernel<P>)(p, work);
  }
}

void check_chunk(const delta::Dims& d, const char* op) {
  LINATTN_CHECK(d.C >= 1 && d.C <= kDeltaNetMaxChunk, op, ": chunk_size ", d.C, " is not supported by the CUDA ",
                "kernels; set the mixer's chunk_size to 16, 32 or 64");
}

}  // namespace

void deltanet_chunk_forward(const DeltaNetArgs<float>& p) {
  const delta::Dims d = delta::dims(p);
  check_chunk(d, "deltanet (cuda)");
  if (d.B * d.H == 0) return;
  LINATTN_CHECK(d.sequences() * d.H <= 65535, "deltanet (cuda): sequences * heads = ", d.sequences() * d.H,
                " exceeds the CUDA grid's 65535 (the state pass's grid y); split the batch");
  const LaunchPlans plans = deltanet_forward_plans(d.B, d.T, d.H, d.Dk, d.Dv, d.C, p.precision, p.seqs.count);
  if (d.chunks() == 0) {  // no tokens: the state pass alone (ht = h0)
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_states_kernel)(p);
  } else {
    switch (p.precision) {
      case MatmulPrecision::f32: forward_launches<MatmulPrecision::f32>(plans, p); break;
      case MatmulPrecision::tf32: forward_launches<MatmulPrecision::tf32>(plans, p); break;
      case MatmulPrecision::bf16: forward_launches<MatmulPrecision::bf16>(plans, p); break;
    }
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void deltanet_chunk_backward(const DeltaNetArgs<float>& p, float* work) {
  const delta::Dims d = delta::dims(p);
  check_chunk(d, "deltanet (cuda)");
  if (d.B * d.H == 0) return;
  LINATTN_CHECK(d.sequences() * d.H <= 65535, "deltanet (cuda): sequences * heads = ", d.sequences() * d.H,
                " exceeds the CUDA grid's 65535 (the state pass's grid y); split the batch");
  const LaunchPlans plans = deltanet_backward_plans(d.B, d.T, d.H, d.Dk, d.Dv, d.C, p.precision, p.seqs.count);
  if (d.chunks() == 0) {  // no tokens: the state pass alone (dh0 += dht)
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_backward_states_kernel)(p, work);
  } else {
    switch (delta::backward_precision(d, p.precision)) {
      case MatmulPrecision::f32: backward_launches<MatmulPrecision::f32>(plans, p, work); break;
      case MatmulPrecision::tf32: backward_launches<MatmulPrecision::tf32>(plans, p, work); break;
      case MatmulPrecision::bf16: backward_launches<MatmulPrecision::bf16>(plans, p, work); break;
    }
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void deltanet_recurrent_forward(const DeltaNetArgs<float>& p, float* state) {
  const delta::Dims d = delta::dims(p);
  if (d.B * d.H == 0) return;
  LINATTN_LAUNCH_PLAN(deltanet_recurrent_plan(d.B, d.T, d.H, d.Dk, d.Dv, p.seqs.count), stream(),
                      recurrent_forward_kernel)(p, state);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
