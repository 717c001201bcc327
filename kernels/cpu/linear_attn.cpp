#include "kernels/cpu/linear_attn.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/chunk_mixer.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu {
namespace {

// dst[i, :] = phi(src[i * ld, :]) for n rows of d entries; dst is contiguous [n, d].
template <class T>
void gather_feature(T* dst, const T* src, int64_t n, int64_t d, int64_t ld, FeatureMap phi) {
  for (int64_t i = 0; i < n; ++i) {
    const T* x = src + i * ld;
    T* y = dst + i * d;
    switch (phi) {
      case FeatureMap::identity:
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) y[j] = x[j];
        break;
      case FeatureMap::elu1:
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          const T e = exp_nonpos(x[j]);  // both branches computed, then selected: keeps the loop vectorized
          y[j] = x[j] > T(0) ? x[j] + T(1) : e;
        }
        break;
      case FeatureMap::relu:
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) y[j] = x[j] > T(0) ? x[j] : T(0);
        break;
    }
  }
}

// dst[i, :] = [src[i * ld, 0..d) | 1 if W > d]: n rows into a contiguous [n, W] block, W = d or d + 1.
template <class T>
void gather_values(T* dst, const T* src, int64_t n, int64_t d, int64_t ld, int64_t W) {
  for (int64_t i = 0; i < n; ++i) {
    const T* x = src + i * ld;
    T* y = dst + i * W;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] = x[j];
    if (W > d) y[d] = T(1);
  }
}

// dx[i * ld, :] += dy[i, :] * phi'(x[i * ld, :]): the chain rule through the feature map.
template <class T>
void scatter_feature_grad(T* dx, const T* dy, const T* x, int64_t n, int64_t d, int64_t ld, FeatureMap phi) {
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * ld;
    const T* g = dy + i * d;
    T* out = dx + i * ld;
    switch (phi) {
      case FeatureMap::identity:
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) out[j] += g[j];
        break;
      case FeatureMap::elu1:  // d/dx (elu(x) + 1) = 1 for x > 0, e^x otherwise
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          const T e = exp_nonpos(xi[j]);
          out[j] += g[j] * (xi[j] > T(0) ? T(1) : e);
        }
        break;
      case FeatureMap::relu:
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) out[j] += xi[j] > T(0) ? g[j] : T(0);
        break;
    }
  }
}

template <class T>
T feature(FeatureMap phi, T x) {
  switch (phi) {
    case FeatureMap::identity: return x;
    case FeatureMap::elu1: return x > T(0) ? x + T(1) : exp_nonpos(x);
    case FeatureMap::relu: return x > T(0) ? x : T(0);
  }
  return x;
}

template <class T>
T feature_grad(FeatureMap phi, T x) {
  switch (phi) {
    case FeatureMap::identity: return T(1);
    case FeatureMap::elu1: return x > T(0) ? T(1) : exp_nonpos(x);
    case FeatureMap::relu: return x > T(0) ? T(1) : T(0);
  }
  return T(1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Recurrent form: the reference.

template <class T>
void linear_attn_recurrent_forward(T* o, T* ht, T* zT, const T* q, const T* k, const T* v, const T* h0, const T* z0,
                                   int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                                   FeatureMap phi, bool normalize) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "linear_attn_recurrent_forward");
  const int64_t W = Dv + (normalize ? 1 : 0);
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    const int64_t bh = b * H + h;
    T *Sz, *pq, *pk;
    arena.carve({{Sz, Dk * W}, {pq, Dk}, {pk, Dk}});  // Sz = [S | z]: [Dk, W]
    load_state(Sz, h0, normalize ? z0 : nullptr, bh, Dk, Dv, W);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t row = d.row(b, t, h);
      for (int64_t i = 0; i < Dk; ++i) {
        pq[i] = feature(phi, q[row * Dk + i]);
        pk[i] = feature(phi, k[row * Dk + i]);
      }
      // S_t = S_{t-1} + phi(k_t) v_t^T,  z_t = z_{t-1} + phi(k_t)
      for (int64_t i = 0; i < Dk; ++i) {
        for (int64_t j = 0; j < Dv; ++j) Sz[i * W + j] += pk[i] * v[row * Dv + j];
        if (normalize) Sz[i * W + Dv] += pk[i];
      }
      // o_t = scale S_t^T phi(q_t)   or   S_t^T phi(q_t) / (phi(q_t)^T z_t + eps)
      T den = T(kLinearAttnEps);
      if (normalize)
        for (int64_t i = 0; i < Dk; ++i) den += pq[i] * Sz[i * W + Dv];
      for (int64_t j = 0; j < Dv; ++j) {
        T num = 0;
        for (int64_t i = 0; i < Dk; ++i) num += Sz[i * W + j] * pq[i];
        o[row * Dv + j] = normalize ? num / den : scale * num;
      }
    }
    store_state(ht, normalize ? zT : nullptr, Sz, bh, Dk, Dv, W, false);
  });
}

template <class T>
void linear_attn_recurrent_backward(T* dq, T* dk, T* dv, T* dh0, T* dz0, const T* q, const T* k, const T* v,
                                    const T* h0, const T* z0, const T* do_, const T* dht, const T* dzT, int64_t B,
                                    int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale, FeatureMap phi,
                                    bool normalize) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, 1, "linear_attn_recurrent_backward");
  const int64_t W = Dv + (normalize ? 1 : 0);
  for_each_head<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    const int64_t bh = b * H + h;
    T *states, *Sz, *dSz, *pq, *pk, *dnum;  // states: every [S_t | z_t] of the forward (after token t)
    arena.carve({{states, T_ * Dk * W}, {Sz, Dk * W}, {dSz, Dk * W}, {pq, Dk}, {pk, Dk}, {dnum, W}});
    load_state(Sz, h0, normalize ? z0 : nullptr, bh, Dk, Dv, W);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t row = d.row(b, t, h);
      for (int64_t i = 0; i < Dk; ++i) {
        const T p = feature(phi, k[row * Dk + i]);
        for (int64_t j = 0; j < Dv; ++j) Sz[i * W + j] += p * v[row * Dv + j];
        if (normalize) Sz[i * W + Dv] += p;
      }
      std::copy(Sz, Sz + Dk * W, states + t * Dk * W);
    }
    load_state(dSz, dht, normalize ? dzT : nullptr, bh, Dk, Dv, W);
    for (int64_t t = T_ - 1; t >= 0; --t) {
      const int64_t row = d.row(b, t, h);
      const T* St = states + t * Dk * W;
      for (int64_t i = 0; i < Dk; ++i) {
        pq[i] = feature(phi, q[row * Dk + i]);
        pk[i] = feature(phi, k[row * Dk + i]);
      }
      // Gradient of the output's numerator S_t^T phi(q_t) (dnum[0..Dv)) and of its denominator (dnum[Dv]).
      if (normalize) {
        // forward: o = num / den  =>  dnum = do / den,  dden = -(do . num) / den^2
        T den = T(kLinearAttnEps), do_num = 0;
        for (int64_t i = 0; i < Dk; ++i) den += pq[i] * St[i * W + Dv];
        for (int64_t j = 0; j < Dv; ++j) {
          T num = 0;
          for (int64_t i = 0; i < Dk; ++i) num += St[i * W + j] * pq[i];
          dnum[j] = do_[row * Dv + j] / den;
          do_num += do_[row * Dv + j] * num;
        }
        dnum[Dv] = -do_num / (den * den);
      } else {
        for (int64_t j = 0; j < Dv; ++j) dnum[j] = scale * do_[row * Dv + j];
      }
      // forward: num = S_t^T pq, den = pq . z_t + eps
      //   =>  dpq = S_t dnum + z_t dden,  dS_t += pq dnum^T,  dz_t += pq dden
      for (int64_t i = 0; i < Dk; ++i) {
        T dpq = 0;
        for (int64_t j = 0; j < W; ++j) {
          dpq += St[i * W + j] * dnum[j];
          dSz[i * W + j] += pq[i] * dnum[j];
        }
        dq[row * Dk + i] += dpq * feature_grad(phi, q[row * Dk + i]);
      }
      // forward: S_t = S_{t-1} + pk v^T, z_t = z_{t-1} + pk  =>  dpk = dS_t v + dz_t,  dv += dS_t^T pk
      for (int64_t i = 0; i < Dk; ++i) {
        T dpk = normalize ? dSz[i * W + Dv] : T(0);
        for (int64_t j = 0; j < Dv; ++j) dpk += dSz[i * W + j] * v[row * Dv + j];
        dk[row * Dk + i] += dpk * feature_grad(phi, k[row * Dk + i]);
      }
      for (int64_t j = 0; j < Dv; ++j) {
        T s = 0;
        for (int64_t i = 0; i < Dk; ++i) s += dSz[i * W + j] * pk[i];
        dv[row * Dv + j] += s;
      }
    }
    store_state(dh0, normalize ? dz0 : nullptr, dSz, bh, Dk, Dv, W, true);
  });
}

// ---------------------------------------------------------------------------------------------
// Chunkwise form. Per (batch, head) and chunk of n <= C tokens, with Q = phi(q), K = phi(k) [n, Dk],
// the augmented values V' = [V | 1] [n, W] and state S' = [S | z] [Dk, W] (W = Dv + 1 when
// normalized, else V' = V, S' = S), P = M ⊙ Q K^T:
//   O' = s (Q S0' + P V'),   S1' = S0' + K^T V'
// with s = scale (unnormalized: o = O') or s = 1 (normalized: o = O'[:, :Dv] / (O'[:, Dv] + eps)).

int64_t linear_attn_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                     int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "linear_attn_chunk_saved_size");
  return B * H * d.chunks(chunk_size) * (Dk * (Dv + (normalize ? 1 : 0)) + chunk_size * chunk_size);
}

template <class T>
void linear_attn_chunk_forward(T* o, T* ht, T* zT, T* saved, const T* q, const T* k, const T* v, const T* h0,
                               const T* z0, int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                               FeatureMap phi, bool normalize, int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "linear_attn_chunk_forward");
  const int64_t C = chunk_size, NC = d.chunks(C), W = Dv + (normalize ? 1 : 0);
  const int64_t ldk = d.ldk(), ldv = d.ldv();
  const T s = normalize ? T(1) : scale;
  const bool direct = phi == FeatureMap::identity && !normalize;  // no feature map, no ones column
  for_head_runs<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    // With a feature map or the normalizer, a chunk's rows are transformed into contiguous blocks
    // here; without, the products use the [B, T, H, d] rows.
    T *Qc, *Kc, *Vc, *Oc, *states;
    arena.carve({{Qc, C * Dk},         // phi(q)
                 {Kc, C * Dk},         // phi(k)
                 {Vc, C * W},          // V' = [v | 1]
                 {Oc, C * W},          // O'
                 {states, H * Dk * W}});  // running states S' = [S | z] of this run's heads
    for (int64_t h = h_begin; h < h_end; ++h)
      load_state(states + h * Dk * W, h0, normalize ? z0 : nullptr, b * H + h, Dk, Dv, W);
    for (int64_t c = 0; c < NC; ++c)
      for (int64_t h = h_begin; h < h_end; ++h) {
        const int64_t bh = b * H + h;
        T* S = states + h * Dk * W;
        const int64_t t0 = c * C, n = std::min(C, T_ - t0);
        const int64_t row = d.row(b, t0, h);
        T* saved_c = saved + (bh * NC + c) * (Dk * W + C * C);  // [S0' | P] of this chunk
        std::copy(S, S + Dk * W, saved_c);
        T* P = saved_c + Dk * W;  // [C, C], kept for the backward
        // The products read q, k, v and write o in place (row stride H * d) where nothing needs
        // transforming; otherwise the rows are gathered into contiguous blocks.
        const RowBlock Q = direct ? RowBlock{q + row * Dk, ldk} : RowBlock{(const T*)Qc, Dk};
        const RowBlock K = direct ? RowBlock{k + row * Dk, ldk} : RowBlock{(const T*)Kc, Dk};
        const RowBlock V = direct ? RowBlock{v + row * Dv, ldv} : RowBlock{(const T*)Vc, W};
        const RowBlock O = direct ? RowBlock{o + row * Dv, ldv} : RowBlock{Oc, W};
        if (!direct) {
          gather_feature(Qc, q + row * Dk, n, Dk, ldk, phi);
          gather_feature(Kc, k + row * Dk, n, Dk, ldk, phi);
          gather_values(Vc, v + row * Dv, n, Dv, ldv, W);
        }
        // P = M ⊙ Q K^T
        causal_scores(n, Dk, T(1), Q.p, Q.ld, K.p, K.ld, P, C);
        // O' = s (Q S0' + P V')
        gemm<T>(false, false, n, W, Dk, s, Q.p, Q.ld, S, W, T(0), O.p, O.ld);
        causal_times(n, W, s, P, C, V.p, V.ld, T(1), O.p, O.ld);
        if (!direct)
          for (int64_t i = 0; i < n; ++i) {
            T* oi = o + (row + i * H) * Dv;
            const T inv = normalize ? T(1) / (Oc[i * W + Dv] + T(kLinearAttnEps)) : T(1);
            for (int64_t j = 0; j < Dv; ++j) oi[j] = Oc[i * W + j] * inv;
          }
        // S1' = S0' + K^T V'
        gemm<T>(true, false, Dk, W, n, T(1), K.p, K.ld, V.p, V.ld, T(1), S, W);
      }
    for (int64_t h = h_begin; h < h_end; ++h)
      store_state(ht, normalize ? zT : nullptr, states + h * Dk * W, b * H + h, Dk, Dv, W, false);
  });
}

template <class T>
void linear_attn_chunk_backward(T* dq, T* dk, T* dv, T* dh0, T* dz0, const T* saved, const T* q, const T* k,
                                const T* v, const T* do_, const T* dht, const T* dzT, int64_t B, int64_t T_,
                                int64_t H, int64_t Dk, int64_t Dv, T scale, FeatureMap phi, bool normalize,
                                int64_t chunk_size) {
  const MixerDims d{B, T_, H, Dk, Dv};
  check_mixer(d, chunk_size, "linear_attn_chunk_backward");
  const int64_t C = chunk_size, NC = d.chunks(C), W = Dv + (normalize ? 1 : 0);
  const int64_t ldk = d.ldk(), ldv = d.ldv();
  const T s = normalize ? T(1) : scale;
  const bool direct = phi == FeatureMap::identity && !normalize;  // no feature map, no ones column
  for_head_runs<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    T *Qc, *Kc, *dQc, *dKc, *dP, *Vc, *Oc, *dOc, *dVc, *dstates;
    arena.carve({{Qc, C * Dk},             // phi(q)
                 {Kc, C * Dk},             // phi(k)
                 {dQc, C * Dk},            // gradient wrt phi(q)
                 {dKc, C * Dk},            // gradient wrt phi(k)
                 {dP, C * C},              // gradient wrt P
                 {Vc, C * W},              // V' = [v | 1]
                 {Oc, C * W},              // O' (normalized: numerator | denominator)
                 {dOc, C * W},             // gradient wrt O'
                 {dVc, C * W},             // gradient wrt V'
                 {dstates, H * Dk * W}});  // gradients wrt the states after the current chunk
    for (int64_t h = h_begin; h < h_end; ++h)
      load_state(dstates + h * Dk * W, dht, normalize ? dzT : nullptr, b * H + h, Dk, Dv, W);
    for (int64_t c = NC - 1; c >= 0; --c)
      for (int64_t h = h_begin; h < h_end; ++h) {
        const int64_t bh = b * H + h;
        T* dS = dstates + h * Dk * W;
        const int64_t t0 = c * C, n = std::min(C, T_ - t0);
        const int64_t row = d.row(b, t0, h);
        const T* S0 = saved + (bh * NC + c) * (Dk * W + C * C);  // [Dk, W]
        const T* P = S0 + Dk * W;                                 // [C, C] = M ⊙ Q K^T
        const RowBlock Q = direct ? RowBlock{q + row * Dk, ldk} : RowBlock{(const T*)Qc, Dk};
        const RowBlock K = direct ? RowBlock{k + row * Dk, ldk} : RowBlock{(const T*)Kc, Dk};
        const RowBlock V = direct ? RowBlock{v + row * Dv, ldv} : RowBlock{(const T*)Vc, W};
        const RowBlock dO = direct ? RowBlock{do_ + row * Dv, ldv} : RowBlock{(const T*)dOc, W};
        // Gradients: accumulated straight into dq, dk, dv (direct), or computed into blocks first.
        const RowBlock dQ = direct ? RowBlock{dq + row * Dk, ldk} : RowBlock{dQc, Dk};
        const RowBlock dK = direct ? RowBlock{dk + row * Dk, ldk} : RowBlock{dKc, Dk};
        const RowBlock dV = direct ? RowBlock{dv + row * Dv, ldv} : RowBlock{dVc, W};
        const T beta = direct ? T(1) : T(0);
        if (!direct) {
          gather_feature(Qc, q + row * Dk, n, Dk, ldk, phi);
          gather_feature(Kc, k + row * Dk, n, Dk, ldk, phi);
          gather_values(Vc, v + row * Dv, n, Dv, ldv, W);
        }
        if (normalize) {
          // Recompute O' = Q S0' + P V' (numerator | denominator), then
          // forward: o = num / den  =>  dnum = do / den,  dden = -(do . num) / den^2
          gemm<T>(false, false, n, W, Dk, T(1), Qc, Dk, S0, W, T(0), Oc, W);
          causal_times(n, W, T(1), P, C, Vc, W, T(1), Oc, W);
          for (int64_t i = 0; i < n; ++i) {
            const T* doi = do_ + (row + i * H) * Dv;
            const T inv = T(1) / (Oc[i * W + Dv] + T(kLinearAttnEps));
            T do_num = 0;
            for (int64_t j = 0; j < Dv; ++j) {
              dOc[i * W + j] = doi[j] * inv;
              do_num += doi[j] * Oc[i * W + j];
            }
            dOc[i * W + Dv] = -do_num * inv * inv;
          }
        } else if (!direct) {
          gather_values(dOc, do_ + row * Dv, n, Dv, ldv, W);
        }

        // forward: O' = s (Q S0' + P V'), P = M ⊙ Q K^T, S1' = S0' + K^T V'
        // dP = s M ⊙ (dO' V'^T)
        causal_scores(n, W, s, dO.p, dO.ld, V.p, V.ld, dP, C);
        // dV' = s P^T dO' + K dS1'
        causal_transposed_times(n, W, s, P, C, dO.p, dO.ld, beta, dV.p, dV.ld);
        gemm<T>(false, false, n, W, Dk, T(1), K.p, K.ld, dS, W, T(1), dV.p, dV.ld);
        // dQ = s dO' S0'^T + dP K
        gemm<T>(false, true, n, Dk, W, s, dO.p, dO.ld, S0, W, beta, dQ.p, dQ.ld);
        causal_times(n, Dk, T(1), dP, C, K.p, K.ld, T(1), dQ.p, dQ.ld);
        // dK = dP^T Q + V' dS1'^T
        causal_transposed_times(n, Dk, T(1), dP, C, Q.p, Q.ld, beta, dK.p, dK.ld);
        gemm<T>(false, true, n, Dk, W, T(1), V.p, V.ld, dS, W, T(1), dK.p, dK.ld);
        // dS0' = s Q^T dO' + dS1'
        gemm<T>(true, false, Dk, W, n, s, Q.p, Q.ld, dO.p, dO.ld, T(1), dS, W);

        if (!direct) {
          // forward: Q = phi(q), K = phi(k), V' = [v | 1] (the ones column is a constant)
          scatter_feature_grad(dq + row * Dk, dQc, q + row * Dk, n, Dk, ldk, phi);
          scatter_feature_grad(dk + row * Dk, dKc, k + row * Dk, n, Dk, ldk, phi);
          for (int64_t i = 0; i < n; ++i) {
            T* dvi = dv + (row + i * H) * Dv;
#pragma omp simd
            for (int64_t j = 0; j < Dv; ++j) dvi[j] += dVc[i * W + j];
          }
        }
      }
    for (int64_t h = h_begin; h < h_end; ++h)
      store_state(dh0, normalize ? dz0 : nullptr, dstates + h * Dk * W, b * H + h, Dk, Dv, W, true);
  });
}

LINATTN_INSTANTIATE_FLOAT_DOUBLE(linear_attn_recurrent_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(linear_attn_recurrent_backward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(linear_attn_chunk_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(linear_attn_chunk_backward)

}  // namespace linattn::cpu
