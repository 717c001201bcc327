// DeltaNet and Gated DeltaNet: recurrent and chunkwise (WY) forward and backward.
// One implementation serves both mixers: a == nullptr is plain DeltaNet (every gate factor is 1).
#include "kernels/cpu/deltanet.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/chunk_mixer.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu {
namespace {

// ---- Recurrent form ---------------------------------------------------------------------------
// One step, in place on the state S [Dk, Dv]:
//   decay = exp(a)  (1 without gates);   v_old = decay S^T k;   u = beta (v - v_old)
//   S <- decay S + k u^T
// v_old and u are returned (Dv entries each) for the backward.
template <class T>
void delta_step(T* S, T* v_old, T* u, const T* k, const T* v, T beta, T decay, int64_t Dk, int64_t Dv) {
  std::fill(v_old, v_old + Dv, T(0));
  for (int64_t i = 0; i < Dk; ++i) {
    const T ki = k[i];
    const T* s = S + i * Dv;
    for (int64_t j = 0; j < Dv; ++j) v_old[j] += ki * s[j];
  }
  for (int64_t j = 0; j < Dv; ++j) {
    v_old[j] *= decay;
    u[j] = beta * (v[j] - v_old[j]);
  }
  for (int64_t i = 0; i < Dk; ++i) {
    const T ki = k[i];
    T* s = S + i * Dv;
    for (int64_t j = 0; j < Dv; ++j) s[j] = decay * s[j] + ki * u[j];
  }
}

// o = scale S^T q  (o: [Dv], q: [Dk], S: [Dk, Dv])
template <class T>
void read_out(T* o, const T* S, const T* q, T scale, int64_t Dk, int64_t Dv) {
  std::fill(o, o + Dv, T(0));
  for (int64_t i = 0; i < Dk; ++i) {
    const T qi = scale * q[i];
    const T* s = S + i * Dv;
    for (int64_t j = 0; j < Dv; ++j) o[j] += qi * s[j];
  }
}

// Backward of the recurrence, last token first, carrying dS = dLoss/dS_t. The states are
// recomputed segment by segment from checkpoints taken every `kSegment` tokens.
constexpr int64_t kSegment = 64;

}  // namespace

template <class T>
void deltanet_recurrent_forward(T* o, T* ht, const T* q, const T* k, const T* v, const T* beta, const T* a,
                                const T* h0, int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "deltanet_recurrent_forward");
  const int64_t ldk = d.ldk(), ldv = d.ldv();
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *S, *v_old, *u;
    arena.carve({{S, Dk * Dv}, {v_old, Dv}, {u, Dv}});
    load_state(S, h0, nullptr, b * H + h, Dk, Dv, Dv);
    const int64_t og = d.row(b, 0, h), oq = og * Dk, ov = og * Dv;
    for (int64_t t = 0; t < T_; ++t) {
      const T decay = a ? std::exp(a[og + t * H]) : T(1);
      delta_step(S, v_old, u, k + oq + t * ldk, v + ov + t * ldv, beta[og + t * H], decay, Dk, Dv);
      read_out(o + ov + t * ldv, S, q + oq + t * ldk, scale, Dk, Dv);
    }
    store_state(ht, nullptr, S, b * H + h, Dk, Dv, Dv, false);
  });
}
template <class T>
void deltanet_recurrent_backward(T* dq, T* dk, T* dv, T* dbeta, T* da, T* dh0, const T* q, const T* k, const T* v,
                                 const T* beta, const T* a, const T* h0, const T* do_, const T* dht, int64_t B,
                                 int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "deltanet_recurrent_backward");
  const int64_t state = Dk * Dv, nseg = (T_ + kSegment - 1) / kSegment, ldk = d.ldk(), ldv = d.ldv();
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *checkpoints, *states, *dS, *v_old, *u, *du, *dv_old;
    arena.carve({{checkpoints, std::max<int64_t>(nseg, 1) * state},
                 {states, (kSegment + 1) * state},
                 {dS, state},
                 {v_old, Dv},
                 {u, Dv},
                 {du, Dv},
                 {dv_old, Dv}});
    const int64_t og = d.row(b, 0, h), oq = og * Dk, ov = og * Dv;
    auto decay_at = [&](int64_t t) { return a ? std::exp(a[og + t * H]) : T(1); };
    // Forward sweep: the state at the start of every segment.
    T* S = states;
    load_state(S, h0, nullptr, b * H + h, Dk, Dv, Dv);
    for (int64_t s = 0; s < nseg; ++s) {
      std::copy(S, S + state, checkpoints + s * state);
      for (int64_t t = s * kSegment; t < std::min(T_, (s + 1) * kSegment); ++t)
        delta_step(S, v_old, u, k + oq + t * ldk, v + ov + t * ldv, beta[og + t * H], decay_at(t), Dk, Dv);
    }
    load_state(dS, dht, nullptr, b * H + h, Dk, Dv, Dv);
    for (int64_t s = nseg - 1; s >= 0; --s) {
      const int64_t t0 = s * kSegment, t1 = std::min(T_, t0 + kSegment);
      // states[i] = S_{t0 + i - 1}: the state before token t0 + i.
      std::copy(checkpoints + s * state, checkpoints + (s + 1) * state, states);
      for (int64_t t = t0; t < t1; ++t) {
        T* next = states + (t - t0 + 1) * state;
        std::copy(next - state, next, next);
        delta_step(next, v_old, u, k + oq + t * ldk, v + ov + t * ldv, beta[og + t * H], decay_at(t), Dk, Dv);
      }
      for (int64_t t = t1 - 1; t >= t0; --t) {
        const T* prev = states + (t - t0) * state;  // S_{t-1}
        const T* cur = prev + state;                 // S_t
        const T* qt = q + oq + t * ldk;
        const T* kt = k + oq + t * ldk;
        const T* vt = v + ov + t * ldv;
        const T* dot = do_ + ov + t * ldv;
        T* dqt = dq + oq + t * ldk;
        T* dkt = dk + oq + t * ldk;
        T* dvt = dv + ov + t * ldv;
        const T bt = beta[og + t * H], decay = decay_at(t);
        // Recompute v_old = decay S_{t-1}^T k and u = beta (v - v_old).
        std::fill(v_old, v_old + Dv, T(0));
        for (int64_t i = 0; i < Dk; ++i)
          for (int64_t j = 0; j < Dv; ++j) v_old[j] += kt[i] * prev[i * Dv + j];
        for (int64_t j = 0; j < Dv; ++j) {
          v_old[j] *= decay;
          u[j] = bt * (vt[j] - v_old[j]);
        }
        // forward: o_t = scale S_t^T q_t  =>  dq_t += scale S_t do_t, dS_t += scale q_t do_t^T
        for (int64_t i = 0; i < Dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < Dv; ++j) {
            acc += cur[i * Dv + j] * dot[j];
            dS[i * Dv + j] += scale * qt[i] * dot[j];
          }
          dqt[i] += scale * acc;
        }
        // forward: S_t = S~ + k u^T  =>  du = dS_t^T k, dk += dS_t u, dS~ = dS_t
        std::fill(du, du + Dv, T(0));
        for (int64_t i = 0; i < Dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < Dv; ++j) {
            du[j] += dS[i * Dv + j] * kt[i];
            acc += dS[i * Dv + j] * u[j];
          }
          dkt[i] += acc;
        }
        // forward: u = beta (v - v_old)  =>  dv += beta du, dbeta += du . (v - v_old), dv_old = -beta du
        T db = 0;
        for (int64_t j = 0; j < Dv; ++j) {
          dvt[j] += bt * du[j];
          db += du[j] * (vt[j] - v_old[j]);
          dv_old[j] = -bt * du[j];
        }
        dbeta[og + t * H] += db;
        // forward: v_old = S~^T k with S~ = decay S_{t-1}
        //   =>  dS~ += k dv_old^T, dk += S~ dv_old
        // forward: S~ = exp(a) S_{t-1}  =>  da += <dS~, S~>, dS_{t-1} = decay dS~
        T dgate = 0;
        for (int64_t i = 0; i < Dk; ++i) {
          T acc = 0;
          for (int64_t j = 0; j < Dv; ++j) {
            T& g = dS[i * Dv + j];
            g += kt[i] * dv_old[j];
            acc += prev[i * Dv + j] * dv_old[j];
            dgate += g * prev[i * Dv + j];
            g *= decay;
          }
          dkt[i] += decay * acc;
        }
        if (da) da[og + t * H] += decay * dgate;
      }
    }
    store_state(dh0, nullptr, dS, b * H + h, Dk, Dv, Dv, true);
  });
}

// ---- Chunkwise form ---------------------------------------------------------------------------

namespace {

// One chunk's block of `saved` (see the header): S0 [Dk, Dv], Ainv [C, C], PG [C, C] (P on and
// below the diagonal, K K^T . D strictly above it: symmetric, so row j holds (k_j . k_i) D_ij for
// i > j), U' [C, Dv], R [C, Dv].
int64_t saved_block(int64_t Dk, int64_t Dv, int64_t C) { return Dk * Dv + 2 * C * C + 2 * C * Dv; }

template <class T>
struct SavedChunk {
  T *S0, *ainv, *pg, *u, *r;
  SavedChunk(T* p, int64_t Dk, int64_t Dv, int64_t C)
      : S0(p), ainv(p + Dk * Dv), pg(ainv + C * C), u(pg + C * C), r(u + C * Dv) {}
};

// Gates of one chunk of n tokens (log-decays a, stride H): G = inclusive cumulative sum of a,
// gamma_i = exp(G_i), lambda_i = exp(G_last - G_i), and the symmetric decay matrix
// D_ij = exp(-|G_i - G_j|) (= exp(G_i - G_j) for j <= i, as G never increases). Every exponent is
// <= 0, so nothing overflows. While G stays above -60 the ratios gamma_i / gamma_j are exact to a
// few ulps and cost a multiply; below, D falls back to one exp per entry.
template <class T>
void cumulative_decays(T* G, T* gamma, T* inv_gamma, T* lambda, T* D, const T* a, int64_t H, int64_t n, int64_t C) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += a[i * H];
    G[i] = acc;
  }
  const bool ratio = G[n - 1] >= T(-60);
  for (int64_t i = 0; i < n; ++i) {
    gamma[i] = std::exp(G[i]);
    lambda[i] = std::exp(G[n - 1] - G[i]);
    inv_gamma[i] = ratio ? std::exp(-G[i]) : T(0);
  }
  for (int64_t r = 0; r < n; ++r) {
    T* row = D + r * C;
    if (ratio) {
      const T gr = gamma[r], ir = inv_gamma[r];
      for (int64_t c = 0; c <= r; ++c) row[c] = gr * inv_gamma[c];
      for (int64_t c = r + 1; c < n; ++c) row[c] = gamma[c] * ir;
    } else {
      for (int64_t c = 0; c < n; ++c) row[c] = std::exp(-std::abs(G[r] - G[c]));
    }
  }
}

// Ainv = (I + L)^-1 with L_ij = beta_i gd_ij for j < i (gd = K K^T . D, ld C), by forward
// substitution: row i of Ainv = e_i - sum_{j<i} L_ij (row j of Ainv). Row j is zero right of
// column j, so each block of kW columns starting at m0 only needs rows j >= m0; the block's sums
// stay in registers. l: scratch [C].
template <class T>
void invert_unit_lower(T* ainv, const T* gd, const T* beta, int64_t H, int64_t n, int64_t C, T* l) {
  constexpr int64_t kW = 64 / sizeof(T);  // two AVX2 registers of columns
  for (int64_t i = 0; i < n; ++i) {
    T* row = ainv + i * C;
    const T bi = beta[i * H];
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

}  // namespace

int64_t deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "deltanet_chunk_saved_size");
  return B * H * d.chunks(chunk_size) * saved_block(Dk, Dv, chunk_size);
}

template <class T>
void deltanet_chunk_forward(T* o, T* ht, T* saved, const T* q, const T* k, const T* v, const T* beta, const T* a,
                            const T* h0, int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                            int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "deltanet_chunk_forward");
  const int64_t C = chunk_size, NC = d.chunks(C), state = Dk * Dv, block = saved_block(Dk, Dv, C);
  const int64_t ldk = d.ldk(), ldv = d.ldv();
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *gram, *P, *D, *l, *rb, *ul, *G, *gamma, *inv_gamma, *lambda, *S, *own;
    arena.carve({{gram, C * C},  // K K^T . D
                 {P, C * C},     // tril(Q K^T) . D
                 {D, C * C},     // decay ratios (all ones without gates, so both paths share every line)
                 {l, C},         // a row of L in the inverse
                 {rb, C * Dv},   // diag(beta) R
                 {ul, C * Dv},   // diag(lambda) U'
                 {G, C},         // cumulative log-decays and their exponentials
                 {gamma, C},
                 {inv_gamma, C},
                 {lambda, C},
                 {S, state},                                // the final state
                 {own, saved ? 0 : 2 * block}});            // forward without `saved`: two blocks in turn
    if (!a) std::fill(D, D + C * C, T(1));
    const int64_t bh = b * H + h, og = d.row(b, 0, h), oq = og * Dk, ov = og * Dv;
    auto block_of = [&](int64_t c) {
      return SavedChunk<T>(saved ? saved + (bh * NC + c) * block : own + (c % 2) * block, Dk, Dv, C);
    };
    if (NC == 0) {  // T == 0: the final state is the initial one
      load_state(S, h0, nullptr, bh, Dk, Dv, Dv);
      store_state(ht, nullptr, S, bh, Dk, Dv, Dv, false);
      return;
    }
    load_state(block_of(0).S0, h0, nullptr, bh, Dk, Dv, Dv);
    for (int64_t c = 0; c < NC; ++c) {
      const int64_t t0 = c * C, n = std::min(C, T_ - t0);
      const bool zero_state = c == 0 && !h0;
      SavedChunk<T> blk = block_of(c);
      T* S1 = c + 1 < NC ? block_of(c + 1).S0 : S;
      const T* qc = q + oq + t0 * ldk;
      const T* kc = k + oq + t0 * ldk;
      const T* vc = v + ov + t0 * ldv;
      const T* bc = beta + og + t0 * H;
      T* oc = o + ov + t0 * ldv;
      if (a) cumulative_decays(G, gamma, inv_gamma, lambda, D, a + og + t0 * H, H, n, C);
      // gd = K K^T . D, and A^-1 with A = I + tril(diag(beta) gd, -1)
      T* gd = gram;
      gemm<T>(false, true, n, n, Dk, T(1), kc, ldk, kc, ldk, T(0), gd, C);
      if (a)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j) gd[i * C + j] *= D[i * C + j];
      invert_unit_lower(blk.ainv, gd, bc, H, n, C, l);
      // R = V - diag(gamma) K S0 (saved), rb = diag(beta) R
      T* r = blk.r;
      if (!zero_state) gemm<T>(false, false, n, Dv, Dk, T(1), kc, ldk, blk.S0, Dv, T(0), r, Dv);
      for (int64_t i = 0; i < n; ++i) {
        const T g = zero_state ? T(0) : a ? gamma[i] : T(1), bi = bc[i * H];
        const T* vi = vc + i * ldv;
        T* ri = r + i * Dv;
        T* rbi = rb + i * Dv;
        if (zero_state) std::fill(ri, ri + Dv, T(0));  // no K S0 product was made
#pragma omp simd
        for (int64_t j = 0; j < Dv; ++j) {
          ri[j] = vi[j] - g * ri[j];
          rbi[j] = bi * ri[j];
        }
      }
      // U' = A^-1 diag(beta) R (saved)
      causal_times(n, Dv, T(1), blk.ainv, C, rb, Dv, T(0), blk.u, Dv);
      // P = tril(Q K^T) . D, saved below the diagonal of PG with gd above it
      causal_scores(n, Dk, T(1), qc, ldk, kc, ldk, P, C);
      for (int64_t i = 0; i < n; ++i) {
        T* p = P + i * C;
        T* pg = blk.pg + i * C;
        for (int64_t j = 0; j <= i; ++j) pg[j] = p[j] *= D[i * C + j];
        for (int64_t j = i + 1; j < n; ++j) {
          p[j] = 0;
          pg[j] = gd[i * C + j];
        }
      }
      // O = scale diag(gamma) Q S0 + scale P U'
      if (!zero_state) {
        gemm<T>(false, false, n, Dv, Dk, scale, qc, ldk, blk.S0, Dv, T(0), oc, ldv);
        if (a)
          for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < Dv; ++j) oc[i * ldv + j] *= gamma[i];
      }
      causal_times(n, Dv, scale, P, C, blk.u, Dv, zero_state ? T(0) : T(1), oc, ldv);
      // S1 = gamma_last S0 + K^T diag(lambda) U'
      const T g_last = a ? gamma[n - 1] : T(1);
      for (int64_t i = 0; i < state; ++i) S1[i] = g_last * blk.S0[i];
      const T* u_scaled = blk.u;
      if (a) {
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < Dv; ++j) ul[i * Dv + j] = lambda[i] * blk.u[i * Dv + j];
        u_scaled = ul;
      }
      gemm<T>(true, false, Dk, Dv, n, T(1), kc, ldk, u_scaled, Dv, T(1), S1, Dv);
    }
    store_state(ht, nullptr, S, bh, Dk, Dv, Dv, false);
  });
}

// Backward of one chunk, given dO and dS = dS1 (replaced by dS0). With X = A^-T dU':
//   U' = A^-1 Rb (Rb = diag(beta) R)  =>  dRb = X,  dA = -A^-T dU' Rb^T A^-T = -X U'^T
// so neither T = A^-1 diag(beta) nor W is ever formed, and nothing is recomputed: the products
// below are all the work. Gate gradients are collected per position as dG_i (G = cumulative
// log-decay) and turned into da by a reverse cumulative sum at the end of the chunk.
template <class T>
void deltanet_chunk_backward(T* dq, T* dk, T* dv, T* dbeta, T* da, T* dh0, const T* saved, const T* q, const T* k,
                             const T* v, const T* beta, const T* a, const T* h0, const T* do_, const T* dht, int64_t B,
                             int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "deltanet_chunk_backward");
  LINATTN_CHECK(saved != nullptr || T_ == 0, "deltanet_chunk_backward: `saved` is null; pass the buffer the chunk "
                "forward filled (deltanet_chunk_saved_size elements)");
  const int64_t C = chunk_size, NC = d.chunks(C), state = Dk * Dv, block = saved_block(Dk, Dv, C);
  const int64_t ldk = d.ldk(), ldv = d.ldv();
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *P, *dP, *D, *du, *x, *dr, *y, *z, *dog, *ul, *G, *gamma, *inv_gamma, *lambda, *gdg, *dlambda, *dG, *db, *bt, *dS;
    arena.carve({{P, C * C},      // tril(Q K^T) . D, then F + F^T
                 {dP, C * C},     // its gradient, then dL^T
                 {D, C * C},      // decay ratios (all ones without gates)
                 {du, C * Dv},    // dU'
                 {x, C * Dv},     // A^-T dU'
                 {dr, C * Dv},    // diag(gamma) dR
                 {y, C * Dv},     // K dS1
                 {z, C * Dk},     // dO S0^T
                 {dog, C * Dv},   // diag(gamma) dO
                 {ul, C * Dv},    // diag(lambda) U'
                 {G, C},          // cumulative log-decays and their exponentials
                 {gamma, C},
                 {inv_gamma, C},
                 {lambda, C},
                 {gdg, C},        // gamma_i dLoss/dgamma_i
                 {dlambda, C},    // dLoss/dlambda_i
                 {dG, C},         // dLoss/dG_i
                 {db, C},         // this chunk's dbeta
                 {bt, C},         // this chunk's beta, contiguous
                 {dS, state}});   // gradient wrt the state after the current chunk
    if (!a) std::fill(D, D + C * C, T(1));
    const int64_t bh = b * H + h, og = d.row(b, 0, h), oq = og * Dk, ov = og * Dv;
    load_state(dS, dht, nullptr, bh, Dk, Dv, Dv);
    for (int64_t c = NC - 1; c >= 0; --c) {
      const int64_t t0 = c * C, n = std::min(C, T_ - t0);
      const bool zero_state = c == 0 && !h0;
      const SavedChunk<const T> blk(saved + (bh * NC + c) * block, Dk, Dv, C);
      const T *S0 = blk.S0, *u = blk.u, *r = blk.r, *pg = blk.pg;
      const T* qc = q + oq + t0 * ldk;
      const T* kc = k + oq + t0 * ldk;
      const T* vc = v + ov + t0 * ldv;
      const T* bc = beta + og + t0 * H;
      const T* doc = do_ + ov + t0 * ldv;
      T* dqc = dq + oq + t0 * ldk;
      T* dkc = dk + oq + t0 * ldk;
      T* dvc = dv + ov + t0 * ldv;
      if (a) {
        cumulative_decays(G, gamma, inv_gamma, lambda, D, a + og + t0 * H, H, n, C);
        std::fill(gdg, gdg + n, T(0));  // gamma_i dLoss/dgamma_i
        std::fill(dG, dG + n, T(0));
      }
      std::fill(db, db + n, T(0));
      for (int64_t i = 0; i < n; ++i) bt[i] = bc[i * H];
      // P from its saved lower triangle
      for (int64_t i = 0; i < n; ++i) {
        std::copy(pg + i * C, pg + i * C + i + 1, P + i * C);
        std::fill(P + i * C + i + 1, P + i * C + n, T(0));
      }

      // forward: O += scale P U'  =>  dU' = scale P^T dO
      causal_transposed_times(n, Dv, scale, P, C, doc, ldv, T(0), du, Dv);
      // forward: S1 = gamma_last S0 + K^T diag(lambda) U'
      //   =>  dU' += diag(lambda) K dS1,  dK += diag(lambda) U' dS1^T,  dlambda_i = (K dS1)_i . U'_i
      const T* u_scaled = u;
      if (a) {
        gemm<T>(false, false, n, Dv, Dk, T(1), kc, ldk, dS, Dv, T(0), y, Dv);
        for (int64_t i = 0; i < n; ++i) {
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < Dv; ++j) {
            acc += y[i * Dv + j] * u[i * Dv + j];
            du[i * Dv + j] += lambda[i] * y[i * Dv + j];
            ul[i * Dv + j] = lambda[i] * u[i * Dv + j];
          }
          dlambda[i] = acc;
        }
        u_scaled = ul;
      } else {
        gemm<T>(false, false, n, Dv, Dk, T(1), kc, ldk, dS, Dv, T(1), du, Dv);
      }
      gemm<T>(false, true, n, Dk, Dv, T(1), u_scaled, Dv, dS, Dv, T(1), dkc, ldk);
      // forward: U' = A^-1 diag(beta) R  =>  X = A^-T dU',  dR = diag(beta) X,  dbeta_i += R_i . X_i
      causal_transposed_times(n, Dv, T(1), blk.ainv, C, du, Dv, T(0), x, Dv);
      // forward: R = V - diag(gamma) K S0
      //   =>  dV += dR,  dK -= diag(gamma) dR S0^T,  dS0 -= K^T diag(gamma) dR,
      //       gamma_i dgamma_i -= dR_i . (gamma_i K S0)_i, i.e. += dR_i . (R_i - V_i)
      // (dr holds diag(gamma) dR, the form both products use)
      for (int64_t i = 0; i < n; ++i) {
        const T bi = bc[i * H], g = a ? gamma[i] : T(1);
        const T *xi = x + i * Dv, *ri = r + i * Dv, *vi = vc + i * ldv;
        T* dvi = dvc + i * ldv;
        T* dri = dr + i * Dv;
        T acc_beta = 0;
#pragma omp simd reduction(+ : acc_beta)
        for (int64_t j = 0; j < Dv; ++j) {
          acc_beta += ri[j] * xi[j];
          dvi[j] += bi * xi[j];
          dri[j] = g * bi * xi[j];
        }
        db[i] += acc_beta;
        if (a) {
          T acc_gamma = 0;
#pragma omp simd reduction(+ : acc_gamma)
          for (int64_t j = 0; j < Dv; ++j) acc_gamma += xi[j] * (ri[j] - vi[j]);
          gdg[i] += bi * acc_gamma;
        }
      }
      if (!zero_state) gemm<T>(false, true, n, Dk, Dv, T(-1), dr, Dv, S0, Dv, T(1), dkc, ldk);
      // forward: P = tril(Q K^T) . D  with  O += scale P U'
      //   =>  dP = scale tril(dO U'^T);  dQ += (dP . D) K,  dK += (dP . D)^T Q;
      //       D_ij = exp(G_i - G_j): dG_i += dP_ij P_ij, dG_j -= dP_ij P_ij
      causal_scores(n, Dv, scale, doc, ldv, u, Dv, dP, C);
      for (int64_t i = 0; i < n; ++i) {
        T* row = dP + i * C;
        if (a) {
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < i; ++j) {
            const T e = row[j] * P[i * C + j];
            acc += e;
            dG[j] -= e;
          }
          dG[i] += acc;
#pragma omp simd
          for (int64_t j = 0; j <= i; ++j) row[j] *= D[i * C + j];
        }
        std::fill(row + i + 1, row + n, T(0));
      }
      causal_times(n, Dk, T(1), dP, C, kc, ldk, T(1), dqc, ldk);
      causal_transposed_times(n, Dk, T(1), dP, C, qc, ldk, T(1), dkc, ldk);
      // forward: O = scale diag(gamma) Q S0 (+ ...)
      //   =>  dQ += scale diag(gamma) dO S0^T,  gamma_i dgamma_i += scale gamma_i q_i . (S0 do_i)  (dS0 below)
      if (!zero_state) {
        if (a) {
          gemm<T>(false, true, n, Dk, Dv, T(1), doc, ldv, S0, Dv, T(0), z, Dk);
          // (row pointers outside the simd loop: with the indexing inside it GCC does not vectorize it)
          for (int64_t i = 0; i < n; ++i) {
            const T sg = scale * gamma[i];
            const T *zi = z + i * Dk, *qi = qc + i * ldk;
            T* dqi = dqc + i * ldk;
            T acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t j = 0; j < Dk; ++j) {
              acc += zi[j] * qi[j];
              dqi[j] += sg * zi[j];
            }
            gdg[i] += sg * acc;
          }
        } else {
          gemm<T>(false, true, n, Dk, Dv, scale, doc, ldv, S0, Dv, T(1), dqc, ldk);
        }
      }
      // forward: A = I + L with L_ij = beta_i gd_ij (j < i, gd = K K^T . D, saved above the diagonal of PG)
      //   dA = -X U'^T; its transpose dLT = -U' X^T puts dL_ij at row j, column i, beside gd_ij.
      //   =>  dbeta_i += sum_j dL_ij gd_ij;  dK += (F + F^T) K with F_ij = beta_i dL_ij D_ij;
      //       D_ij = exp(G_i - G_j): dG_i += dL_ij L_ij, dG_j -= dL_ij L_ij
      T* dLT = dP;  // dP is no longer needed
      gemm<T>(false, true, n, n, Dv, T(-1), u, Dv, x, Dv, T(0), dLT, C);
      T* F = P;  // nor is P: the symmetric F + F^T goes there
      for (int64_t j = 0; j < n; ++j) {
        const T* t = dLT + j * C;
        const T* g = pg + j * C;
        const T* dj = D + j * C;
        T* f = F + j * C;
#pragma omp simd
        for (int64_t i = j + 1; i < n; ++i) {
          db[i] += t[i] * g[i];
          f[i] = bt[i] * t[i] * dj[i];
        }
        if (a) {
          T acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int64_t i = j + 1; i < n; ++i) {
            const T e = bt[i] * t[i] * g[i];
            dG[i] += e;
            acc += e;
          }
          dG[j] -= acc;
        }
        f[j] = 0;
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < i; ++j) F[i * C + j] = F[j * C + i];
      gemm<T>(false, false, n, Dk, n, T(1), F, C, kc, ldk, T(1), dkc, ldk);
      // dS0 = gamma_last dS1 + scale Q^T diag(gamma) dO - K^T diag(gamma) dR;  dgamma_last += <dS1, S0>
      if (a) {
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < state; ++i) acc += dS[i] * S0[i];
        const T g_last = gamma[n - 1];
        gdg[n - 1] += g_last * acc;
        for (int64_t i = 0; i < state; ++i) dS[i] *= g_last;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < Dv; ++j) dog[i * Dv + j] = gamma[i] * doc[i * ldv + j];
        gemm<T>(true, false, Dk, Dv, n, scale, qc, ldk, dog, Dv, T(1), dS, Dv);
      } else {
        gemm<T>(true, false, Dk, Dv, n, scale, qc, ldk, doc, ldv, T(1), dS, Dv);
      }
      gemm<T>(true, false, Dk, Dv, n, T(-1), kc, ldk, dr, Dv, T(1), dS, Dv);
      for (int64_t i = 0; i < n; ++i) dbeta[og + (t0 + i) * H] += db[i];
      if (a) {
        // gamma_i = exp(G_i), lambda_i = exp(G_last - G_i), G_i = sum_{t <= i} a_t (within the chunk)
        T lam = 0;
        for (int64_t i = 0; i < n; ++i) {
          dG[i] += gdg[i] - lambda[i] * dlambda[i];
          lam += lambda[i] * dlambda[i];
        }
        dG[n - 1] += lam;
        T acc = 0;
        for (int64_t i = n - 1; i >= 0; --i) {
          acc += dG[i];
          da[og + (t0 + i) * H] += acc;
        }
      }
    }
    store_state(dh0, nullptr, dS, bh, Dk, Dv, Dv, true);
  });
}

LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_recurrent_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_recurrent_backward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_chunk_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_chunk_backward)

}  // namespace linattn::cpu
