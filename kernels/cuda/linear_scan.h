// The chunkwise scan that the CUDA linear attention and GLA kernels are made of (derivations.md,
// "Linear attention" and "GLA"), written once for the device and the host: every function here is
// __host__ __device__ and templated on how a thread block runs (`Exec`) and on how a launch runs
// (`Run`), so kernels/cuda/linear_scan.cuh runs it as CUDA kernels and the host test
// tests/cuda/linear_scan_host_test.cpp runs the very same code block by block, thread by thread, on
// the CPU (in float64 too) against the CPU kernels. This header includes no CUDA header.
//
// One scan walks the chunks of every (batch, head) in order (or in reverse), carries a float32 state
// in shared memory and, per chunk of C tokens with token rows A, B, C (L <= C valid rows), writes
//   contracted gate ("scan_c"):  X_i = a (A_i ⊙ e^G_i) S + b Σ_{j<=i} (Σ_d A_id B_jd e^(G_id − G_jd)) C_j
//                                S  <- diag(e^G_L) S + c Σ_j (B_j ⊙ e^(G_L − G_j)) C_jᵀ        S: [K, N]
//   output gate ("scan_o"):      X_in = a e^G_in (A_i · S_n) + b Σ_{j<=i} (A_i · B_j) e^(G_in − G_jn) C_jn
//                                S_n <- e^G_Ln S_n + c Σ_j e^(G_Ln − G_jn) B_j C_jn          S: [N, K]
// where G is the within-chunk inclusive cumulative sum of the log-gate (zero when there is none), so
// every exponential taken is of a number <= 0 (pairwise differences, never e^(−G)): strong decays
// underflow harmlessly and nothing overflows. With the gate's dimension contracted (scan_c) this is
// the forward (A = q, B = k, C = v) and the dv pass (reversed: A = k, B = q, C = dO); with the gate on
// the output (scan_o) it is the dq pass (A = dO, B = v, C = k) and the dk pass (reversed: A = v,
// B = dO, C = q). Reversed, the rows run from the chunk's last token to its first and token t is
// gated by g[t + 1] (the step from state t to state t + 1), so the carried state is dS.
//
// A block owns a tile of NT state columns (scan_c: N columns, scan_o: K ones) of one (batch, head)
// and runs chunk after chunk; inside a chunk every product is a loop over shared memory. No atomics:
// each output element is written by one thread in a fixed order.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/host_device.h"
#include "kernels/op_types.h"

namespace linattn::cuda::scan {

constexpr int kTile = 32;  // state columns per block
constexpr int kBlockThreads = 256;

template <class T>
LINATTN_HD inline T phi(FeatureMap f, T x) {
  switch (f) {
    case FeatureMap::elu1: return x > 0 ? x + 1 : exp_(x);
    case FeatureMap::relu: return x > 0 ? x : T(0);
    default: return x;
  }
}
template <class T>
LINATTN_HD inline T dphi(FeatureMap f, T x) {
  switch (f) {
    case FeatureMap::elu1: return x > 0 ? T(1) : exp_(x);
    case FeatureMap::relu: return x > 0 ? T(1) : T(0);
    default: return T(1);
  }
}

// A [B, T, H, ld] tensor of token rows (ld = 0: the same row for every token), read from column 0 of
// each row (point p at another column to start there).
template <class T>
struct Rows {
  T* p = nullptr;
  int64_t ld = 0;
  LINATTN_HD T* at(int64_t b, int64_t t, int64_t h, int64_t T_, int64_t H) const { return p + ((b * T_ + t) * H + h) * ld; }
};

// One scan (see the top). States [B, H, K, ld] (scan_c: K rows of N; scan_o: K rows of N read
// transposed). Absent (null): S0 = zeros, g = no gate, X or Sf = not written.
template <class T>
struct Scan {
  int64_t B = 0, len = 0, H = 0;
  int64_t K = 0;  // the gated dimension (scan_c: contracted; scan_o: output columns)
  int64_t N = 0;  // the other one (scan_c: output columns; scan_o: contracted)
  Rows<const T> A, B_, C, g;
  FeatureMap phiA = FeatureMap::identity, phiB = FeatureMap::identity, phiC = FeatureMap::identity;
  const T* S0 = nullptr;
  int64_t ldS0 = 0;
  Rows<T> X;
  bool accumulate = false;  // X += rather than X =
  // scan_o only: X_in *= phi'(src_in) (the chain rule through the feature map), when dphi is not identity
  Rows<const T> dphi_src;
  FeatureMap dphi = FeatureMap::identity;
  T* Sf = nullptr;  // the state after the last chunk (reversed: times e^g[0], i.e. dS of the initial state), +=
  int64_t ldSf = 0;
  T a = 1, b = 1, c = 1;
  int64_t chunk = 64;
  bool reverse = false;

  LINATTN_HD int64_t chunks() const { return (len + chunk - 1) / chunk; }
  // The token at row r of chunk ci, which holds L tokens.
  LINATTN_HD int64_t token(int64_t ci, int64_t r, int64_t L) const { return reverse ? ci * chunk + L - 1 - r : ci * chunk + r; }
  // The log-gate of token t in the walk's direction.
  LINATTN_HD T gate(int64_t bb, int64_t t, int64_t h, int64_t d) const {
    if (reverse) ++t;
    return t < len ? g.at(bb, t, h, len, H)[d] : T(0);
  }
};

// Shared memory of one block, in elements of T.
inline int64_t scan_c_smem(int64_t C, int64_t K, bool gated) { return C * K * (gated ? 3 : 2) + C * kTile + K * kTile + C * C; }
inline int64_t scan_o_smem(int64_t C, int64_t N, bool gated) { return 2 * C * N + C * kTile * (gated ? 2 : 1) + N * kTile + C * C; }

// The block of (batch, head) bh and state-column tile `tile` of a scan_c; sm: scan_c_smem elements.
template <class T, class Exec>
LINATTN_HD void scan_c_block(Exec& ex, const Scan<T>& p, int64_t bh, int64_t tile, T* sm) {
  const int64_t C = p.chunk, K = p.K, bb = bh / p.H, h = bh % p.H, n0 = tile * kTile;
  const int64_t nt = p.N - n0 < kTile ? p.N - n0 : kTile;
  const bool gated = p.g.p != nullptr;
  T* sA = sm;                          // [C, K]
  T* sB = sA + C * K;                  // [C, K]
  T* sG = sB + C * K;                  // [C, K] cumulative log-gate (gated only)
  T* sC = sG + (gated ? C * K : 0);    // [C, kTile]
  T* sS = sC + C * kTile;              // [K, kTile] the state
  T* sP = sS + K * kTile;              // [C, C] the masked scores
  ex.phase([&](int tid) {
    for (int64_t e = tid; e < K * kTile; e += ex.threads) {
      const int64_t d = e / kTile, n = e % kTile;
      sS[e] = p.S0 && n < nt ? p.S0[(bh * K + d) * p.ldS0 + n0 + n] : T(0);
    }
  });
  for (int64_t s = 0; s < p.chunks(); ++s) {
    const int64_t ci = p.reverse ? p.chunks() - 1 - s : s;
    const int64_t L = p.len - ci * C < C ? p.len - ci * C : C;
    ex.phase([&](int tid) {  // load the chunk's rows (zeros past L)
      for (int64_t e = tid; e < C * K; e += ex.threads) {
        const int64_t r = e / K, d = e % K;
        const bool in = r < L;
        const int64_t t = in ? p.token(ci, r, L) : 0;
        sA[e] = in ? phi(p.phiA, p.A.at(bb, t, h, p.len, p.H)[d]) : T(0);
        sB[e] = in ? phi(p.phiB, p.B_.at(bb, t, h, p.len, p.H)[d]) : T(0);
        if (gated) sG[e] = in ? p.gate(bb, t, h, d) : T(0);
      }
      for (int64_t e = tid; e < C * kTile; e += ex.threads) {
        const int64_t r = e / kTile, n = e % kTile;
        sC[e] = r < L && n < nt ? phi(p.phiC, p.C.at(bb, p.token(ci, r, L), h, p.len, p.H)[n0 + n]) : T(0);
      }
    });
    if (gated)
      ex.phase([&](int tid) {  // G: inclusive cumulative sum down the chunk, per gated column
        for (int64_t d = tid; d < K; d += ex.threads) {
          T acc = 0;
          for (int64_t r = 0; r < L; ++r) sG[r * K + d] = acc += sG[r * K + d];
        }
      });
    ex.phase([&](int tid) {  // P_ij = b Σ_d A_id B_jd e^(G_id − G_jd), j <= i
      for (int64_t e = tid; e < C * C; e += ex.threads) {
        const int64_t i = e / C, j = e % C;
        T acc = 0;
        if (j <= i && i < L)
          for (int64_t d = 0; d < K; ++d)
            acc += sA[i * K + d] * sB[j * K + d] * (gated ? exp_(sG[i * K + d] - sG[j * K + d]) : T(1));
        sP[e] = p.b * acc;
      }
    });
    if (p.X.p)
      ex.phase([&](int tid) {  // X_i = a (A_i ⊙ e^G_i) S + P_i C
        for (int64_t e = tid; e < C * kTile; e += ex.threads) {
          const int64_t i = e / kTile, n = e % kTile;
          if (i >= L || n >= nt) continue;
          T inter = 0, intra = 0;
          for (int64_t d = 0; d < K; ++d)
            inter += sA[i * K + d] * (gated ? exp_(sG[i * K + d]) : T(1)) * sS[d * kTile + n];
          for (int64_t j = 0; j <= i; ++j) intra += sP[i * C + j] * sC[j * kTile + n];
          T* x = p.X.at(bb, p.token(ci, i, L), h, p.len, p.H) + n0 + n;
          const T v = p.a * inter + intra;
          *x = p.accumulate ? *x + v : v;
        }
      });
    ex.phase([&](int tid) {  // S <- diag(e^G_L) S + c (B ⊙ e^(G_L − G))ᵀ C
      for (int64_t e = tid; e < K * kTile; e += ex.threads) {
        const int64_t d = e / kTile, n = e % kTile;
        const T gl = gated ? sG[(L - 1) * K + d] : T(0);
        T acc = 0;
        for (int64_t j = 0; j < L; ++j)
          acc += sB[j * K + d] * (gated ? exp_(gl - sG[j * K + d]) : T(1)) * sC[j * kTile + n];
        sS[e] = (gated ? exp_(gl) : T(1)) * sS[e] + p.c * acc;
      }
    });
  }
  if (p.Sf)
    ex.phase([&](int tid) {
      for (int64_t e = tid; e < K * kTile; e += ex.threads) {
        const int64_t d = e / kTile, n = e % kTile;
        if (n >= nt) continue;
        const T f = p.reverse && gated && p.len > 0 ? exp_(p.g.at(bb, 0, h, p.len, p.H)[d]) : T(1);
        p.Sf[(bh * K + d) * p.ldSf + n0 + n] += f * sS[e];
      }
    });
}

// The block of (batch, head) bh and gated-column tile `tile` of a scan_o; sm: scan_o_smem elements.
template <class T, class Exec>
LINATTN_HD void scan_o_block(Exec& ex, const Scan<T>& p, int64_t bh, int64_t tile, T* sm) {
  const int64_t C = p.chunk, N = p.N, bb = bh / p.H, h = bh % p.H, n0 = tile * kTile;
  const int64_t nt = p.K - n0 < kTile ? p.K - n0 : kTile;
  const bool gated = p.g.p != nullptr;
  T* sA = sm;                              // [C, N]
  T* sB = sA + C * N;                      // [C, N]
  T* sC = sB + C * N;                      // [C, kTile]
  T* sG = sC + C * kTile;                  // [C, kTile] cumulative log-gate (gated only)
  T* sS = sG + (gated ? C * kTile : 0);    // [N, kTile] the state, transposed
  T* sP = sS + N * kTile;                  // [C, C] the masked scores
  ex.phase([&](int tid) {
    for (int64_t e = tid; e < N * kTile; e += ex.threads) {
      const int64_t m = e / kTile, n = e % kTile;
      sS[e] = p.S0 && n < nt ? p.S0[(bh * p.K + n0 + n) * p.ldS0 + m] : T(0);
    }
  });
  for (int64_t s = 0; s < p.chunks(); ++s) {
    const int64_t ci = p.reverse ? p.chunks() - 1 - s : s;
    const int64_t L = p.len - ci * C < C ? p.len - ci * C : C;
    ex.phase([&](int tid) {  // load the chunk's rows (zeros past L)
      for (int64_t e = tid; e < C * N; e += ex.threads) {
        const int64_t r = e / N, m = e % N;
        const bool in = r < L;
        const int64_t t = in ? p.token(ci, r, L) : 0;
        sA[e] = in ? phi(p.phiA, p.A.at(bb, t, h, p.len, p.H)[m]) : T(0);
        sB[e] = in ? phi(p.phiB, p.B_.at(bb, t, h, p.len, p.H)[m]) : T(0);
      }
      for (int64_t e = tid; e < C * kTile; e += ex.threads) {
        const int64_t r = e / kTile, n = e % kTile;
        const bool in = r < L && n < nt;
        const int64_t t = in ? p.token(ci, r, L) : 0;
        sC[e] = in ? phi(p.phiC, p.C.at(bb, t, h, p.len, p.H)[n0 + n]) : T(0);
        if (gated) sG[e] = in ? p.gate(bb, t, h, n0 + n) : T(0);
      }
    });
    if (gated)
      ex.phase([&](int tid) {
        for (int64_t n = tid; n < kTile; n += ex.threads) {
          T acc = 0;
          for (int64_t r = 0; r < L; ++r) sG[r * kTile + n] = acc += sG[r * kTile + n];
        }
      });
    ex.phase([&](int tid) {  // P_ij = A_i · B_j, j <= i (no gate: it sits on the output columns)
      for (int64_t e = tid; e < C * C; e += ex.threads) {
        const int64_t i = e / C, j = e % C;
        T acc = 0;
        if (j <= i && i < L)
          for (int64_t m = 0; m < N; ++m) acc += sA[i * N + m] * sB[j * N + m];
        sP[e] = acc;
      }
    });
    if (p.X.p)
      ex.phase([&](int tid) {  // X_in = a e^G_in (A_i · S_n) + b Σ_j P_ij e^(G_in − G_jn) C_jn
        for (int64_t e = tid; e < C * kTile; e += ex.threads) {
          const int64_t i = e / kTile, n = e % kTile;
          if (i >= L || n >= nt) continue;
          const T gi = gated ? sG[i * kTile + n] : T(0);
          T inter = 0, intra = 0;
          for (int64_t m = 0; m < N; ++m) inter += sA[i * N + m] * sS[m * kTile + n];
          for (int64_t j = 0; j <= i; ++j)
            intra += sP[i * C + j] * (gated ? exp_(gi - sG[j * kTile + n]) : T(1)) * sC[j * kTile + n];
          const int64_t t = p.token(ci, i, L);
          T v = p.a * (gated ? exp_(gi) : T(1)) * inter + p.b * intra;
          if (p.dphi != FeatureMap::identity) v *= dphi(p.dphi, p.dphi_src.at(bb, t, h, p.len, p.H)[n0 + n]);
          T* x = p.X.at(bb, t, h, p.len, p.H) + n0 + n;
          *x = p.accumulate ? *x + v : v;
        }
      });
    ex.phase([&](int tid) {  // S_n <- e^G_Ln S_n + c Σ_j e^(G_Ln − G_jn) B_j C_jn
      for (int64_t e = tid; e < N * kTile; e += ex.threads) {
        const int64_t m = e / kTile, n = e % kTile;
        const T gl = gated ? sG[(L - 1) * kTile + n] : T(0);
        T acc = 0;
        for (int64_t j = 0; j < L; ++j)
          acc += (gated ? exp_(gl - sG[j * kTile + n]) : T(1)) * sB[j * N + m] * sC[j * kTile + n];
        sS[e] = (gated ? exp_(gl) : T(1)) * sS[e] + p.c * acc;
      }
    });
  }
  if (p.Sf)
    ex.phase([&](int tid) {
      for (int64_t e = tid; e < N * kTile; e += ex.threads) {
        const int64_t m = e / kTile, n = e % kTile;
        if (n >= nt) continue;
        const T f = p.reverse && gated && p.len > 0 ? exp_(p.g.at(bb, 0, h, p.len, p.H)[n0 + n]) : T(1);
        p.Sf[(bh * p.K + n0 + n) * p.ldSf + m] += f * sS[e];
      }
    });
}

// ---- pointwise steps (one call per index i in [0, n)) ----

// dst [rows, W + 1] = [src | extra] (src null: zeros; extra null: `fill`).
template <class T>
struct AppendColumn {
  T* dst;
  const T *src, *extra;
  int64_t W;
  T fill;
  LINATTN_HD void operator()(int64_t i) const {
    const int64_t row = i / (W + 1), j = i % (W + 1);
    dst[i] = j < W ? (src ? src[row * W + j] : T(0)) : (extra ? extra[row] : fill);
  }
};

// The normalized output: o [rows, W] /= den [rows] + eps.
template <class T>
struct DivideRows {
  T* o;
  const T* den;
  int64_t W;
  LINATTN_HD void operator()(int64_t i) const { o[i] /= den[i / W] + T(kLinearAttnEps); }
};

// The normalized form's gradient of its numerator and denominator columns, dO' [rows, W + 1]:
// forward o = num / (den + eps)  =>  dnum = dO / (den + eps), dden = −(dO · o) / (den + eps).
template <class T>
struct NormalizedGrad {
  T* dO2;
  const T *dO, *o, *den;
  int64_t W;
  LINATTN_HD void operator()(int64_t i) const {
    const int64_t row = i / (W + 1), j = i % (W + 1);
    const T d = den[row] + T(kLinearAttnEps);
    if (j < W) {
      dO2[i] = dO[row * W + j] / d;
    } else {
      T dot = 0;
      for (int64_t m = 0; m < W; ++m) dot += dO[row * W + m] * o[row * W + m];
      dO2[i] = -dot / d;
    }
  }
};

// GLA's gate gradient, one (batch, head, key channel) per index, and the hand-over of dq, dk:
// dg_t = Σ_{u >= t} (q_u dq_u − k_u dk_u) + rowsum(dht ⊙ S_T) (derivations.md, "GLA"); dq += dq1, dk += dk1.
template <class T>
struct GateGrad {
  T *dg, *dq, *dk;
  const T *q, *k, *dq1, *dk1;
  const T *dht, *ST;  // [B, H, Dk, Dv] or null
  int64_t T_, H, Dk, Dv;
  LINATTN_HD void operator()(int64_t i) const {
    const int64_t bh = i / Dk, d = i % Dk, bb = bh / H, h = bh % H;
    T acc = 0;
    if (dht)
      for (int64_t m = 0; m < Dv; ++m) acc += dht[(bh * Dk + d) * Dv + m] * ST[(bh * Dk + d) * Dv + m];
    for (int64_t t = T_ - 1; t >= 0; --t) {
      const int64_t x = ((bb * T_ + t) * H + h) * Dk + d;
      acc += q[x] * dq1[x] - k[x] * dk1[x];
      dg[x] += acc;
      dq[x] += dq1[x];
      dk[x] += dk1[x];
    }
  }
};

// ---- the mixers: which scans, on what ----

// One call of a mixer on raw pointers (shapes in kernels/backend.h's MixerArgs); null = absent.
template <class T>
struct Mixer {
  int64_t B = 0, len = 0, H = 0, Dk = 0, Dv = 0;
  T scale = 1;
  int64_t chunk = 64;  // 1: the recurrent form (token by token)
  FeatureMap phi = FeatureMap::identity;
  bool normalize = false;
  T *o = nullptr, *ht = nullptr, *zt = nullptr;
  const T *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *h0 = nullptr, *z0 = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr, *dg = nullptr, *dh0 = nullptr, *dz0 = nullptr;
  const T *dO = nullptr, *dht = nullptr, *dzt = nullptr;
};

template <class T>
Scan<T> base_scan(const Mixer<T>& m) {
  Scan<T> s;
  s.B = m.B, s.len = m.len, s.H = m.H, s.chunk = m.chunk;
  return s;
}
template <class T>
Rows<const T> rows(const T* p, int64_t ld) {
  return {p, ld};
}

// Run: scan_c(Scan), scan_o(Scan), each(n, f) (f(i) for i in [0, n)), zero(ptr, n), scratch(n)
// (memory that lives until the Run is gone), all in launch order.

// Linear attention forward: o = scale (phi(q) S + ...), ht; normalized: o = num / (den + eps), zt.
template <class T, class Run>
void linear_attention_forward(Run& run, const Mixer<T>& m) {
  const int64_t rowsN = m.B * m.len * m.H;
  Scan<T> s = base_scan(m);
  s.K = m.Dk, s.N = m.Dv;
  s.A = rows(m.q, m.Dk), s.B_ = rows(m.k, m.Dk), s.C = rows(m.v, m.Dv), s.phiA = s.phiB = m.phi;
  s.S0 = m.h0, s.ldS0 = m.Dv;
  s.X = {m.o, m.Dv};
  s.a = s.b = m.normalize ? T(1) : m.scale;
  if (m.ht) run.zero(m.ht, m.B * m.H * m.Dk * m.Dv);
  s.Sf = m.ht, s.ldSf = m.Dv;
  run.scan_c(s);
  if (!m.normalize) return;
  // den = the same scan over a column of ones, from z0
  T* one = run.scratch(1);
  run.each(1, AppendColumn<T>{one, nullptr, nullptr, 0, T(1)});
  T* den = run.scratch(rowsN);
  s.N = 1, s.C = rows<T>(one, 0), s.S0 = m.z0, s.ldS0 = 1, s.X = {den, 1};
  if (m.zt) run.zero(m.zt, m.B * m.H * m.Dk);
  s.Sf = m.zt, s.ldSf = 1;
  run.scan_c(s);
  run.each(rowsN * m.Dv, DivideRows<T>{m.o, den, m.Dv});
}

// Linear attention backward (+= into dq, dk, dv, dh0, dz0). Unnormalized, per derivations.md:
// dq = scale (dO S0ᵀ + (M ⊙ dO Vᵀ) K) forward, dk = V dSᵀ + scale (M ⊙ dO Vᵀ)ᵀ Q and dv = K dS + scale
// (M ⊙ Q Kᵀ)ᵀ dO reversed, dh0 = the dS left at the start; then times phi'. Normalized: the same with
// scale 1 on the value columns [v | 1], state [h0 | z0] and output gradient [dnum | dden].
template <class T, class Run>
void linear_attention_backward(Run& run, const Mixer<T>& m) {
  const int64_t rowsN = m.B * m.len * m.H, states = m.B * m.H * m.Dk;
  const T* V = m.v;
  const T* dO = m.dO;
  const T* h0 = m.h0;
  const T* dht = m.dht;
  int64_t W = m.Dv;  // the value columns the scans see
  T sc = m.scale;
  if (m.normalize) {
    W = m.Dv + 1, sc = 1;
    // den again (the forward's scan over ones), then the augmented tensors
    T* one = run.scratch(1);
    run.each(1, AppendColumn<T>{one, nullptr, nullptr, 0, T(1)});
    T* den = run.scratch(rowsN);
    Scan<T> s = base_scan(m);
    s.K = m.Dk, s.N = 1;
    s.A = rows(m.q, m.Dk), s.B_ = rows(m.k, m.Dk), s.C = rows<T>(one, 0), s.phiA = s.phiB = m.phi;
    s.S0 = m.z0, s.ldS0 = 1, s.X = {den, 1};
    run.scan_c(s);
    T* v2 = run.scratch(rowsN * W);
    T* dO2 = run.scratch(rowsN * W);
    T* h02 = run.scratch(states * W);
    T* dht2 = run.scratch(states * W);
    run.each(rowsN * W, AppendColumn<T>{v2, m.v, nullptr, m.Dv, T(1)});
    run.each(rowsN * W, NormalizedGrad<T>{dO2, m.dO, m.o, den, m.Dv});
    run.each(states * W, AppendColumn<T>{h02, m.h0, m.z0, m.Dv, T(0)});
    run.each(states * W, AppendColumn<T>{dht2, m.dht, m.dzt, m.Dv, T(0)});
    V = v2, dO = dO2, h0 = h02, dht = dht2;
  }
  Scan<T> s = base_scan(m);
  s.K = m.Dk, s.N = W, s.accumulate = true;
  // dq: forward walk, state Sᵀ
  s.A = rows(dO, W), s.B_ = rows(V, W), s.C = rows(m.k, m.Dk), s.phiC = m.phi;
  s.S0 = h0, s.ldS0 = W, s.X = {m.dq, m.Dk}, s.dphi_src = rows(m.q, m.Dk), s.dphi = m.phi;
  s.a = sc, s.b = sc, s.c = 1;
  run.scan_o(s);
  // dk: reversed walk, state dSᵀ
  s.reverse = true;
  s.A = rows(V, W), s.B_ = rows(dO, W), s.C = rows(m.q, m.Dk);
  s.S0 = dht, s.X = {m.dk, m.Dk}, s.dphi_src = rows(m.k, m.Dk);
  s.a = 1, s.b = sc, s.c = sc;
  run.scan_o(s);
  // dv and dh0: reversed walk, state dS (value columns only); dz0: the ones column's state
  Scan<T> r = base_scan(m);
  r.reverse = true, r.accumulate = true;
  r.K = m.Dk, r.N = m.Dv;
  r.A = rows(m.k, m.Dk), r.B_ = rows(m.q, m.Dk), r.phiA = r.phiB = m.phi;
  r.C = rows(dO, W), r.S0 = dht, r.ldS0 = W, r.X = {m.dv, m.Dv};
  r.Sf = m.dh0, r.ldSf = m.Dv;
  r.a = 1, r.b = sc, r.c = sc;
  run.scan_c(r);
  if (m.normalize && m.dz0) {
    r.N = 1, r.C = rows(dO + m.Dv, W), r.S0 = dht + m.Dv, r.X = {};
    r.Sf = m.dz0, r.ldSf = 1;
    run.scan_c(r);
  }
}

// GLA forward: o = scale ((Q ⊙ e^G) S0 + A V) per chunk, ht.
template <class T, class Run>
void gla_forward(Run& run, const Mixer<T>& m) {
  Scan<T> s = base_scan(m);
  s.K = m.Dk, s.N = m.Dv;
  s.A = rows(m.q, m.Dk), s.B_ = rows(m.k, m.Dk), s.C = rows(m.v, m.Dv), s.g = rows(m.g, m.Dk);
  s.S0 = m.h0, s.ldS0 = m.Dv, s.X = {m.o, m.Dv};
  s.a = s.b = m.scale;
  if (m.ht) run.zero(m.ht, m.B * m.H * m.Dk * m.Dv);
  s.Sf = m.ht, s.ldSf = m.Dv;
  run.scan_c(s);
}

// GLA backward (+= into dq, dk, dv, dg, dh0): dq forward and dk, dv, dh0 reversed as for linear
// attention with the gates (scan_o puts them on dq's and dk's columns), then dg from dq and dk.
template <class T, class Run>
void gla_backward(Run& run, const Mixer<T>& m) {
  const int64_t n = m.B * m.len * m.H * m.Dk, states = m.B * m.H * m.Dk * m.Dv;
  T* dq1 = run.scratch(n);  // this call's own dq and dk, which the gate gradient needs alone
  T* dk1 = run.scratch(n);
  T* ST = m.dht ? run.scratch(states) : nullptr;  // the final state, for rowsum(dht ⊙ S_T)
  if (ST) run.zero(ST, states);
  Scan<T> s = base_scan(m);
  s.K = m.Dk, s.N = m.Dv, s.g = rows(m.g, m.Dk);
  s.A = rows(m.dO, m.Dv), s.B_ = rows(m.v, m.Dv), s.C = rows(m.k, m.Dk);
  s.S0 = m.h0, s.ldS0 = m.Dv, s.X = {dq1, m.Dk}, s.Sf = ST, s.ldSf = m.Dv;
  s.a = m.scale, s.b = m.scale, s.c = 1;
  run.scan_o(s);
  s.reverse = true;
  s.A = rows(m.v, m.Dv), s.B_ = rows(m.dO, m.Dv), s.C = rows(m.q, m.Dk);
  s.S0 = m.dht, s.X = {dk1, m.Dk}, s.Sf = nullptr;
  s.a = 1, s.b = m.scale, s.c = m.scale;
  run.scan_o(s);
  Scan<T> r = base_scan(m);
  r.reverse = true, r.accumulate = true;
  r.K = m.Dk, r.N = m.Dv, r.g = rows(m.g, m.Dk);
  r.A = rows(m.k, m.Dk), r.B_ = rows(m.q, m.Dk), r.C = rows(m.dO, m.Dv);
  r.S0 = m.dht, r.ldS0 = m.Dv, r.X = {m.dv, m.Dv}, r.Sf = m.dh0, r.ldSf = m.Dv;
  r.a = 1, r.b = m.scale, r.c = m.scale;
  run.scan_c(r);
  run.each(m.B * m.H * m.Dk, GateGrad<T>{m.dg, m.dq, m.dk, m.q, m.k, dq1, dk1, m.dht, ST, m.len, m.H, m.Dk, m.Dv});
}

}  // namespace linattn::cuda::scan
