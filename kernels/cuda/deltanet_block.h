// The per-(batch, head) work of the CUDA DeltaNet and Gated DeltaNet kernels (deltanet.cu), written
// once for a `Block` of cooperating threads so that the same code runs on the device (one CUDA block
// per head, DeviceBlock) and on the host (tests/cuda/deltanet_test.cpp runs it with a sequential
// block against the CPU kernels, so the math is checked on machines without a GPU).
//
// The math is the CPU kernels' (kernels/cpu/deltanet.h, the derivations next to the lines of
// kernels/cpu/deltanet.cpp), with the same `saved` layout, so autograd allocates one buffer for both
// devices: per (batch, head) and chunk, S0 [Dk, Dv], A^-1 [C, C], PG [C, C], U' [C, Dv], R [C, Dv].
// Chunks run one after the other inside the block; within a chunk every phase is a loop over the
// elements of one output (Block::each), separated by Block::sync, and every element is written by
// one iteration only, so the phases have no races whatever order the iterations run in. Every head
// function ends with a sync, so that everything a phase issued has run when it returns.
//
// Fast memory: the gates and the C x C products of the current chunk live in `sh` (shared memory
// on the device, forward_shared / backward_shared elements); the states and the [C, D] products in
// `saved` and in the backward's `work` (backward_work elements per head) in global memory.
// Accumulation is in T (float on the device): float32 states and inter-chunk recurrence.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LINATTN_HD __host__ __device__
#else
#define LINATTN_HD
#endif

namespace linattn::cuda::delta {

// The threads of one CUDA block: each(n, f) runs f(e) for e in [0, n), spread over the threads;
// sync() is the barrier; one(f) runs f on the first thread.
struct DeviceBlock {
  template <class F>
  LINATTN_HD void each(int64_t n, F&& f) const {
#ifdef __CUDA_ARCH__
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) f(e);
#else
    (void)n, (void)f;
#endif
  }
  LINATTN_HD void sync() const {
#ifdef __CUDA_ARCH__
    __syncthreads();
#endif
  }
  template <class F>
  LINATTN_HD void one(F&& f) const {
#ifdef __CUDA_ARCH__
    if (threadIdx.x == 0) f();
#else
    (void)f;
#endif
  }
};

LINATTN_HD inline float ex(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return std::exp(x);
#endif
}
LINATTN_HD inline double ex(double x) {
#ifdef __CUDA_ARCH__
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
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

LINATTN_HD inline int64_t forward_shared(const Dims& d) { return 4 * d.C + 2 * d.C * d.C; }
LINATTN_HD inline int64_t backward_shared(const Dims& d) { return 8 * d.C + d.C * d.C + d.Dk; }
LINATTN_HD inline int64_t backward_work(const Dims& d) { return d.Dk * d.Dv + 4 * d.C * d.Dv + d.C * d.Dk; }
LINATTN_HD inline int64_t recurrent_shared(const Dims& d) { return d.Dv; }

template <class T>
struct ForwardArgs {
  T *o, *ht, *saved;                  // ht may be null; saved: the chunk form only
  const T *q, *k, *v, *beta, *a, *h0;  // a null: DeltaNet; h0 may be null
  T scale;
  Dims d;
};

template <class T>
struct BackwardArgs {
  T *dq, *dk, *dv, *dbeta, *da, *dh0;  // += ; da null when a is, dh0 may be null
  const T* saved;
  const T *q, *k, *v, *beta, *a, *h0, *dO, *dht;
  T* work;  // backward_work(d) per head
  T scale;
  Dims d;
};

// One chunk's view: where its tokens start in q/k (qk), v/o (vo) and beta/a (s); ld* token strides.
struct ChunkAt {
  int64_t t0, n, qk, vo, s;
};
LINATTN_HD inline ChunkAt chunk_at(const Dims& d, int64_t bh, int64_t c) {
  const int64_t b = bh / d.H, h = bh % d.H, t0 = c * d.C;
  const int64_t row = (b * d.T + t0) * d.H + h;
  return {t0, min64(d.C, d.T - t0), row * d.Dk, row * d.Dv, row};
}

// The gates of one chunk into sh: G (within-chunk inclusive cumulative log-decay), gamma = exp(G),
// lambda = exp(G_last - G), and beta contiguous. Without a they are 0, 1, 1. One thread.
template <class T>
LINATTN_HD void chunk_gates(T* G, T* gamma, T* lambda, T* bt, const T* beta, const T* a, int64_t H, int64_t n) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (a) acc += a[i * H];
    G[i] = acc;
    gamma[i] = ex(acc);
    bt[i] = beta[i * H];
  }
  for (int64_t i = 0; i < n; ++i) lambda[i] = ex(G[n - 1] - G[i]);
}

// D_ij = exp(-|G_i - G_j|): exp(G_i - G_j) for j <= i (G never increases); symmetric; 1 without gates.
template <class T>
LINATTN_HD T decay_ratio(const T* G, int64_t i, int64_t j) {
  return ex(-absval(G[i] - G[j]));
}

template <class T>
LINATTN_HD T dot(const T* x, const T* y, int64_t n) {
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * y[i];
  return acc;
}

// ---- the chunkwise forward of head bh -----------------------------------------------------------
template <class T, class Block>
LINATTN_HD void chunk_forward_head(const Block& blk, const ForwardArgs<T>& p, int64_t bh, T* sh) {
  const Dims d = p.d;
  const int64_t C = d.C, NC = d.chunks(), Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state();
  const int64_t ldk = H * Dk, ldv = H * Dv;
  T *G = sh, *gamma = G + C, *lambda = gamma + C, *bt = lambda + C;
  T* M = bt + C;      // K K^T . D, then P = tril(Q K^T) . D
  T* ainv = M + C * C;
  T* base = p.saved + bh * NC * d.block();
  const T* h0 = p.h0 ? p.h0 + bh * S : nullptr;
  T* ht = p.ht ? p.ht + bh * S : nullptr;
  if (NC == 0) {  // T == 0: the final state is the initial one
    if (ht) blk.each(S, [&](int64_t e) { ht[e] = h0 ? h0[e] : T(0); });
    blk.sync();
    return;
  }
  blk.each(S, [&](int64_t e) { base[e] = h0 ? h0[e] : T(0); });
  blk.sync();
  for (int64_t c = 0; c < NC; ++c) {
    const ChunkAt at = chunk_at(d, bh, c);
    const int64_t n = at.n;
    T* S0 = base + c * d.block();
    T *ainv_s = S0 + S, *pg = ainv_s + C * C, *U = pg + C * C, *R = U + C * Dv;
    T* S1 = c + 1 < NC ? base + (c + 1) * d.block() : ht;  // null: the last chunk with no ht wanted
    const T *qc = p.q + at.qk, *kc = p.k + at.qk, *vc = p.v + at.vo;
    T* oc = p.o + at.vo;
    blk.one([&] { chunk_gates(G, gamma, lambda, bt, p.beta + at.s, p.a ? p.a + at.s : nullptr, H, n); });
    blk.sync();
    // gd = K K^T . D (all of it: the upper triangle is saved for the backward)
    blk.each(n * n, [&](int64_t e) {
      const int64_t i = e / n, j = e % n;
      M[i * C + j] = dot(kc + i * ldk, kc + j * ldk, Dk) * decay_ratio(G, i, j);
    });
    blk.sync();
    // A^-1, A = I + tril(diag(beta) gd, -1), by forward substitution: column m of A^-1 solves
    // A x = e_m, so every column is independent (one iteration each):
    //   x_i = 0 (i < m), x_m = 1, x_i = -beta_i sum_{m <= j < i} gd_ij x_j (i > m)
    blk.each(n, [&](int64_t m) {
      for (int64_t i = 0; i < m; ++i) ainv[i * C + m] = 0;
      ainv[m * C + m] = 1;
      for (int64_t i = m + 1; i < n; ++i) {
        T acc = 0;
        for (int64_t j = m; j < i; ++j) acc += M[i * C + j] * ainv[j * C + m];
        ainv[i * C + m] = -bt[i] * acc;
      }
    });
    // R = V - diag(gamma) K S0 (saved)
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t x = 0; x < Dk; ++x) acc += kc[i * ldk + x] * S0[x * Dv + j];
      R[i * Dv + j] = vc[i * ldv + j] - gamma[i] * acc;
    });
    blk.sync();
    // saved: A^-1, and gd above the diagonal of PG
    blk.each(n * n, [&](int64_t e) {
      const int64_t i = e / n, j = e % n;
      ainv_s[i * C + j] = ainv[i * C + j];
      if (j > i) pg[i * C + j] = M[i * C + j];
    });
    // U' = A^-1 diag(beta) R (saved)
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t m = 0; m <= i; ++m) acc += ainv[i * C + m] * bt[m] * R[m * Dv + j];
      U[i * Dv + j] = acc;
    });
    blk.sync();
    // P = tril(Q K^T) . D, into M and on and below the diagonal of PG
    blk.each(n * n, [&](int64_t e) {
      const int64_t i = e / n, j = e % n;
      if (j > i) return;
      const T x = dot(qc + i * ldk, kc + j * ldk, Dk) * decay_ratio(G, i, j);
      M[i * C + j] = x;
      pg[i * C + j] = x;
    });
    blk.sync();
    // O = scale (diag(gamma) Q S0 + P U')
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t x = 0; x < Dk; ++x) acc += qc[i * ldk + x] * S0[x * Dv + j];
      acc *= gamma[i];
      for (int64_t m = 0; m <= i; ++m) acc += M[i * C + m] * U[m * Dv + j];
      oc[i * ldv + j] = p.scale * acc;
    });
    // S1 = gamma_last S0 + K^T diag(lambda) U' (the next chunk's S0, or ht)
    if (S1)
      blk.each(S, [&](int64_t e) {
        const int64_t x = e / Dv, j = e % Dv;
        T acc = gamma[n - 1] * S0[e];
        for (int64_t i = 0; i < n; ++i) acc += kc[i * ldk + x] * lambda[i] * U[i * Dv + j];
        S1[e] = acc;
      });
    blk.sync();
  }
}

// ---- the chunkwise backward of head bh (the CPU's deltanet_chunk_backward, phase by phase) -------
template <class T, class Block>
LINATTN_HD void chunk_backward_head(const Block& blk, const BackwardArgs<T>& p, int64_t bh, T* sh) {
  const Dims d = p.d;
  const int64_t C = d.C, NC = d.chunks(), Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state();
  const int64_t ldk = H * Dk, ldv = H * Dv;
  T *G = sh, *gamma = G + C, *lambda = gamma + C, *bt = lambda + C;
  T *gdg = bt + C, *dlambda = gdg + C, *dG = dlambda + C, *db = dG + C;  // gamma dLoss/dgamma, ...
  T* M = db + C;  // dP (then dP . D), then dL^T
  T* part = M + C * C;  // [Dk] partial sums of <dS, S0>
  T* dS = p.work + bh * backward_work(d);  // dLoss/dS after the current chunk
  T *y = dS + S, *du = y + C * Dv, *x = du + C * Dv, *dr = x + C * Dv, *z = dr + C * Dv;
  const T* base = p.saved + bh * NC * d.block();
  blk.each(S, [&](int64_t e) { dS[e] = p.dht ? p.dht[bh * S + e] : T(0); });
  blk.sync();
  for (int64_t c = NC - 1; c >= 0; --c) {
    const ChunkAt at = chunk_at(d, bh, c);
    const int64_t n = at.n;
    const T* S0 = base + c * d.block();
    const T *ainv = S0 + S, *pg = ainv + C * C, *U = pg + C * C, *R = U + C * Dv;
    const T *qc = p.q + at.qk, *kc = p.k + at.qk, *vc = p.v + at.vo, *doc = p.dO + at.vo;
    T *dqc = p.dq + at.qk, *dkc = p.dk + at.qk, *dvc = p.dv + at.vo;
    blk.one([&] {
      chunk_gates(G, gamma, lambda, bt, p.beta + at.s, p.a ? p.a + at.s : nullptr, H, n);
      for (int64_t i = 0; i < n; ++i) gdg[i] = dG[i] = db[i] = 0;
    });
    // y = K dS1
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t t = 0; t < Dk; ++t) acc += kc[i * ldk + t] * dS[t * Dv + j];
      y[i * Dv + j] = acc;
    });
    blk.sync();
    // O += scale P U'  =>  dU' = scale P^T dO;  S1 = gamma_last S0 + K^T diag(lambda) U'  =>
    // dU' += diag(lambda) K dS1, dK += diag(lambda) U' dS1^T, dlambda_i = (K dS1)_i . U'_i
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t m = i; m < n; ++m) acc += pg[m * C + i] * doc[m * ldv + j];
      du[i * Dv + j] = p.scale * acc + lambda[i] * y[i * Dv + j];
    });
    blk.each(n * Dk, [&](int64_t e) {
      const int64_t i = e / Dk, t = e % Dk;
      dkc[i * ldk + t] += lambda[i] * dot(U + i * Dv, dS + t * Dv, Dv);
    });
    blk.each(n, [&](int64_t i) { dlambda[i] = dot(y + i * Dv, U + i * Dv, Dv); });
    blk.sync();
    // U' = A^-1 diag(beta) R  =>  X = A^-T dU'
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t m = i; m < n; ++m) acc += ainv[m * C + i] * du[m * Dv + j];
      x[i * Dv + j] = acc;
    });
    blk.sync();
    // dR = diag(beta) X: dbeta_i += R_i . X_i; R = V - diag(gamma) K S0  =>  dV += dR,
    // gamma_i dgamma_i += dR_i . (R_i - V_i); dr = diag(gamma) dR for the products below
    blk.each(n, [&](int64_t i) {
      T acc_beta = 0, acc_gamma = 0;
      for (int64_t j = 0; j < Dv; ++j) {
        const T xi = x[i * Dv + j], ri = R[i * Dv + j];
        acc_beta += ri * xi;
        acc_gamma += xi * (ri - vc[i * ldv + j]);
      }
      db[i] += acc_beta;
      gdg[i] += bt[i] * acc_gamma;
    });
    blk.each(n * Dv, [&](int64_t e) {
      const int64_t i = e / Dv, j = e % Dv;
      const T dR = bt[i] * x[i * Dv + j];
      dvc[i * ldv + j] += dR;
      dr[i * Dv + j] = gamma[i] * dR;
    });
    // dP = scale tril(dO U'^T)
    blk.each(n * n, [&](int64_t e) {
      const int64_t i = e / n, j = e % n;
      M[i * C + j] = j <= i ? p.scale * dot(doc + i * ldv, U + j * Dv, Dv) : T(0);
    });
    blk.sync();
    // dK -= diag(gamma) dR S0^T;  D_ij = exp(G_i - G_j) in P: dG_i += dP_ij P_ij, dG_j -= dP_ij P_ij;
    // z = dO S0^T (for dQ and gamma's gradient)
    blk.each(n * Dk, [&](int64_t e) {
      const int64_t i = e / Dk, t = e % Dk;
      dkc[i * ldk + t] -= dot(dr + i * Dv, S0 + t * Dv, Dv);
      z[i * Dk + t] = dot(doc + i * ldv, S0 + t * Dv, Dv);
    });
    blk.each(n, [&](int64_t i) {
      T acc = 0;
      for (int64_t j = 0; j < i; ++j) acc += M[i * C + j] * pg[i * C + j];
      for (int64_t m = i + 1; m < n; ++m) acc -= M[m * C + i] * pg[m * C + i];
      dG[i] += acc;
    });
    blk.sync();
    // dP . D;  O = scale diag(gamma) Q S0 + ...  =>  gamma_i dgamma_i += scale gamma_i q_i . z_i
    blk.each(n * n, [&](int64_t e) {
      const int64_t i = e / n, j = e % n;
      if (j <= i) M[i * C + j] *= decay_ratio(G, i, j);
    });
    blk.each(n, [&](int64_t i) { gdg[i] += p.scale * gamma[i] * dot(qc + i * ldk, z + i * Dk, Dk); });
    blk.sync();
    // dQ += (dP . D) K + scale diag(gamma) z;  dK += (dP . D)^T Q
    blk.each(n * Dk, [&](int64_t e) {
      const int64_t i = e / Dk, t = e % Dk;
      T aq = 0, ak = 0;
      for (int64_t j = 0; j <= i; ++j) aq += M[i * C + j] * kc[j * ldk + t];
      for (int64_t m = i; m < n; ++m) ak += M[m * C + i] * qc[m * ldk + t];
      dqc[i * ldk + t] += aq + p.scale * gamma[i] * z[i * Dk + t];
      dkc[i * ldk + t] += ak;
    });
    blk.sync();
    // A = I + L, L_ij = beta_i gd_ij (j < i; gd above the diagonal of PG):  dA = -X U'^T, held
    // transposed: dLT_ji = -U'_j . X_i (i > j)
    blk.each(n * n, [&](int64_t e) {
      const int64_t j = e / n, i = e % n;
      M[j * C + i] = i > j ? -dot(U + j * Dv, x + i * Dv, Dv) : T(0);
    });
    blk.sync();
    // dbeta_i += sum_j dL_ij gd_ij;  dG_i += beta_i dL_ij gd_ij, dG_j -= the same;
    // dK += (F + F^T) K with F_ij = beta_i dL_ij D_ij (j < i)
    blk.each(n, [&](int64_t i) {
      T acc_beta = 0, acc_g = 0;
      for (int64_t j = 0; j < i; ++j) acc_beta += M[j * C + i] * pg[j * C + i];
      for (int64_t m = i + 1; m < n; ++m) acc_g += bt[m] * M[i * C + m] * pg[i * C + m];
      db[i] += acc_beta;
      dG[i] += bt[i] * acc_beta - acc_g;
    });
    blk.each(n * Dk, [&](int64_t e) {
      const int64_t i = e / Dk, t = e % Dk;
      T acc = 0;
      for (int64_t m = 0; m < i; ++m) acc += bt[i] * M[m * C + i] * decay_ratio(G, i, m) * kc[m * ldk + t];
      for (int64_t m = i + 1; m < n; ++m) acc += bt[m] * M[i * C + m] * decay_ratio(G, m, i) * kc[m * ldk + t];
      dkc[i * ldk + t] += acc;
    });
    blk.each(Dk, [&](int64_t t) { part[t] = dot(dS + t * Dv, S0 + t * Dv, Dv); });
    blk.sync();
    // dS0 = gamma_last dS1 + scale Q^T diag(gamma) dO - K^T dr;  gamma_last dgamma_last += <dS1, S0>.
    // Then the gates: dG_i += gamma_i dgamma_i - lambda_i dlambda_i, dG_last += sum lambda_i dlambda_i,
    // and da = the reverse cumulative sum of dG (G_i = sum_{t <= i} a_t).
    blk.each(S, [&](int64_t e) {
      const int64_t t = e / Dv, j = e % Dv;
      T acc = 0;
      for (int64_t i = 0; i < n; ++i)
        acc += p.scale * qc[i * ldk + t] * gamma[i] * doc[i * ldv + j] - kc[i * ldk + t] * dr[i * Dv + j];
      dS[e] = gamma[n - 1] * dS[e] + acc;
    });
    blk.one([&] {
      T* dbc = p.dbeta + at.s;
      for (int64_t i = 0; i < n; ++i) dbc[i * H] += db[i];
      if (!p.da) return;
      T inner = 0;
      for (int64_t t = 0; t < Dk; ++t) inner += part[t];
      gdg[n - 1] += gamma[n - 1] * inner;
      T lam = 0;
      for (int64_t i = 0; i < n; ++i) {
        dG[i] += gdg[i] - lambda[i] * dlambda[i];
        lam += lambda[i] * dlambda[i];
      }
      dG[n - 1] += lam;
      T acc = 0;
      T* dac = p.da + at.s;
      for (int64_t i = n - 1; i >= 0; --i) {
        acc += dG[i];
        dac[i * H] += acc;
      }
    });
    blk.sync();
  }
  if (p.dh0) blk.each(S, [&](int64_t e) { p.dh0[bh * S + e] += dS[e]; });
  blk.sync();
}

// ---- the recurrent forward of head bh: S_t = exp(a_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,
// o_t = scale S_t^T q_t. The state lives in `state` (global, [Dk, Dv] for this head); sh: u [Dv].
template <class T, class Block>
LINATTN_HD void recurrent_forward_head(const Block& blk, const ForwardArgs<T>& p, T* state, int64_t bh, T* sh) {
  const Dims d = p.d;
  const int64_t Dk = d.Dk, Dv = d.Dv, H = d.H, S = d.state(), ldk = H * Dk, ldv = H * Dv;
  T* u = sh;
  const ChunkAt at = chunk_at(d, bh, 0);  // where token 0 is
  blk.each(S, [&](int64_t e) { state[e] = p.h0 ? p.h0[bh * S + e] : T(0); });
  blk.sync();
  for (int64_t t = 0; t < d.T; ++t) {
    const T *qt = p.q + at.qk + t * ldk, *kt = p.k + at.qk + t * ldk, *vt = p.v + at.vo + t * ldv;
    const T beta = p.beta[at.s + t * H], decay = p.a ? ex(p.a[at.s + t * H]) : T(1);
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
