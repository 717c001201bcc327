// DeltaNet and Gated DeltaNet: recurrent and chunkwise (WY) forward and backward.
// One implementation serves both mixers: a == nullptr is plain DeltaNet (every gate factor is 1).
// The recurrent form steps token by token (delta_step, delta_step_backward); the chunkwise form runs
// the stages of deltanet_stages.h chunk after chunk (the math and derivations are there).
#include "kernels/cpu/deltanet.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/chunk_mixer.h"
#include "kernels/cpu/deltanet_stages.h"
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

template <class T>
MixerDims dims(const DeltaNetArgs<T>& p) {
  return {p.B, p.len, p.H, p.Dk, p.Dv};
}

// One token's rows of the inputs and of their gradients.
template <class T>
struct TokenRows {
  const T *q, *k, *v, *dO;
  T *dq, *dk, *dv;
};

// Backward of one step (delta_step, then o_t = scale S_t^T q_t), given S_{t-1} (prev) and S_t (cur):
// dS holds dLoss/dS_t on entry and dLoss/dS_{t-1} on return; dbeta, dgate receive this token's
// gradients of beta and of the log-decay a (the latter meaningless without gates). Scratch: v_old,
// u, du, dv_old [Dv].
template <class T>
void delta_step_backward(T* dS, T& dbeta, T& dgate_out, const TokenRows<T>& x, const T* prev, const T* cur, T bt,
                         T decay, T scale, int64_t Dk, int64_t Dv, T* v_old, T* u, T* du, T* dv_old) {
  // Recompute v_old = decay S_{t-1}^T k and u = beta (v - v_old).
  std::fill(v_old, v_old + Dv, T(0));
  for (int64_t i = 0; i < Dk; ++i)
    for (int64_t j = 0; j < Dv; ++j) v_old[j] += x.k[i] * prev[i * Dv + j];
  for (int64_t j = 0; j < Dv; ++j) {
    v_old[j] *= decay;
    u[j] = bt * (x.v[j] - v_old[j]);
  }
  // forward: o_t = scale S_t^T q_t  =>  dq_t += scale S_t do_t, dS_t += scale q_t do_t^T
  for (int64_t i = 0; i < Dk; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < Dv; ++j) {
      acc += cur[i * Dv + j] * x.dO[j];
      dS[i * Dv + j] += scale * x.q[i] * x.dO[j];
    }
    x.dq[i] += scale * acc;
  }
  // forward: S_t = S~ + k u^T  =>  du = dS_t^T k, dk += dS_t u, dS~ = dS_t
  std::fill(du, du + Dv, T(0));
  for (int64_t i = 0; i < Dk; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < Dv; ++j) {
      du[j] += dS[i * Dv + j] * x.k[i];
      acc += dS[i * Dv + j] * u[j];
    }
    x.dk[i] += acc;
  }
  // forward: u = beta (v - v_old)  =>  dv += beta du, dbeta += du . (v - v_old), dv_old = -beta du
  T db = 0;
  for (int64_t j = 0; j < Dv; ++j) {
    x.dv[j] += bt * du[j];
    db += du[j] * (x.v[j] - v_old[j]);
    dv_old[j] = -bt * du[j];
  }
  dbeta += db;
  // forward: v_old = S~^T k with S~ = decay S_{t-1}
  //   =>  dS~ += k dv_old^T, dk += S~ dv_old
  // forward: S~ = exp(a) S_{t-1}  =>  da += <dS~, S~>, dS_{t-1} = decay dS~
  T dgate = 0;
  for (int64_t i = 0; i < Dk; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < Dv; ++j) {
      T& g = dS[i * Dv + j];
      g += x.k[i] * dv_old[j];
      acc += prev[i * Dv + j] * dv_old[j];
      dgate += g * prev[i * Dv + j];
      g *= decay;
    }
    x.dk[i] += decay * acc;
  }
  dgate_out = decay * dgate;
}

// Backward of the recurrence, last token first, carrying dS = dLoss/dS_t. The states are
// recomputed segment by segment from checkpoints taken every `kSegment` tokens.
constexpr int64_t kSegment = 64;

}  // namespace

template <class T>
void deltanet_recurrent_forward(const DeltaNetArgs<T>& p) {
  const MixerDims d = dims(p);
  check_mixer(d, 1, "deltanet_recurrent_forward");
  const int64_t H = d.H, Dk = d.Dk, Dv = d.Dv, ldk = d.ldk(), ldv = d.ldv();
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *S, *v_old, *u;
    arena.carve({{S, Dk * Dv}, {v_old, Dv}, {u, Dv}});
    load_state(S, p.h0, nullptr, b * H + h, Dk, Dv, Dv);
    const int64_t og = d.row(b, 0, h), oq = og * Dk, ov = og * Dv;
    for (int64_t t = 0; t < d.T; ++t) {
      const T decay = p.a ? std::exp(p.a[og + t * H]) : T(1);
      delta_step(S, v_old, u, p.k + oq + t * ldk, p.v + ov + t * ldv, p.beta[og + t * H], decay, Dk, Dv);
      read_out(p.o + ov + t * ldv, S, p.q + oq + t * ldk, p.scale, Dk, Dv);
    }
    store_state(p.ht, nullptr, S, b * H + h, Dk, Dv, Dv, false);
  });
}

template <class T>
void deltanet_recurrent_backward(const DeltaNetArgs<T>& p) {
  const MixerDims d = dims(p);
  check_mixer(d, 1, "deltanet_recurrent_backward");
  const int64_t T_ = d.T, H = d.H, Dk = d.Dk, Dv = d.Dv, ldk = d.ldk(), ldv = d.ldv();
  const int64_t state = Dk * Dv, nseg = (T_ + kSegment - 1) / kSegment;
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
    auto decay_at = [&](int64_t t) { return p.a ? std::exp(p.a[og + t * H]) : T(1); };
    auto step = [&](T* S, int64_t t) {
      delta_step(S, v_old, u, p.k + oq + t * ldk, p.v + ov + t * ldv, p.beta[og + t * H], decay_at(t), Dk, Dv);
    };
    // Forward sweep: the state at the start of every segment.
    T* S = states;
    load_state(S, p.h0, nullptr, b * H + h, Dk, Dv, Dv);
    for (int64_t s = 0; s < nseg; ++s) {
      std::copy(S, S + state, checkpoints + s * state);
      for (int64_t t = s * kSegment; t < std::min(T_, (s + 1) * kSegment); ++t) step(S, t);
    }
    load_state(dS, p.dht, nullptr, b * H + h, Dk, Dv, Dv);
    for (int64_t s = nseg - 1; s >= 0; --s) {
      const int64_t t0 = s * kSegment, t1 = std::min(T_, t0 + kSegment);
      // states[i] = S_{t0 + i - 1}: the state before token t0 + i.
      std::copy(checkpoints + s * state, checkpoints + (s + 1) * state, states);
      for (int64_t t = t0; t < t1; ++t) {
        T* next = states + (t - t0 + 1) * state;
        std::copy(next - state, next, next);
        step(next, t);
      }
      for (int64_t t = t1 - 1; t >= t0; --t) {
        const T* prev = states + (t - t0) * state;  // S_{t-1}
        const TokenRows<T> x{p.q + oq + t * ldk,  p.k + oq + t * ldk,  p.v + ov + t * ldv, p.dO + ov + t * ldv,
                             p.dq + oq + t * ldk, p.dk + oq + t * ldk, p.dv + ov + t * ldv};
        T dgate = 0;
        delta_step_backward(dS, p.dbeta[og + t * H], dgate, x, prev, prev + state, p.beta[og + t * H], decay_at(t),
                            p.scale, Dk, Dv, v_old, u, du, dv_old);
        if (p.da) p.da[og + t * H] += dgate;
      }
    }
    store_state(p.dh0, nullptr, dS, b * H + h, Dk, Dv, Dv, true);
  });
}

// ---- Chunkwise form: the stages of deltanet_stages.h, chunk after chunk ---------------------------

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

// Chunk c of (batch b, head h): its size and where its first token's rows are.
struct ChunkAt {
  deltanet::ChunkShape shape;
  int64_t t0;
  int64_t qk, vo, s;  // offsets of its first row in q/k, in v/o, and of its first scalar in beta/a
};
inline ChunkAt chunk_at(const MixerDims& d, int64_t C, int64_t b, int64_t h, int64_t c) {
  const int64_t t0 = c * C, row = d.row(b, t0, h);
  return {{std::min(C, d.T - t0), C, d.Dk, d.Dv, d.ldk(), d.ldv(), d.H}, t0, row * d.Dk, row * d.Dv, row};
}

}  // namespace

template <class T>
void deltanet_chunk_forward(const DeltaNetArgs<T>& p) {
  using namespace deltanet;
  const MixerDims d = dims(p);
  check_mixer(d, p.chunk_size, "deltanet_chunk_forward");
  const int64_t C = p.chunk_size, NC = d.chunks(C), Dk = d.Dk, Dv = d.Dv, block = saved_block(Dk, Dv, C);
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *gram, *P, *l, *rb, *ul, *S, *own;
    ChunkDecays<T> g{p.a != nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    arena.carve({{gram, C * C},  // K K^T . D
                 {P, C * C},     // tril(Q K^T) . D
                 {g.D, C * C},   // decay ratios (all ones without gates)
                 {l, C},         // a row of L in the inverse
                 {rb, C * Dv},   // diag(beta) R
                 {ul, C * Dv},   // diag(lambda) U'
                 {g.G, C},       // cumulative log-decays and their exponentials
                 {g.gamma, C},
                 {g.inv_gamma, C},
                 {g.lambda, C},
                 {S, Dk * Dv},   // the final state
                 {own, p.saved ? 0 : 2 * block}});  // forward without `saved`: two blocks in turn
    if (!g.gated) std::fill(g.D, g.D + C * C, T(1));
    const int64_t bh = b * d.H + h;
    auto block_of = [&](int64_t c) {
      return SavedChunk<T>(p.saved ? p.saved + (bh * NC + c) * block : own + (c % 2) * block, Dk, Dv, C);
    };
    if (NC == 0) {  // T == 0: the final state is the initial one
      load_state(S, p.h0, nullptr, bh, Dk, Dv, Dv);
      store_state(p.ht, nullptr, S, bh, Dk, Dv, Dv, false);
      return;
    }
    load_state(block_of(0).S0, p.h0, nullptr, bh, Dk, Dv, Dv);
    for (int64_t c = 0; c < NC; ++c) {
      const ChunkAt at = chunk_at(d, C, b, h, c);
      const ChunkShape& s = at.shape;
      SavedChunk<T> blk = block_of(c);
      const T* S0 = c == 0 && !p.h0 ? nullptr : blk.S0;  // null: the zero state, whose products are skipped
      const T *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *beta = p.beta + at.s;
      if (g.gated) chunk_decays(g, p.a + at.s, s);
      gram_kkt(gram, k, g, s);
      solve_unit_lower(blk.ainv, gram, beta, s, l);
      wy_updates(blk.u, blk.r, rb, blk.ainv, k, v, beta, S0, g, s);
      causal_scores_qk(P, blk.pg, q, k, gram, g, s);
      chunk_output(p.o + at.vo, q, S0, P, blk.u, p.scale, g, s);
      state_pass(c + 1 < NC ? block_of(c + 1).S0 : S, blk.S0, k, blk.u, g, s, ul);
    }
    store_state(p.ht, nullptr, S, bh, Dk, Dv, Dv, false);
  });
}

template <class T>
void deltanet_chunk_backward(const DeltaNetArgs<T>& p) {
  using namespace deltanet;
  const MixerDims d = dims(p);
  check_mixer(d, p.chunk_size, "deltanet_chunk_backward");
  LINATTN_CHECK(p.saved != nullptr || d.T == 0, "deltanet_chunk_backward: `saved` is null; pass the buffer the chunk "
                "forward filled (deltanet_chunk_saved_size elements)");
  const int64_t C = p.chunk_size, NC = d.chunks(C), Dk = d.Dk, Dv = d.Dv, H = d.H, block = saved_block(Dk, Dv, C);
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *P, *dP, *du, *x, *dr, *y, *z, *dog, *ul, *bt, *dS;
    ChunkDecays<T> g{p.a != nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
    ChunkGateGrads<T> gg{};
    arena.carve({{P, C * C},        // tril(Q K^T) . D, then F + F^T
                 {dP, C * C},       // its gradient, then dL^T
                 {g.D, C * C},      // decay ratios (all ones without gates)
                 {du, C * Dv},      // dU'
                 {x, C * Dv},       // A^-T dU'
                 {dr, C * Dv},      // diag(gamma) dR
                 {y, C * Dv},       // K dS1
                 {z, C * Dk},       // dO S0^T
                 {dog, C * Dv},     // diag(gamma) dO
                 {ul, C * Dv},      // diag(lambda) U'
                 {g.G, C},          // cumulative log-decays and their exponentials
                 {g.gamma, C},
                 {g.inv_gamma, C},
                 {g.lambda, C},
                 {gg.gdg, C},       // gamma_i dLoss/dgamma_i
                 {gg.dlambda, C},   // dLoss/dlambda_i
                 {gg.dG, C},        // dLoss/dG_i
                 {gg.db, C},        // this chunk's dbeta
                 {bt, C},           // this chunk's beta, contiguous
                 {dS, Dk * Dv}});   // gradient wrt the state after the current chunk
    if (!g.gated) std::fill(g.D, g.D + C * C, T(1));
    const int64_t bh = b * H + h;
    load_state(dS, p.dht, nullptr, bh, Dk, Dv, Dv);
    for (int64_t c = NC - 1; c >= 0; --c) {
      const ChunkAt at = chunk_at(d, C, b, h, c);
      const ChunkShape& s = at.shape;
      const int64_t n = s.n;
      const SavedChunk<const T> blk(p.saved + (bh * NC + c) * block, Dk, Dv, C);
      const T* S0 = c == 0 && !p.h0 ? nullptr : blk.S0;  // null: the zero state, whose products are skipped
      const T *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *beta = p.beta + at.s, *dO = p.dO + at.vo;
      T *dq = p.dq + at.qk, *dk = p.dk + at.qk, *dv = p.dv + at.vo;
      if (g.gated) {
        chunk_decays(g, p.a + at.s, s);
        std::fill(gg.gdg, gg.gdg + n, T(0));
        std::fill(gg.dG, gg.dG + n, T(0));
      }
      std::fill(gg.db, gg.db + n, T(0));
      for (int64_t i = 0; i < n; ++i) bt[i] = beta[i * H];
      // P from its saved lower triangle
      for (int64_t i = 0; i < n; ++i) {
        std::copy(blk.pg + i * C, blk.pg + i * C + i + 1, P + i * C);
        std::fill(P + i * C + i + 1, P + i * C + n, T(0));
      }
      intra_output_backward_du(du, P, dO, p.scale, s);
      state_pass_backward(du, dk, gg, dS, k, blk.u, g, s, y, ul);
      wy_backward(x, dr, dv, dk, gg, du, blk.ainv, blk.r, v, beta, S0, g, s);
      scores_backward(dq, dk, gg, P, q, k, dO, blk.u, p.scale, g, s, dP);
      inter_output_backward(dq, gg, q, dO, S0, p.scale, g, s, z);
      gram_solve_backward(dk, gg, blk.u, x, blk.pg, k, bt, g, s, /*dLT=*/dP, /*F=*/P);  // dP and P are spent
      state_backward(dS, gg, blk.S0, q, k, dO, dr, p.scale, g, s, dog);
      for (int64_t i = 0; i < n; ++i) p.dbeta[at.s + i * H] += gg.db[i];
      if (g.gated) decay_backward(p.da + at.s, gg, g, s);
    }
    store_state(p.dh0, nullptr, dS, bh, Dk, Dv, Dv, true);
  });
}

LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_recurrent_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_recurrent_backward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_chunk_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(deltanet_chunk_backward)

}  // namespace linattn::cpu

namespace linattn {

int64_t deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, int64_t chunk_size) {
  const cpu::MixerDims d{B, T_, H, Dk, Dv};
  cpu::check_mixer(d, chunk_size, "deltanet_chunk_saved_size");
  return B * H * d.chunks(chunk_size) * cpu::saved_block(Dk, Dv, chunk_size);
}

}  // namespace linattn

