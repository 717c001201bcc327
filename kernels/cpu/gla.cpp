#include "kernels/cpu/gla.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/chunk_mixer.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu {
namespace {

constexpr int64_t kSub = 16;  // sub-chunk length: the diagonal blocks computed pairwise

// The log-gates of one chunk of n tokens, in log space.
// G [n, Dk]: inclusive cumulative sum of g from the chunk's start (<= 0, non-increasing down the chunk).
// EG = e^G and EL = e^(G_last - G) [n, Dk] (both exponents <= 0), e_last = e^(G_last) [Dk],
// Qg = Q ⊙ EG and Kg = K ⊙ EL [n, Dk].
template <class T>
void cumulative_gates(T* G, T* EG, T* EL, T* Qg, T* Kg, T* e_last, const T* q, const T* k, const T* g, int64_t ld,
                 int64_t n, int64_t Dk) {
  std::copy(g, g + Dk, G);
  for (int64_t i = 1; i < n; ++i) {
    const T* gi = g + i * ld;
    const T* prev = G + (i - 1) * Dk;
    T* Gi = G + i * Dk;
#pragma omp simd
    for (int64_t d = 0; d < Dk; ++d) Gi[d] = prev[d] + gi[d];
  }
  const T* Gl = G + (n - 1) * Dk;
#pragma omp simd
  for (int64_t d = 0; d < Dk; ++d) e_last[d] = exp_nonpos(Gl[d]);
  for (int64_t i = 0; i < n; ++i) {
    const T* Gi = G + i * Dk;
    const T* qi = q + i * ld;
    const T* ki = k + i * ld;
#pragma omp simd
    for (int64_t d = 0; d < Dk; ++d) {
      const T eg = exp_nonpos(Gi[d]), el = exp_nonpos(Gl[d] - Gi[d]);
      Qg[i * Dk + d] = qi[d] * eg;
      Kg[i * Dk + d] = ki[d] * el;
      EG[i * Dk + d] = eg;
      EL[i * Dk + d] = el;
    }
  }
}

// Off-diagonal block of the intra-chunk scores: rows r0..n-1 against the sub-chunk columns s..s+m-1
// (all rows after it). Anchor a = G at the sub-chunk's last position s+m-1; then
//   A[r, j] = Σ_d (q_rd e^(G_rd - a_d)) (k_jd e^(a_d - G_jd))  with both exponents <= 0.
// Writes Qa [n - r0, Dk], Ka [m, Dk], and their factors FQ [n - r0, Dk], FK [m, Dk].
template <class T>
void anchored_operands(T* Qa, T* Ka, T* FQ, T* FK, const T* q, const T* k, int64_t ld, const T* G, int64_t s,
                       int64_t m, int64_t n, int64_t Dk) {
  const T* a = G + (s + m - 1) * Dk;
  for (int64_t jj = 0; jj < m; ++jj) {
    const T* Gj = G + (s + jj) * Dk;
    const T* kj = k + (s + jj) * ld;
#pragma omp simd
    for (int64_t d = 0; d < Dk; ++d) {
      const T f = exp_nonpos(a[d] - Gj[d]);
      Ka[jj * Dk + d] = kj[d] * f;
      FK[jj * Dk + d] = f;
    }
  }
  for (int64_t r = s + m; r < n; ++r) {
    const T* Gr = G + r * Dk;
    const T* qr = q + r * ld;
    T* out = Qa + (r - s - m) * Dk;
#pragma omp simd
    for (int64_t d = 0; d < Dk; ++d) {
      const T f = exp_nonpos(Gr[d] - a[d]);
      out[d] = qr[d] * f;
      FQ[(r - s - m) * Dk + d] = f;
    }
  }
}

// Σ_d q_d k_d e^(Gq_d - Gk_d), with Gq <= Gk. Kept out of line: inlined into the loop nests below, GCC
// stops vectorizing the simd reduction.
template <class T>
[[gnu::noinline]] T decayed_dot(const T* q, const T* k, const T* Gq, const T* Gk, int64_t Dk) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t d = 0; d < Dk; ++d) acc += q[d] * k[d] * exp_nonpos(Gq[d] - Gk[d]);
  return acc;
}

// The same product, returned, and its backward for the upstream gradient w:
// dq_d += w k_d e^(Gq_d - Gk_d), dk_d += w q_d e^(Gq_d - Gk_d).
template <class T>
[[gnu::noinline]] T decayed_dot_backward(T* __restrict dq, T* __restrict dk, const T* q, const T* k, const T* Gq,
                                         const T* Gk, T w, int64_t Dk) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t d = 0; d < Dk; ++d) {
    const T e = exp_nonpos(Gq[d] - Gk[d]);
    const T ke = k[d] * e, qe = q[d] * e;
    acc += q[d] * ke;
    dq[d] += w * ke;
    dk[d] += w * qe;
  }
  return acc;
}

// Intra-chunk scores A [n, n] (leading dimension C), A_ij = Σ_d q_id k_jd e^(G_id - G_jd) for j <= i,
// zero above the diagonal. q, k are the chunk's rows (row stride ld); Qa, Ka, FQ, FK are scratch.
template <class T>
void intra_scores(T* A, T* Qa, T* Ka, T* FQ, T* FK, const T* q, const T* k, int64_t ld, const T* G, int64_t n,
                  int64_t C, int64_t Dk) {
  for (int64_t i = 0; i < n; ++i) std::fill(A + i * C, A + i * C + n, T(0));
  for (int64_t s = 0; s < n; s += kSub) {
    const int64_t m = std::min(kSub, n - s);
    // Diagonal block, pairwise from the differences G_i - G_j <= 0.
    for (int64_t i = s; i < s + m; ++i) {
      const T* qi = q + i * ld;
      const T* Gi = G + i * Dk;
      for (int64_t j = s; j <= i; ++j) {
        const T* kj = k + j * ld;
        const T* Gj = G + j * Dk;
        A[i * C + j] = decayed_dot(qi, kj, Gi, Gj, Dk);
      }
    }
    if (s + m < n) {
      anchored_operands<T>(Qa, Ka, FQ, FK, q, k, ld, G, s, m, n, Dk);
      gemm<T>(false, true, n - s - m, m, Dk, T(1), Qa, Dk, Ka, Dk, T(0), A + (s + m) * C + s, C);
    }
  }
}

// Backward of intra_scores given dA [n, n] (only j <= i read): recomputes A (needed for dV) and
// accumulates dQ, dK [n, Dk] (gradients wrt the chunk's q and k rows through A):
//   forward: A_ij = Σ_d q_id k_jd e^(G_id - G_jd)
//   =>  dq_id += Σ_j dA_ij k_jd e^(G_id - G_jd),   dk_jd += Σ_i dA_ij q_id e^(G_id - G_jd)
// (the gate's own gradient comes later from dq and dk, see gla_chunk_backward).
template <class T>
void intra_scores_backward(T* A, T* dQ, T* dK, T* Qa, T* Ka, T* FQ, T* FK, T* tmp, const T* q, const T* k,
                           int64_t ld, const T* G, const T* dA, int64_t n, int64_t C, int64_t Dk) {
  for (int64_t i = 0; i < n; ++i) std::fill(A + i * C, A + i * C + n, T(0));
  for (int64_t s = 0; s < n; s += kSub) {
    const int64_t m = std::min(kSub, n - s);
    for (int64_t i = s; i < s + m; ++i) {
      const T* qi = q + i * ld;
      const T* Gi = G + i * Dk;
      T* dQi = dQ + i * Dk;
      for (int64_t j = s; j <= i; ++j) {
        const T* kj = k + j * ld;
        const T* Gj = G + j * Dk;
        T* dKj = dK + j * Dk;
        A[i * C + j] = decayed_dot_backward(dQi, dKj, qi, kj, Gi, Gj, dA[i * C + j], Dk);
      }
    }
    if (s + m < n) {
      const int64_t rows = n - s - m;
      const T* dAb = dA + (s + m) * C + s;  // [rows, m] block, leading dimension C
      anchored_operands<T>(Qa, Ka, FQ, FK, q, k, ld, G, s, m, n, Dk);
      // forward: A_b = Qa Ka^T  =>  dQa = dA_b Ka,  dKa = dA_b^T Qa; then through the anchor factors
      gemm<T>(false, true, rows, m, Dk, T(1), Qa, Dk, Ka, Dk, T(0), A + (s + m) * C + s, C);
      gemm<T>(false, false, rows, Dk, m, T(1), dAb, C, Ka, Dk, T(0), tmp, Dk);
      for (int64_t r = 0; r < rows; ++r) {
        T* out = dQ + (s + m + r) * Dk;
#pragma omp simd
        for (int64_t d = 0; d < Dk; ++d) out[d] += tmp[r * Dk + d] * FQ[r * Dk + d];
      }
      gemm<T>(true, false, m, Dk, rows, T(1), dAb, C, Qa, Dk, T(0), tmp, Dk);
      for (int64_t jj = 0; jj < m; ++jj) {
        T* out = dK + (s + jj) * Dk;
#pragma omp simd
        for (int64_t d = 0; d < Dk; ++d) out[d] += tmp[jj * Dk + d] * FK[jj * Dk + d];
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Recurrent form: the reference.

template <class T>
void gla_recurrent_forward(T* o, T* ht, const T* q, const T* k, const T* v, const T* g, const T* h0, int64_t B,
                           int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "gla_recurrent_forward");
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    const int64_t bh = b * H + h;
    T* S;
    arena.carve({{S, Dk * Dv}});
    load_state(S, h0, nullptr, bh, Dk, Dv, Dv);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t row = d.row(b, t, h);
      // S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T
      for (int64_t i = 0; i < Dk; ++i) {
        const T a = std::exp(g[row * Dk + i]), ki = k[row * Dk + i];
        for (int64_t j = 0; j < Dv; ++j) S[i * Dv + j] = a * S[i * Dv + j] + ki * v[row * Dv + j];
      }
      // o_t = scale S_t^T q_t
      for (int64_t j = 0; j < Dv; ++j) {
        T acc = 0;
        for (int64_t i = 0; i < Dk; ++i) acc += S[i * Dv + j] * q[row * Dk + i];
        o[row * Dv + j] = scale * acc;
      }
    }
    store_state(ht, nullptr, S, bh, Dk, Dv, Dv, false);
  });
}

template <class T>
void gla_recurrent_backward(T* dq, T* dk, T* dv, T* dg, T* dh0, const T* q, const T* k, const T* v, const T* g,
                            const T* h0, const T* do_, const T* dht, int64_t B, int64_t T_, int64_t H, int64_t Dk,
                            int64_t Dv, T scale) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "gla_recurrent_backward");
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    const int64_t bh = b * H + h;
    T *states, *dS;  // states[t + 1] = S_t, states[0] = h0
    arena.carve({{states, (T_ + 1) * Dk * Dv}, {dS, Dk * Dv}});
    load_state(states, h0, nullptr, bh, Dk, Dv, Dv);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t row = d.row(b, t, h);
      const T* prev = states + t * Dk * Dv;
      T* S = states + (t + 1) * Dk * Dv;
      for (int64_t i = 0; i < Dk; ++i) {
        const T a = std::exp(g[row * Dk + i]), ki = k[row * Dk + i];
        for (int64_t j = 0; j < Dv; ++j) S[i * Dv + j] = a * prev[i * Dv + j] + ki * v[row * Dv + j];
      }
    }
    load_state(dS, dht, nullptr, bh, Dk, Dv, Dv);
    for (int64_t t = T_ - 1; t >= 0; --t) {
      const int64_t row = d.row(b, t, h);
      const T* prev = states + t * Dk * Dv;
      const T* S = states + (t + 1) * Dk * Dv;
      // forward: o_t = scale S_t^T q_t  =>  dq_t += scale S_t do_t,  dS_t += scale q_t do_t^T
      for (int64_t i = 0; i < Dk; ++i) {
        T acc = 0;
        for (int64_t j = 0; j < Dv; ++j) {
          acc += S[i * Dv + j] * do_[row * Dv + j];
          dS[i * Dv + j] += scale * q[row * Dk + i] * do_[row * Dv + j];
        }
        dq[row * Dk + i] += scale * acc;
      }
      // forward: S_t = diag(a_t) S_{t-1} + k_t v_t^T, a_t = exp(g_t)
      //   =>  dk_t += dS_t v_t,  dv_t += dS_t^T k_t,  dg_t += a_t ⊙ rowsum(dS_t ⊙ S_{t-1}),
      //       dS_{t-1} = diag(a_t) dS_t
      for (int64_t j = 0; j < Dv; ++j) {
        T acc = 0;
        for (int64_t i = 0; i < Dk; ++i) acc += dS[i * Dv + j] * k[row * Dk + i];
        dv[row * Dv + j] += acc;
      }
      for (int64_t i = 0; i < Dk; ++i) {
        const T a = std::exp(g[row * Dk + i]);
        T dki = 0, dgi = 0;
        for (int64_t j = 0; j < Dv; ++j) {
          dki += dS[i * Dv + j] * v[row * Dv + j];
          dgi += dS[i * Dv + j] * prev[i * Dv + j];
          dS[i * Dv + j] *= a;
        }
        dk[row * Dk + i] += dki;
        dg[row * Dk + i] += a * dgi;
      }
    }
    store_state(dh0, nullptr, dS, bh, Dk, Dv, Dv, true);
  });
}

// ---------------------------------------------------------------------------------------------
// Chunkwise form. Per (batch, head) and chunk of n <= C tokens with start state S0 (derivations.md):
//   O  = scale ((Q ⊙ e^G) S0 + A V),  A_ij = Σ_d q_id k_jd e^(G_id - G_jd) (j <= i)
//   S1 = diag(e^(G_last)) S0 + (K ⊙ e^(G_last - G))^T V

int64_t gla_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "gla_chunk_saved_size");
  return B * H * (d.chunks(chunk_size) + 1) * Dk * Dv;
}

template <class T>
void gla_chunk_forward(T* o, T* ht, T* saved, const T* q, const T* k, const T* v, const T* g, const T* h0,
                       int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "gla_chunk_forward");
  const int64_t C = chunk_size, NC = d.chunks(C), ldk = d.ldk(), ldv = d.ldv();
  for_head_runs<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    T *G, *EG, *EL, *Qg, *Kg, *Qa, *FQ, *Ka, *FK, *A, *e_last;
    arena.carve({{G, C * Dk},      // cumulative log-gates
                 {EG, C * Dk},     // e^G
                 {EL, C * Dk},     // e^(G_last - G)
                 {Qg, C * Dk},     // Q ⊙ e^G
                 {Kg, C * Dk},     // K ⊙ e^(G_last - G)
                 {Qa, C * Dk},     // anchored Q rows
                 {FQ, C * Dk},     // their factors
                 {Ka, kSub * Dk},  // anchored K rows
                 {FK, kSub * Dk},  // their factors
                 {A, C * C},       // intra-chunk scores
                 {e_last, Dk}});   // e^(G_last)
    // saved [B, H, NC + 1, Dk, Dv]: chunk c of (b, h) starts from state c and ends at state c + 1.
    for (int64_t h = h_begin; h < h_end; ++h)
      load_state(saved + (b * H + h) * (NC + 1) * Dk * Dv, h0, nullptr, b * H + h, Dk, Dv, Dv);
    for (int64_t c = 0; c < NC; ++c)
      for (int64_t h = h_begin; h < h_end; ++h) {
        T* S = saved + ((b * H + h) * (NC + 1) + c) * Dk * Dv;
        const int64_t t0 = c * C, n = std::min(C, T_ - t0);
        const int64_t row = d.row(b, t0, h);
        const T* qc = q + row * Dk;
        const T* kc = k + row * Dk;
        const T* vc = v + row * Dv;
        T* oc = o + row * Dv;
        cumulative_gates<T>(G, EG, EL, Qg, Kg, e_last, qc, kc, g + row * Dk, ldk, n, Dk);
        intra_scores<T>(A, Qa, Ka, FQ, FK, qc, kc, ldk, G, n, C, Dk);
        // O = scale ((Q ⊙ e^G) S0 + A V)
        gemm<T>(false, false, n, Dv, Dk, scale, Qg, Dk, S, Dv, T(0), oc, ldv);
        causal_times(n, Dv, scale, A, C, vc, ldv, T(1), oc, ldv);
        // S1 = diag(e^(G_last)) S0 + (K ⊙ e^(G_last - G))^T V
        T* S1 = S + Dk * Dv;
        for (int64_t i = 0; i < Dk; ++i)
#pragma omp simd
          for (int64_t j = 0; j < Dv; ++j) S1[i * Dv + j] = e_last[i] * S[i * Dv + j];
        gemm<T>(true, false, Dk, Dv, n, T(1), Kg, Dk, vc, ldv, T(1), S1, Dv);
      }
    for (int64_t h = h_begin; h < h_end; ++h)
      store_state(ht, nullptr, saved + ((b * H + h) * (NC + 1) + NC) * Dk * Dv, b * H + h, Dk, Dv, Dv, false);
  });
}

// Backward per chunk, last to first, carrying dS (the gradient wrt the chunk's end state):
//   dV  = scale A^T dO + (K ⊙ e^(G_last - G)) dS1
//   dQ  = scale (dO S0^T) ⊙ e^G + [through A],   dK = (V dS1^T) ⊙ e^(G_last - G) + [through A]
//   dS0 = diag(e^(G_last)) dS1 + scale (Q ⊙ e^G)^T dO
// The gate gradient then needs only dq and dk of this op (derivations.md): with G cumulative from the
// sequence's start, dG_t = q_t ⊙ dq_t - k_t ⊙ dk_t (+ rowsum(dht ⊙ S_T) at the last step), and
// dg_t = Σ_{u >= t} dG_u: a reverse running sum, carried across chunks as they are visited.
template <class T>
void gla_chunk_backward(T* dq, T* dk, T* dv, T* dg, T* dh0, const T* saved, const T* q, const T* k, const T* v,
                        const T* g, const T* do_, const T* dht, int64_t B, int64_t T_, int64_t H, int64_t Dk,
                        int64_t Dv, T scale, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "gla_chunk_backward");
  const int64_t C = chunk_size, NC = d.chunks(C), ldk = d.ldk(), ldv = d.ldv();
  for_head_runs<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    T *G, *Qg, *Kg, *EG, *EL, *Qa, *FQ, *dQ, *dK, *tmp, *Ka, *FK, *A, *dA, *e_last, *dstates, *rs;
    arena.carve({{G, C * Dk},             // cumulative log-gates
                 {Qg, C * Dk},            // Q ⊙ e^G
                 {Kg, C * Dk},            // K ⊙ e^(G_last - G)
                 {EG, C * Dk},            // e^G
                 {EL, C * Dk},            // e^(G_last - G)
                 {Qa, C * Dk},            // anchored Q rows
                 {FQ, C * Dk},            // their factors
                 {dQ, C * Dk},            // this op's gradient wrt the chunk's q
                 {dK, C * Dk},            // this op's gradient wrt the chunk's k
                 {tmp, C * Dk},           // products before their anchor factors
                 {Ka, kSub * Dk},         // anchored K rows
                 {FK, kSub * Dk},         // their factors
                 {A, C * C},              // intra-chunk scores
                 {dA, C * C},             // their gradient
                 {e_last, Dk},            // e^(G_last)
                 {dstates, H * Dk * Dv},  // gradients wrt the states after the current chunk
                 {rs, H * Dk}});          // reverse running sums of dG
    for (int64_t h = h_begin; h < h_end; ++h) {
      const int64_t bh = b * H + h;
      T* dS = dstates + h * Dk * Dv;
      T* r = rs + h * Dk;
      const T* ST = saved + (bh * (NC + 1) + NC) * Dk * Dv;  // the final state
      load_state(dS, dht, nullptr, bh, Dk, Dv, Dv);
      // forward: S_T (dht's consumer) = diag(e^(G_T)) (...)  =>  dG_T += rowsum(dht ⊙ S_T)
      for (int64_t i = 0; i < Dk; ++i) {
        T acc = 0;
        if (dht)
          for (int64_t j = 0; j < Dv; ++j) acc += dS[i * Dv + j] * ST[i * Dv + j];
        r[i] = acc;
      }
    }
    for (int64_t c = NC - 1; c >= 0; --c)
      for (int64_t h = h_begin; h < h_end; ++h) {
        T* dS = dstates + h * Dk * Dv;
        T* r = rs + h * Dk;
        const T* S0 = saved + ((b * H + h) * (NC + 1) + c) * Dk * Dv;
        const int64_t t0 = c * C, n = std::min(C, T_ - t0);
        const int64_t row = d.row(b, t0, h);
        const T* qc = q + row * Dk;
        const T* kc = k + row * Dk;
        const T* vc = v + row * Dv;
        const T* doc = do_ + row * Dv;
        cumulative_gates<T>(G, EG, EL, Qg, Kg, e_last, qc, kc, g + row * Dk, ldk, n, Dk);
        // forward: O = scale ((Q ⊙ e^G) S0 + A V)  =>  dA = scale dO V^T (read only on and below the diagonal)
        causal_scores(n, Dv, scale, doc, ldv, vc, ldv, dA, C);
        //   dQ = scale (dO S0^T) ⊙ e^G
        gemm<T>(false, true, n, Dk, Dv, scale, doc, ldv, S0, Dv, T(0), dQ, Dk);
        // forward: S1 = diag(e^(G_last)) S0 + (K ⊙ e^(G_last - G))^T V  =>  dK = (V dS1^T) ⊙ e^(G_last - G)
        gemm<T>(false, true, n, Dk, Dv, T(1), vc, ldv, dS, Dv, T(0), dK, Dk);
        for (int64_t i = 0; i < n * Dk; ++i) {
          dQ[i] *= EG[i];
          dK[i] *= EL[i];
        }
        // A (recomputed) and the gradients through it
        intra_scores_backward<T>(A, dQ, dK, Qa, Ka, FQ, FK, tmp, qc, kc, ldk, G, dA, n, C, Dk);
        // dV = scale A^T dO + (K ⊙ e^(G_last - G)) dS1
        T* dvc = dv + row * Dv;
        causal_transposed_times(n, Dv, scale, A, C, doc, ldv, T(1), dvc, ldv);
        gemm<T>(false, false, n, Dv, Dk, T(1), Kg, Dk, dS, Dv, T(1), dvc, ldv);
        // dS0 = diag(e^(G_last)) dS1 + scale (Q ⊙ e^G)^T dO
        for (int64_t i = 0; i < Dk; ++i)
#pragma omp simd
          for (int64_t j = 0; j < Dv; ++j) dS[i * Dv + j] *= e_last[i];
        gemm<T>(true, false, Dk, Dv, n, scale, Qg, Dk, doc, ldv, T(1), dS, Dv);
        // Accumulate dq, dk, and the gate: dg_t += Σ_{u >= t} (q_u ⊙ dq_u - k_u ⊙ dk_u) (+ the dht term in r).
        for (int64_t i = n - 1; i >= 0; --i) {
          const int64_t off = (row + i * H) * Dk;
          const T* dQi = dQ + i * Dk;
          const T* dKi = dK + i * Dk;
#pragma omp simd
          for (int64_t j = 0; j < Dk; ++j) {
            dq[off + j] += dQi[j];
            dk[off + j] += dKi[j];
            r[j] += q[off + j] * dQi[j] - k[off + j] * dKi[j];
            dg[off + j] += r[j];
          }
        }
      }
    for (int64_t h = h_begin; h < h_end; ++h)
      store_state(dh0, nullptr, dstates + h * Dk * Dv, b * H + h, Dk, Dv, Dv, true);
  });
}

LINATTN_INSTANTIATE_FLOAT_DOUBLE(gla_recurrent_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(gla_recurrent_backward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(gla_chunk_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(gla_chunk_backward)

}  // namespace linattn::cpu
