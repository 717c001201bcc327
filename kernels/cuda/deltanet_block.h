// The per-(batch, head) work of the CUDA DeltaNet and Gated DeltaNet kernels (deltanet.cu), written
// once for a `Block` of cooperating threads so that the same code runs on the device (one CUDA block
// per head, DeviceBlock) and on the host (tests/cuda/deltanet_test.cpp runs it with a sequential
// block against the CPU kernels, so the math is checked on machines without a GPU).
//
// The math is the CPU kernels' (kernels/cpu/deltanet.h), cut into the same named stages as
// kernels/cpu/deltanet_stages.h (where the derivations are), with the same arguments (DeltaNetArgs)
// and the same `saved` layout, so autograd allocates one buffer for both devices: per (batch, head)
// and chunk, S0 [Dk, Dv], A^-1 [C, C], PG [C, C], U' [C, Dv], R [C, Dv].
// The forward is three launches (deltanet.cu), so that only the light state pass walks the chunks in
// order: chunk_factors (A^-1 and PG, which need no state; one block per chunk), chunk_states (the
// state pass, S0 of every chunk, R and U'; one block per head and tile of state columns, since the
// columns of the delta rule's state evolve independently) and chunk_outputs (O; one block per chunk).
// The backward's chunks run one after the other inside the block. Within a stage every phase is a loop over the
// elements of one output (Block::each), separated by Block::sync, and every element is written by
// one iteration only, so the phases have no races whatever order the iterations run in. A stage
// ends with a sync, except the ones marked "open": their last phase runs beside the next stage's
// first (which neither reads what it writes nor writes what it reads), so that a phase of few
// threads (the columns of A^-1, a sum per token) shares the block with a wide one. The stages'
// loops copy what they use ([=]), so work a block defers past a stage's return stays valid.
// Three places differ from the CPU's cut, to keep each element's sums as they were: the backward's
// state_pass_backward comes before intra_output_backward_du, which adds both parts of dU' in one
// expression; inter_output_backward leaves its dQ term in z for scores_backward to add; and
// decay_backward folds state_backward's partial sums <dS1, S0> into gamma_last's gradient.
//
// Fast memory: the gates and the C x C products of the current chunk live in `sh` (shared memory
// on the device, factors_shared, gates_shared or backward_shared elements); the states and the [C, D] products in
// `saved` and in the backward's `work` (backward_work elements per head) in global memory.
// Accumulation is in T (float on the device): float32 states and inter-chunk recurrence.
#pragma once

#include <cstdint>

#include "kernels/deltanet.h"
#include "kernels/cuda/host_device.h"

namespace linattn::cuda::delta {

template <class T>
using Args = DeltaNetArgs<T>;

template <class T>
LINATTN_HD inline T absval(T x) { return x < T(0) ? -x : x; }
LINATTN_HD inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Sizes of one call; tensors as in kernels/cpu/deltanet.h (contiguous [B, T, H, D] and [B, T, H]).
struct Dims {
  int64_t B, T, H, Dk, Dv, C;
  LINATTN_HD int64_t chunks() const { return (T + C - 1) / C; }
  LINATTN_HD int64_t block() const { return Dk * Dv + 2 * C * C + 2 * C * Dv; }  // one chunk's `saved`
  LINATTN_HD int64_t state() const { return Dk * Dv; }
};
template <class T>
LINATTN_HD Dims dims(const Args<T>& p) {
  return {p.B, p.len, p.H, p.Dk, p.Dv, p.chunk_size};
}

// chunk_factors: the gates, M [C, C] and the chunk's K [C, Dk + 1] (padded rows: see chunk_factors).
LINATTN_HD inline int64_t factors_shared(const Dims& d) { return 4 * d.C + d.C * d.C + d.C * (d.Dk + 1); }
LINATTN_HD inline int64_t gates_shared(const Dims& d) { return 4 * d.C; }  // chunk_states, chunk_outputs
LINATTN_HD inline int64_t backward_shared(const Dims& d) { return 8 * d.C + d.C * d.C + d.Dk; }
LINATTN_HD inline int64_t backward_work(const Dims& d) { return d.Dk * d.Dv + 4 * d.C * d.Dv + d.C * d.Dk; }
LINATTN_HD inline int64_t recurrent_shared(const Dims& d) { return d.Dv; }

// One chunk's view: where its tokens start in q/k (qk), v/o (vo) and beta/a (s); ld* token strides.
struct ChunkAt {
  int64_t t0, n, qk, vo, s;
};
LINATTN_HD inline ChunkAt chunk_at(const Dims& d, int64_t bh, int64_t c) {
  const int64_t b = bh / d.H, h = bh % d.H, t0 = c * d.C;
  const int64_t row = (b * d.T + t0) * d.H + h;
  return {t0, min64(d.C, d.T - t0), row * d.Dk, row * d.Dv, row};
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
    const int64_t i = e / n, j = e % n;
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
    const int64_t i = e / cs.nv, j = cs.j0 + e % cs.nv;
    T acc = 0;
    for (int64_t x = 0; x < s.Dk; ++x) acc += k[i * s.ldk + x] * S0[x * Dv + j];
    R[i * Dv + j] = v[i * s.ldv + j] - g.gamma[i] * acc;
  });
  blk.sync();
  blk.each(n * cs.nv, [=](int64_t e) {
    const int64_t i = e / cs.nv, j = cs.j0 + e % cs.nv;
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
    const int64_t i = e / n, j = e % n;
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
    const int64_t i = e / Dv, j = e % Dv;
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
      const int64_t x = e / cs.nv, j = cs.j0 + e % cs.nv, at = x * Dv + j;
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
  const int64_t C = d.C, Dk = d.Dk, ldk = Dk + 1;
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* M = sh + 4 * C;  // K K^T . D, then P = tril(Q K^T) . D
  T* k = M + C * C;   // [C, Dk + 1]
  const ChunkAt at = chunk_at(d, bh, c);
  const Shape s = shape(d, at);
  Shape sk = s;
  sk.ldk = ldk;
  T* ainv_s = p.saved + (bh * d.chunks() + c) * d.block() + d.state();
  T* pg = ainv_s + C * C;
  const T *q = p.q + at.qk, *kg = p.k + at.qk;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
  blk.each(at.n * Dk, [=](int64_t e) { k[(e / Dk) * ldk + e % Dk] = kg[(e / Dk) * s.ldk + e % Dk]; });
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
  const int64_t C = d.C, NC = d.chunks(), Dv = d.Dv, S = d.state();
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  T* base = p.saved + bh * NC * d.block();
  const T* h0 = p.h0 ? p.h0 + bh * S : nullptr;
  T* ht = p.ht ? p.ht + bh * S : nullptr;
  T* first = NC > 0 ? base : ht;  // T == 0: the final state is the initial one
  if (first)
    blk.each(d.Dk * cs.nv, [=](int64_t e) {
      const int64_t at = (e / cs.nv) * Dv + cs.j0 + e % cs.nv;
      first[at] = h0 ? h0[at] : T(0);
    });
  blk.sync();
  for (int64_t c = 0; c < NC; ++c) {
    const ChunkAt at = chunk_at(d, bh, c);
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
  const T* S0 = p.saved + (bh * d.chunks() + c) * d.block();
  const T *pg = S0 + d.state() + C * C, *U = pg + C * C;
  chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, d.H, at.n);
  blk.sync();  // chunk_output reads the decays
  chunk_output(blk, p.o + at.vo, p.q + at.qk, S0, pg, U, p.scale, g, shape(d, at));
  blk.sync();
}

// ---- backward stages (in the order they run; kernels/cpu/deltanet_stages.h has the derivations) --

// The gradient accumulators of the current chunk, in sh ([C] each): gdg = gamma dLoss/dgamma,
// dlambda, dG (dLoss/dG), db (the chunk's dbeta).
template <class T>
struct GateGrads {
  T *gdg, *dlambda, *dG, *db;
};

// S1 = gamma_last S0 + K^T diag(lambda) U'  =>  y = K dS1 (dU' += diag(lambda) y, added by
// intra_output_backward_du), dK += diag(lambda) U' dS1^T, dlambda_i = y_i . U'_i. Open.
template <class T, class Block>
LINATTN_HD void state_pass_backward(const Block& blk, T* y, T* dk, const GateGrads<T>& gg, const T* dS, const T* k,
                                    const T* U, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const int64_t i = e / Dv, j = e % Dv;
    T acc = 0;
    for (int64_t t = 0; t < Dk; ++t) acc += k[i * s.ldk + t] * dS[t * Dv + j];
    y[i * Dv + j] = acc;
  });
  blk.sync();
  blk.each(n * Dk, [=](int64_t e) {
    const int64_t i = e / Dk, t = e % Dk;
    dk[i * s.ldk + t] += g.lambda[i] * dot(U + i * Dv, dS + t * Dv, Dv);
  });
  blk.each(n, [=](int64_t i) { gg.dlambda[i] = dot(y + i * Dv, U + i * Dv, Dv); });
}

// O += scale P U'  =>  dU' = scale P^T dO, plus the state pass's diag(lambda) y.
template <class T, class Block>
LINATTN_HD void intra_output_backward_du(const Block& blk, T* du, const T* pg, const T* dO, const T* y, T scale,
                                         const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const int64_t i = e / Dv, j = e % Dv;
    T acc = 0;
    for (int64_t m = i; m < n; ++m) acc += pg[m * s.C + i] * dO[m * s.ldv + j];
    du[i * Dv + j] = scale * acc + g.lambda[i] * y[i * Dv + j];
  });
  blk.sync();
}

// U' = A^-1 diag(beta) R  =>  X = A^-T dU', dR = diag(beta) X, dbeta_i += R_i . X_i;
// R = V - diag(gamma) K S0  =>  dV += dR, gamma_i dgamma_i += dR_i . (R_i - V_i),
// dK -= diag(gamma) dR S0^T; dr = diag(gamma) dR (for dS0 in state_backward). Open.
template <class T, class Block>
LINATTN_HD void wy_backward(const Block& blk, T* x, T* dr, T* dv, T* dk, const GateGrads<T>& gg, const T* du,
                            const T* ainv, const T* R, const T* v, const T* S0, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(n * Dv, [=](int64_t e) {
    const int64_t i = e / Dv, j = e % Dv;
    T acc = 0;
    for (int64_t m = i; m < n; ++m) acc += ainv[m * s.C + i] * du[m * Dv + j];
    x[i * Dv + j] = acc;
  });
  blk.sync();
  blk.each(n, [=](int64_t i) {
    T acc_beta = 0, acc_gamma = 0;
    for (int64_t j = 0; j < Dv; ++j) {
      const T xi = x[i * Dv + j], ri = R[i * Dv + j];
      acc_beta += ri * xi;
      acc_gamma += xi * (ri - v[i * s.ldv + j]);
    }
    gg.db[i] += acc_beta;
    gg.gdg[i] += g.bt[i] * acc_gamma;
  });
  blk.each(n * Dv, [=](int64_t e) {
    const int64_t i = e / Dv, j = e % Dv;
    const T dR = g.bt[i] * x[i * Dv + j];
    dv[i * s.ldv + j] += dR;
    dr[i * Dv + j] = g.gamma[i] * dR;
  });
  blk.sync();
  blk.each(n * s.Dk, [=](int64_t e) {
    const int64_t i = e / s.Dk, t = e % s.Dk;
    dk[i * s.ldk + t] -= dot(dr + i * Dv, S0 + t * Dv, Dv);
  });
}

// O = scale diag(gamma) Q S0 + ...  =>  z = dO S0^T (dQ += scale diag(gamma) z, added by
// scores_backward), gamma_i dgamma_i += scale gamma_i q_i . z_i. Open.
template <class T, class Block>
LINATTN_HD void inter_output_backward(const Block& blk, T* z, const GateGrads<T>& gg, const T* q, const T* dO,
                                      const T* S0, T scale, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dk = s.Dk;
  blk.each(n * Dk, [=](int64_t e) {
    const int64_t i = e / Dk, t = e % Dk;
    z[i * Dk + t] = dot(dO + i * s.ldv, S0 + t * s.Dv, s.Dv);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) { gg.gdg[i] += scale * g.gamma[i] * dot(q + i * s.ldk, z + i * Dk, Dk); });
}

// P = tril(Q K^T) . D with O += scale P U'  =>  dP = scale tril(dO U'^T) (into M);
// D_ij = exp(G_i - G_j): dG_i += dP_ij P_ij, dG_j -= dP_ij P_ij; dQ += (dP . D) K + scale diag(gamma) z,
// dK += (dP . D)^T Q.
template <class T, class Block>
LINATTN_HD void scores_backward(const Block& blk, T* M, T* dq, T* dk, const GateGrads<T>& gg, const T* pg, const T* q,
                                const T* k, const T* dO, const T* U, const T* z, T scale, const Gates<T>& g,
                                const Shape& s) {
  const int64_t n = s.n, C = s.C, Dk = s.Dk;
  blk.each(n * n, [=](int64_t e) {
    const int64_t i = e / n, j = e % n;
    M[i * C + j] = j <= i ? scale * dot(dO + i * s.ldv, U + j * s.Dv, s.Dv) : T(0);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) {
    T acc = 0;
    for (int64_t j = 0; j < i; ++j) acc += M[i * C + j] * pg[i * C + j];
    for (int64_t m = i + 1; m < n; ++m) acc -= M[m * C + i] * pg[m * C + i];
    gg.dG[i] += acc;
  });
  blk.sync();
  blk.each(n * n, [=](int64_t e) {
    const int64_t i = e / n, j = e % n;
    if (j <= i) M[i * C + j] *= decay_ratio(g.G, i, j);
  });
  blk.sync();
  blk.each(n * Dk, [=](int64_t e) {
    const int64_t i = e / Dk, t = e % Dk;
    T aq = 0, ak = 0;
    for (int64_t j = 0; j <= i; ++j) aq += M[i * C + j] * k[j * s.ldk + t];
    for (int64_t m = i; m < n; ++m) ak += M[m * C + i] * q[m * s.ldk + t];
    dq[i * s.ldk + t] += aq + scale * g.gamma[i] * z[i * Dk + t];
    dk[i * s.ldk + t] += ak;
  });
  blk.sync();
}

// A = I + L, L_ij = beta_i gd_ij (j < i; gd above the diagonal of PG):  dA = -X U'^T, held
// transposed in M: dLT_ji = -U'_j . X_i (i > j). Then dbeta_i += sum_j dL_ij gd_ij;
// dG_i += beta_i dL_ij gd_ij, dG_j -= the same; dK += (F + F^T) K with F_ij = beta_i dL_ij D_ij (j < i).
// Open.
template <class T, class Block>
LINATTN_HD void gram_solve_backward(const Block& blk, T* M, T* dk, const GateGrads<T>& gg, const T* U, const T* x,
                                    const T* pg, const T* k, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, C = s.C;
  blk.each(n * n, [=](int64_t e) {
    const int64_t j = e / n, i = e % n;
    M[j * C + i] = i > j ? -dot(U + j * s.Dv, x + i * s.Dv, s.Dv) : T(0);
  });
  blk.sync();
  blk.each(n, [=](int64_t i) {
    T acc_beta = 0, acc_g = 0;
    for (int64_t j = 0; j < i; ++j) acc_beta += M[j * C + i] * pg[j * C + i];
    for (int64_t m = i + 1; m < n; ++m) acc_g += g.bt[m] * M[i * C + m] * pg[i * C + m];
    gg.db[i] += acc_beta;
    gg.dG[i] += g.bt[i] * acc_beta - acc_g;
  });
  blk.each(n * s.Dk, [=](int64_t e) {
    const int64_t i = e / s.Dk, t = e % s.Dk;
    T acc = 0;
    for (int64_t m = 0; m < i; ++m) acc += g.bt[i] * M[m * C + i] * decay_ratio(g.G, i, m) * k[m * s.ldk + t];
    for (int64_t m = i + 1; m < n; ++m) acc += g.bt[m] * M[i * C + m] * decay_ratio(g.G, m, i) * k[m * s.ldk + t];
    dk[i * s.ldk + t] += acc;
  });
}

// dS0 = gamma_last dS1 + scale Q^T diag(gamma) dO - K^T dr, in place in dS, after the partial sums
// part_t = <dS1, S0>_t [Dk] (in sh) that decay_backward turns into gamma_last's gradient. Open.
template <class T, class Block>
LINATTN_HD void state_backward(const Block& blk, T* dS, T* part, const T* S0, const T* q, const T* k, const T* dO,
                               const T* dr, T scale, const Gates<T>& g, const Shape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  blk.each(s.Dk, [=](int64_t t) { part[t] = dot(dS + t * Dv, S0 + t * Dv, Dv); });
  blk.sync();
  blk.each(s.Dk * Dv, [=](int64_t e) {
    const int64_t t = e / Dv, j = e % Dv;
    T acc = 0;
    for (int64_t i = 0; i < n; ++i)
      acc += scale * q[i * s.ldk + t] * g.gamma[i] * dO[i * s.ldv + j] - k[i * s.ldk + t] * dr[i * Dv + j];
    dS[e] = g.gamma[n - 1] * dS[e] + acc;
  });
}

// The chunk's dbeta; and with gates: gamma_last dgamma_last += gamma_last <dS1, S0> (the sum of
// state_backward's partials), dG_i += gdg_i - lambda_i dlambda_i, dG_last += sum lambda_i dlambda_i,
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
      gg.dG[i] += gg.gdg[i] - g.lambda[i] * gg.dlambda[i];
      lam += g.lambda[i] * gg.dlambda[i];
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

// ---- the chunkwise backward of head bh ----------------------------------------------------------
template <class T, class Block>
LINATTN_HD void chunk_backward_head(const Block& blk, const Args<T>& p, T* work, int64_t bh, T* sh) {
  const Dims d = dims(p);
  const int64_t C = d.C, NC = d.chunks(), Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state();
  const Gates<T> g{sh, sh + C, sh + 2 * C, sh + 3 * C};
  const GateGrads<T> gg{sh + 4 * C, sh + 5 * C, sh + 6 * C, sh + 7 * C};
  T* M = sh + 8 * C;    // dP (then dP . D), then dL^T
  T* part = M + C * C;  // [Dk] partial sums of <dS, S0>
  T* dS = work + bh * backward_work(d);  // dLoss/dS after the current chunk
  T *y = dS + S, *du = y + C * Dv, *x = du + C * Dv, *dr = x + C * Dv, *z = dr + C * Dv;
  const T* base = p.saved + bh * NC * d.block();
  blk.each(S, [&](int64_t e) { dS[e] = p.dht ? p.dht[bh * S + e] : T(0); });
  blk.sync();
  for (int64_t c = NC - 1; c >= 0; --c) {
    const ChunkAt at = chunk_at(d, bh, c);
    const Shape s{at.n, C, Dk, Dv, H * Dk, H * Dv, H};
    const T* S0 = base + c * d.block();
    const T *ainv = S0 + S, *pg = ainv + C * C, *U = pg + C * C, *R = U + C * Dv;
    const T *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *dO = p.dO + at.vo;
    T *dq = p.dq + at.qk, *dk = p.dk + at.qk, *dv = p.dv + at.vo;
    // (the open stages run their last phase beside the next stage's first: see the top)
    chunk_decays(blk, g, p.beta + at.s, p.a ? p.a + at.s : nullptr, H, at.n);
    const int64_t n = at.n;
    blk.one([=] {
      for (int64_t i = 0; i < n; ++i) gg.gdg[i] = gg.dG[i] = gg.db[i] = 0;
    });
    state_pass_backward(blk, y, dk, gg, dS, k, U, g, s);
    intra_output_backward_du(blk, du, pg, dO, y, p.scale, g, s);
    wy_backward(blk, x, dr, dv, dk, gg, du, ainv, R, v, S0, g, s);
    inter_output_backward(blk, z, gg, q, dO, S0, p.scale, g, s);
    scores_backward(blk, M, dq, dk, gg, pg, q, k, dO, U, z, p.scale, g, s);
    gram_solve_backward(blk, M, dk, gg, U, x, pg, k, g, s);
    state_backward(blk, dS, part, S0, q, k, dO, dr, p.scale, g, s);
    decay_backward(blk, p.dbeta + at.s, p.da ? p.da + at.s : nullptr, gg, part, g, H, Dk, at.n);
  }
  if (p.dh0) blk.each(S, [&](int64_t e) { p.dh0[bh * S + e] += dS[e]; });
  blk.sync();
}

// ---- the recurrent forward of head bh: S_t = exp(a_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
// o_t = scale S_t^T q_t. The state lives in `state` (global, [Dk, Dv] for this head); sh: u [Dv].
template <class T, class Block>
LINATTN_HD void recurrent_forward_head(const Block& blk, const Args<T>& p, T* state, int64_t bh, T* sh) {
  const Dims d = dims(p);
  const int64_t Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state(), ldk = H * Dk, ldv = H * Dv;
  T* u = sh;
  const ChunkAt at = chunk_at(d, bh, 0);  // where token 0 is
  blk.each(S, [&](int64_t e) { state[e] = p.h0 ? p.h0[bh * S + e] : T(0); });
  blk.sync();
  for (int64_t t = 0; t < d.T; ++t) {
    const T *qt = p.q + at.qk + t * ldk, *kt = p.k + at.qk + t * ldk, *vt = p.v + at.vo + t * ldv;
    const T beta = p.beta[at.s + t * H], decay = p.a ? exp_(p.a[at.s + t * H]) : T(1);
    // u = beta (v - decay S^T k)
    blk.each(Dv, [&](int64_t j) {
      T acc = 0;
      for (int64_t i = 0; i < Dk; ++i) acc += kt[i] * state[i * Dv + j];
      u[j] = beta * (vt[j] - decay * acc);
    });
    blk.sync();
    blk.each(S, [&](int64_t e) { state[e] = decay * state[e] + kt[e / Dv] * u[e % Dv]; });
    blk.sync();
    blk.each(Dv, [&](int64_t j) {
      T acc = 0;
      for (int64_t i = 0; i < Dk; ++i) acc += qt[i] * state[i * Dv + j];
      p.o[at.vo + t * ldv + j] = p.scale * acc;
    });
    blk.sync();
  }
  if (p.ht) blk.each(S, [&](int64_t e) { p.ht[bh * S + e] = state[e]; });
  blk.sync();
}

}  // namespace linattn::cuda::delta
