// The stages of the chunkwise DeltaNet and Gated DeltaNet (kernels/cpu/deltanet.h has the math),
// one function per stage of one chunk of one (batch, head), shared by both mixers: a stage that
// uses the decays reads them from ChunkDecays, which says whether there are any (without gates
// every decay factor is 1 and the stage skips the multiplications by it). deltanet.cpp runs them in
// order; tests/kernels/deltanet_stages_test.cpp checks each alone against a naive float64 version.
// The names of fla's kernels that do the same work are given beside each stage.
//
// Forward, per chunk:                                  Backward, per chunk, last chunk first:
//   chunk_decays      G, gamma, lambda, D               intra_output_backward_du   dU' = scale P^T dO
//   gram_kkt          K K^T . D                         state_pass_backward        through S1
//   solve_unit_lower  A^-1                              wy_backward                through U' and R
//   wy_updates        R, U'                             scores_backward            through P
//   causal_scores_qk  P                                 inter_output_backward      through diag(gamma) Q S0
//   chunk_output      O                                 gram_solve_backward        through A
//   state_pass        S1                                state_backward             dS0
//                                                       decay_backward             da
// The backward stages run in the order that accumulates every gradient in the same order as the
// single-function backward they were cut from (so its results are reproduced bit for bit).
//
// Conventions: one chunk of n <= C tokens; q, k, v, o, dq, dk, dv, dO point at the chunk's first
// token row in the [B, T, H, D] tensors (token strides ldk, ldv); beta, a, dbeta, da at its first
// scalar (stride H); [C, C] blocks have leading dimension C, [C, D] blocks are contiguous. A state
// pointer S0 that is null is the zero state (the first chunk without h0): its products are skipped.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/chunk_util.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu::deltanet {

// Where a chunk's rows are and how big it is.
struct ChunkShape {
  int64_t n;         // tokens in this chunk (<= C)
  int64_t C;         // the chunk size: leading dimension of the [C, C] blocks
  int64_t Dk, Dv;    // head sizes
  int64_t ldk, ldv;  // token strides of q, k (H * Dk) and of v, o (H * Dv)
  int64_t H;         // stride of the per-token scalars (beta, a)
};

// The decays of one chunk ([C] each, D [C, C]); `gated` false: DeltaNet, where only D is used and
// holds ones (filled once by the caller), and the stages skip every other decay factor.
template <class T>
struct ChunkDecays {
  bool gated;
  T *G, *gamma, *inv_gamma, *lambda, *D;
};

// ---- forward ------------------------------------------------------------------------------------

// (fla: chunk_local_cumsum) G = inclusive cumulative sum of a, gamma_i = exp(G_i),
// lambda_i = exp(G_last - G_i), and the symmetric decay matrix D_ij = exp(-|G_i - G_j|)
// (= exp(G_i - G_j) for j <= i, as G never increases). Every exponent is <= 0, so nothing
// overflows. While G stays above -60 the ratios gamma_i / gamma_j are exact to a few ulps and cost
// a multiply; below, D falls back to one exp per entry.
template <class T>
void chunk_decays(const ChunkDecays<T>& g, const T* a, const ChunkShape& s) {
  const int64_t n = s.n, C = s.C, H = s.H;
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += a[i * H];
    g.G[i] = acc;
  }
  const bool ratio = g.G[n - 1] >= T(-60);
  for (int64_t i = 0; i < n; ++i) {
    g.gamma[i] = std::exp(g.G[i]);
    g.lambda[i] = std::exp(g.G[n - 1] - g.G[i]);
    g.inv_gamma[i] = ratio ? std::exp(-g.G[i]) : T(0);
  }
  for (int64_t r = 0; r < n; ++r) {
    T* row = g.D + r * C;
    if (ratio) {
      const T gr = g.gamma[r], ir = g.inv_gamma[r];
      for (int64_t c = 0; c <= r; ++c) row[c] = gr * g.inv_gamma[c];
      for (int64_t c = r + 1; c < n; ++c) row[c] = g.gamma[c] * ir;
    } else {
      for (int64_t c = 0; c < n; ++c) row[c] = std::exp(-std::abs(g.G[r] - g.G[c]));
    }
  }
}

// (fla: chunk_scaled_dot_kkt, with beta applied in the solve) gd = K K^T . D, all n x n of it
// (symmetric; the backward reads its upper triangle).
template <class T>
void gram_kkt(T* gd, const T* k, const ChunkDecays<T>& g, const ChunkShape& s) {
  const int64_t n = s.n, C = s.C;
  gemm<T>(false, true, n, n, s.Dk, T(1), k, s.ldk, k, s.ldk, T(0), gd, C);
  if (g.gated)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) gd[i * C + j] *= g.D[i * C + j];
}

// (fla: solve_tril) ainv = A^-1, A = I + L with L_ij = beta_i gd_ij for j < i, by forward
// substitution: row i of A^-1 = e_i - sum_{j<i} L_ij (row j of A^-1). Row j is zero right of
// column j, so each block of kW columns starting at m0 only needs rows j >= m0; the block's sums
// stay in registers. Writes zeros above the diagonal. l: scratch [C].
template <class T>
void solve_unit_lower(T* ainv, const T* gd, const T* beta, const ChunkShape& s, T* l) {
  constexpr int64_t kW = 64 / sizeof(T);  // two AVX2 registers of columns
  const int64_t n = s.n, C = s.C;
  for (int64_t i = 0; i < n; ++i) {
    T* row = ainv + i * C;
    const T bi = beta[i * s.H];
    for (int64_t j = 0; j < i; ++j) l[j] = bi * gd[i * C + j];
    int64_t m0 = 0;
    for (; m0 < n && m0 + kW <= C; m0 += kW) {
      T acc[kW] = {};
      for (int64_t j = m0; j < i; ++j) {
        const T lj = l[j];
        const T* rj = ainv + j * C + m0;
#pragma omp simd
        for (int64_t m = 0; m < kW; ++m) acc[m] -= lj * rj[m];
      }
      for (int64_t m = 0; m < kW; ++m) row[m0 + m] = acc[m];
    }
    for (int64_t m = m0; m < n; ++m) {  // a last partial block when C is not a multiple of kW
      T acc = 0;
      for (int64_t j = m; j < i; ++j) acc -= l[j] * ainv[j * C + m];
      row[m] = acc;
    }
    row[i] = 1;
  }
}

// (fla: recompute_w_u and the new values of chunk_gated_delta_rule_fwd_h, in one)
// r = R = V - diag(gamma) K S0 (what the state does not already predict), rb = diag(beta) R, and
// the state updates u = U' = A^-1 diag(beta) R. r, rb, u: [C, Dv].
template <class T>
void wy_updates(T* u, T* r, T* rb, const T* ainv, const T* k, const T* v, const T* beta, const T* S0,
                const ChunkDecays<T>& g, const ChunkShape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  if (S0) gemm<T>(false, false, n, Dv, s.Dk, T(1), k, s.ldk, S0, Dv, T(0), r, Dv);
  for (int64_t i = 0; i < n; ++i) {
    const T gi = !S0 ? T(0) : g.gated ? g.gamma[i] : T(1), bi = beta[i * s.H];
    const T* vi = v + i * s.ldv;
    T* ri = r + i * Dv;
    T* rbi = rb + i * Dv;
    if (!S0) std::fill(ri, ri + Dv, T(0));  // no K S0 product was made
#pragma omp simd
    for (int64_t j = 0; j < Dv; ++j) {
      ri[j] = vi[j] - gi * ri[j];
      rbi[j] = bi * ri[j];
    }
  }
  causal_times(n, Dv, T(1), ainv, s.C, rb, Dv, T(0), u, Dv);
}

// (fla: the scores of chunk_fwd_o) P = tril(Q K^T) . D, zero above the diagonal, and the saved PG:
// P on and below the diagonal, gd above it.
template <class T>
void causal_scores_qk(T* P, T* pg, const T* q, const T* k, const T* gd, const ChunkDecays<T>& g,
                      const ChunkShape& s) {
  const int64_t n = s.n, C = s.C;
  causal_scores(n, s.Dk, T(1), q, s.ldk, k, s.ldk, P, C);
  for (int64_t i = 0; i < n; ++i) {
    T* p = P + i * C;
    T* pgi = pg + i * C;
    for (int64_t j = 0; j <= i; ++j) pgi[j] = p[j] *= g.D[i * C + j];
    for (int64_t j = i + 1; j < n; ++j) {
      p[j] = 0;
      pgi[j] = gd[i * C + j];
    }
  }
}

// (fla: chunk_fwd_o) O = scale diag(gamma) Q S0 + scale P U'.
template <class T>
void chunk_output(T* o, const T* q, const T* S0, const T* P, const T* u, T scale, const ChunkDecays<T>& g,
                  const ChunkShape& s) {
  const int64_t n = s.n, Dv = s.Dv, ldv = s.ldv;
  if (S0) {
    gemm<T>(false, false, n, Dv, s.Dk, scale, q, s.ldk, S0, Dv, T(0), o, ldv);
    if (g.gated)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < Dv; ++j) o[i * ldv + j] *= g.gamma[i];
  }
  causal_times(n, Dv, scale, P, s.C, u, Dv, S0 ? T(1) : T(0), o, ldv);
}

// (fla: chunk_gated_delta_rule_fwd_h, one chunk) S1 = gamma_last S0 + K^T diag(lambda) U'.
// S0 is never null here (the zero state is zeros). ul: scratch [C, Dv] for diag(lambda) U'.
template <class T>
void state_pass(T* S1, const T* S0, const T* k, const T* u, const ChunkDecays<T>& g, const ChunkShape& s, T* ul) {
  const int64_t n = s.n, Dv = s.Dv, state = s.Dk * Dv;
  const T g_last = g.gated ? g.gamma[n - 1] : T(1);
  for (int64_t i = 0; i < state; ++i) S1[i] = g_last * S0[i];
  const T* u_scaled = u;
  if (g.gated) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < Dv; ++j) ul[i * Dv + j] = g.lambda[i] * u[i * Dv + j];
    u_scaled = ul;
  }
  gemm<T>(true, false, s.Dk, Dv, n, T(1), k, s.ldk, u_scaled, Dv, T(1), S1, Dv);
}

// ---- backward -----------------------------------------------------------------------------------
// The gradients of one chunk, given dO and dS = dS1 (replaced by dS0 in state_backward). With
// X = A^-T dU':  U' = A^-1 Rb (Rb = diag(beta) R)  =>  dRb = X,  dA = -A^-T dU' Rb^T A^-T = -X U'^T,
// so neither T = A^-1 diag(beta) nor W is ever formed, and nothing is recomputed. Gate gradients are
// collected per position as dG_i (G = cumulative log-decay) and gdg_i = gamma_i dLoss/dgamma_i,
// dlambda_i = dLoss/dlambda_i, and turned into da by decay_backward at the end of the chunk.

// Per-chunk gradient accumulators ([C] each, zeroed by the caller before the chunk; gdg, dG and
// dlambda are used by the gated form only).
template <class T>
struct ChunkGateGrads {
  T *gdg, *dlambda, *dG, *db;
};

// (fla: chunk_bwd_dv_local) forward: O += scale P U'  =>  du = dU' = scale P^T dO. du: [C, Dv].
template <class T>
void intra_output_backward_du(T* du, const T* P, const T* dO, T scale, const ChunkShape& s) {
  causal_transposed_times(s.n, s.Dv, scale, P, s.C, dO, s.ldv, T(0), du, s.Dv);
}

// forward: S1 = gamma_last S0 + K^T diag(lambda) U'
//   =>  dU' += diag(lambda) K dS1,  dK += diag(lambda) U' dS1^T,  dlambda_i = (K dS1)_i . U'_i
// (the dS0 part, gamma_last dS1, is taken in state_backward). y, ul: scratch [C, Dv].
template <class T>
void state_pass_backward(T* du, T* dk, const ChunkGateGrads<T>& gg, const T* dS, const T* k, const T* u,
                         const ChunkDecays<T>& g, const ChunkShape& s, T* y, T* ul) {
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv;
  const T* u_scaled = u;
  if (g.gated) {
    gemm<T>(false, false, n, Dv, Dk, T(1), k, s.ldk, dS, Dv, T(0), y, Dv);
    for (int64_t i = 0; i < n; ++i) {
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < Dv; ++j) {
        acc += y[i * Dv + j] * u[i * Dv + j];
        du[i * Dv + j] += g.lambda[i] * y[i * Dv + j];
        ul[i * Dv + j] = g.lambda[i] * u[i * Dv + j];
      }
      gg.dlambda[i] = acc;
    }
    u_scaled = ul;
  } else {
    gemm<T>(false, false, n, Dv, Dk, T(1), k, s.ldk, dS, Dv, T(1), du, Dv);
  }
  gemm<T>(false, true, n, Dk, Dv, T(1), u_scaled, Dv, dS, Dv, T(1), dk, s.ldk);
}

// (fla: prepare_wy_repr_bwd, the value half)
// forward: U' = A^-1 diag(beta) R  =>  X = A^-T dU',  dR = diag(beta) X,  dbeta_i += R_i . X_i
// forward: R = V - diag(gamma) K S0
//   =>  dV += dR,  dK -= diag(gamma) dR S0^T,  gamma_i dgamma_i += dR_i . (R_i - V_i)
// (and dS0 -= K^T diag(gamma) dR, taken in state_backward). x = X and dr = diag(gamma) dR: [C, Dv].
template <class T>
void wy_backward(T* x, T* dr, T* dv, T* dk, const ChunkGateGrads<T>& gg, const T* du, const T* ainv, const T* r,
                 const T* v, const T* beta, const T* S0, const ChunkDecays<T>& g, const ChunkShape& s) {
  const int64_t n = s.n, Dv = s.Dv;
  causal_transposed_times(n, Dv, T(1), ainv, s.C, du, Dv, T(0), x, Dv);
  for (int64_t i = 0; i < n; ++i) {
    const T bi = beta[i * s.H], gi = g.gated ? g.gamma[i] : T(1);
    const T *xi = x + i * Dv, *ri = r + i * Dv, *vi = v + i * s.ldv;
    T* dvi = dv + i * s.ldv;
    T* dri = dr + i * Dv;
    T acc_beta = 0;
#pragma omp simd reduction(+ : acc_beta)
    for (int64_t j = 0; j < Dv; ++j) {
      acc_beta += ri[j] * xi[j];
      dvi[j] += bi * xi[j];
      dri[j] = gi * bi * xi[j];
    }
    gg.db[i] += acc_beta;
    if (g.gated) {
      T acc_gamma = 0;
#pragma omp simd reduction(+ : acc_gamma)
      for (int64_t j = 0; j < Dv; ++j) acc_gamma += xi[j] * (ri[j] - vi[j]);
      gg.gdg[i] += bi * acc_gamma;
    }
  }
  if (S0) gemm<T>(false, true, n, s.Dk, Dv, T(-1), dr, Dv, S0, Dv, T(1), dk, s.ldk);
}

// (fla: the intra-chunk part of chunk_bwd_dqkwg)
// forward: P = tril(Q K^T) . D  with  O += scale P U'
//   =>  dP = scale tril(dO U'^T);  dQ += (dP . D) K,  dK += (dP . D)^T Q;
//       D_ij = exp(G_i - G_j): dG_i += dP_ij P_ij, dG_j -= dP_ij P_ij
// P: the chunk's scores (zero above the diagonal). dP: scratch [C, C].
template <class T>
void scores_backward(T* dq, T* dk, const ChunkGateGrads<T>& gg, const T* P, const T* q, const T* k, const T* dO,
                     const T* u, T scale, const ChunkDecays<T>& g, const ChunkShape& s, T* dP) {
  const int64_t n = s.n, C = s.C;
  causal_scores(n, s.Dv, scale, dO, s.ldv, u, s.Dv, dP, C);
  for (int64_t i = 0; i < n; ++i) {
    T* row = dP + i * C;
    if (g.gated) {
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < i; ++j) {
        const T e = row[j] * P[i * C + j];
        acc += e;
        gg.dG[j] -= e;
      }
      gg.dG[i] += acc;
#pragma omp simd
      for (int64_t j = 0; j <= i; ++j) row[j] *= g.D[i * C + j];
    }
    std::fill(row + i + 1, row + n, T(0));
  }
  causal_times(n, s.Dk, T(1), dP, C, k, s.ldk, T(1), dq, s.ldk);
  causal_transposed_times(n, s.Dk, T(1), dP, C, q, s.ldk, T(1), dk, s.ldk);
}

// (fla: the inter-chunk part of chunk_bwd_dqkwg)
// forward: O = scale diag(gamma) Q S0 (+ ...)
//   =>  dQ += scale diag(gamma) dO S0^T,  gamma_i dgamma_i += scale gamma_i q_i . (S0 do_i)
// (and dS0 += scale Q^T diag(gamma) dO, taken in state_backward). z: scratch [C, Dk].
template <class T>
void inter_output_backward(T* dq, const ChunkGateGrads<T>& gg, const T* q, const T* dO, const T* S0, T scale,
                           const ChunkDecays<T>& g, const ChunkShape& s, T* z) {
  if (!S0) return;
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv, ldk = s.ldk;
  if (!g.gated) {
    gemm<T>(false, true, n, Dk, Dv, scale, dO, s.ldv, S0, Dv, T(1), dq, ldk);
    return;
  }
  gemm<T>(false, true, n, Dk, Dv, T(1), dO, s.ldv, S0, Dv, T(0), z, Dk);
  // (row pointers outside the simd loop: with the indexing inside it GCC does not vectorize it)
  for (int64_t i = 0; i < n; ++i) {
    const T sg = scale * g.gamma[i];
    const T *zi = z + i * Dk, *qi = q + i * ldk;
    T* dqi = dq + i * ldk;
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < Dk; ++j) {
      acc += zi[j] * qi[j];
      dqi[j] += sg * zi[j];
    }
    gg.gdg[i] += sg * acc;
  }
}

// (fla: prepare_wy_repr_bwd, the key half, and the backward of chunk_scaled_dot_kkt)
// forward: A = I + L with L_ij = beta_i gd_ij (j < i, gd = K K^T . D, read above the diagonal of PG)
//   dA = -X U'^T; its transpose dLT = -U' X^T puts dL_ij at row j, column i, beside gd_ij.
//   =>  dbeta_i += sum_j dL_ij gd_ij;  dK += (F + F^T) K with F_ij = beta_i dL_ij D_ij;
//       D_ij = exp(G_i - G_j): dG_i += dL_ij L_ij, dG_j -= dL_ij L_ij
// bt: this chunk's beta, contiguous [C]. dLT, F: scratch [C, C].
template <class T>
void gram_solve_backward(T* dk, const ChunkGateGrads<T>& gg, const T* u, const T* x, const T* pg, const T* k,
                         const T* bt, const ChunkDecays<T>& g, const ChunkShape& s, T* dLT, T* F) {
  const int64_t n = s.n, C = s.C;
  gemm<T>(false, true, n, n, s.Dv, T(-1), u, s.Dv, x, s.Dv, T(0), dLT, C);
  for (int64_t j = 0; j < n; ++j) {
    const T* t = dLT + j * C;
    const T* gj = pg + j * C;
    const T* dj = g.D + j * C;
    T* f = F + j * C;
#pragma omp simd
    for (int64_t i = j + 1; i < n; ++i) {
      gg.db[i] += t[i] * gj[i];
      f[i] = bt[i] * t[i] * dj[i];
    }
    if (g.gated) {
      T acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = j + 1; i < n; ++i) {
        const T e = bt[i] * t[i] * gj[i];
        gg.dG[i] += e;
        acc += e;
      }
      gg.dG[j] -= acc;
    }
    f[j] = 0;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) F[i * C + j] = F[j * C + i];
  gemm<T>(false, false, n, s.Dk, n, T(1), F, C, k, s.ldk, T(1), dk, s.ldk);
}

// (fla: chunk_gated_delta_rule_bwd_dhu, one chunk) dS, in place from dS1 to dS0:
//   dS0 = gamma_last dS1 + scale Q^T diag(gamma) dO - K^T diag(gamma) dR;  dgamma_last += <dS1, S0>
// S0 is never null here (the zero state is zeros). dr: diag(gamma) dR from wy_backward.
// dog: scratch [C, Dv].
template <class T>
void state_backward(T* dS, const ChunkGateGrads<T>& gg, const T* S0, const T* q, const T* k, const T* dO,
                    const T* dr, T scale, const ChunkDecays<T>& g, const ChunkShape& s, T* dog) {
  const int64_t n = s.n, Dk = s.Dk, Dv = s.Dv, state = Dk * Dv;
  if (g.gated) {
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < state; ++i) acc += dS[i] * S0[i];
    const T g_last = g.gamma[n - 1];
    gg.gdg[n - 1] += g_last * acc;
    for (int64_t i = 0; i < state; ++i) dS[i] *= g_last;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < Dv; ++j) dog[i * Dv + j] = g.gamma[i] * dO[i * s.ldv + j];
    gemm<T>(true, false, Dk, Dv, n, scale, q, s.ldk, dog, Dv, T(1), dS, Dv);
  } else {
    gemm<T>(true, false, Dk, Dv, n, scale, q, s.ldk, dO, s.ldv, T(1), dS, Dv);
  }
  gemm<T>(true, false, Dk, Dv, n, T(-1), k, s.ldk, dr, Dv, T(1), dS, Dv);
}

// (fla: chunk_local_cumsum, reversed) gamma_i = exp(G_i), lambda_i = exp(G_last - G_i),
// G_i = sum_{t <= i} a_t (within the chunk)  =>  dG_i += gdg_i - lambda_i dlambda_i,
// dG_last += sum_i lambda_i dlambda_i, and da_t += sum_{i >= t} dG_i. Gated form only.
template <class T>
void decay_backward(T* da, const ChunkGateGrads<T>& gg, const ChunkDecays<T>& g, const ChunkShape& s) {
  const int64_t n = s.n;
  T lam = 0;
  for (int64_t i = 0; i < n; ++i) {
    gg.dG[i] += gg.gdg[i] - g.lambda[i] * gg.dlambda[i];
    lam += g.lambda[i] * gg.dlambda[i];
  }
  gg.dG[n - 1] += lam;
  T acc = 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    acc += gg.dG[i];
    da[i * s.H] += acc;
  }
}

}  // namespace linattn::cpu::deltanet
