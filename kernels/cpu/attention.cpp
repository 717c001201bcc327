#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/sequences.h"

namespace linattn::cpu {

namespace {

constexpr int64_t BQ = kAttentionBlockQ;
constexpr int64_t BK = kAttentionBlockK;

// Eight float lanes (a GCC/Clang vector extension: one AVX register here, lane-wise code on other
// targets). The float exp and max loops are written on it because GCC vectorizes a comparison in
// a plain loop only when told that float comparisons cannot trap (-fno-trapping-math).
using f32x8 = float __attribute__((vector_size(32)));
using i32x8 = int32_t __attribute__((vector_size(32)));

inline f32x8 splat8(float x) { return f32x8{} + x; }
inline f32x8 load8(const float* p, int64_t n = 8) {  // n < 8: the rest of the lanes are 0
  f32x8 v{};
  std::memcpy(&v, p, size_t(n) * sizeof(float));
  return v;
}
inline void store8(float* p, f32x8 v, int64_t n = 8) { std::memcpy(p, &v, size_t(n) * sizeof(float)); }

// exp of eight floats: exp(x) = 2^n exp(r) with n = round(x / ln 2) and |r| <= ln(2) / 2, exp(r) by
// its degree-7 Taylor polynomial (truncation error < 6e-9 relative, below float rounding); ln 2 is
// split in two parts so that r is exact, and n is rounded by adding and subtracting 1.5 * 2^23.
// x < -87 gives 0 (exp(-87) ~ 1.6e-38 is at the bottom of the normal floats), x > 88 is clamped to
// 88 (x <= ~0 here), NaN stays NaN.
inline f32x8 exp8(f32x8 x) {
  const f32x8 lo = splat8(-87.0f), hi = splat8(88.0f), round = splat8(12582912.0f);  // 1.5 * 2^23
  f32x8 xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const f32x8 shifted = xc * 1.44269504088896341f + round;  // 1.5 * 2^23 + n: n in the low mantissa bits
  const f32x8 n = shifted - round;
  const i32x8 n_int = std::bit_cast<i32x8>(shifted) - std::bit_cast<int32_t>(12582912.0f);
  const f32x8 r = (xc - n * 0.693359375f) + n * 2.12194440e-4f;  // 0.693359375 - 2.12194440e-4 = ln 2
  f32x8 p = splat8(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const f32x8 two_n = std::bit_cast<f32x8>((n_int + 127) << 23);
  return x < lo ? splat8(0.0f) : p * two_n;
}

// The window actually applied: window <= 0 and window >= T both mean every earlier position, and
// map to the same value so that they run the same code and give the same bits.
int64_t effective_window(int64_t window, int64_t T_) {
  return window <= 0 || window > T_ ? std::max<int64_t>(T_, 1) : window;
}

// Tiny problems (decoding one token, the gradient checks) stay on one thread: starting a parallel
// region costs microseconds, and much more when the machine is oversubscribed.
inline bool worth_threads(int64_t flops) { return flops > (int64_t(1) << 18); }

// Row i of a query block against key columns [j0, j1) sees the columns [lo, hi) relative to j0
// (causal: j <= i; window: j >= i - W + 1), with 0 <= lo <= hi <= j1 - j0; lo == hi means none.
struct Visible {
  int64_t lo, hi;
};
inline Visible visible(int64_t i, int64_t j0, int64_t j1, int64_t W) {
  const int64_t lo = std::clamp(i - W + 1 - j0, int64_t(0), j1 - j0);
  const int64_t hi = std::clamp(i + 1 - j0, lo, j1 - j0);
  return {lo, hi};
}

// max(init, s[lo..hi)).
template <class T>
T row_max(const T* s, Visible vis, T init) {
  T m = init;
  for (int64_t c = vis.lo; c < vis.hi; ++c) m = std::max(m, s[c]);
  return m;
}
inline float row_max(const float* s, Visible vis, float init) {
  f32x8 m8 = splat8(init);
  int64_t c = vis.lo;
  for (; c + 8 <= vis.hi; c += 8) {
    const f32x8 x = load8(s + c);
    m8 = x > m8 ? x : m8;
  }
  float m = init;
  for (int k = 0; k < 8; ++k) m = std::max(m, m8[k]);
  for (; c < vis.hi; ++c) m = std::max(m, s[c]);
  return m;
}

// p[c] = exp(s[c] - shift) for c in [lo, hi), 0 elsewhere in [0, n); returns the sum of p.
// p may be s.
template <class T>
T exp_row(T* p, const T* s, int64_t n, Visible vis, T shift) {
  T sum = 0;
  std::fill(p, p + vis.lo, T(0));
  for (int64_t c = vis.lo; c < vis.hi; ++c) sum += (p[c] = std::exp(s[c] - shift));
  std::fill(p + vis.hi, p + n, T(0));
  return sum;
}
inline float exp_row(float* p, const float* s, int64_t n, Visible vis, float shift) {
  std::fill(p, p + vis.lo, 0.0f);
  f32x8 sum8 = splat8(0.0f);
  int64_t c = vis.lo;
  for (; c + 8 <= vis.hi; c += 8) {
    const f32x8 e = exp8(load8(s + c) - shift);
    store8(p + c, e);
    sum8 += e;
  }
  float sum = 0;
  if (const int64_t rest = vis.hi - c; rest > 0) {  // the last 1..7 columns
    const f32x8 e = exp8(load8(s + c, rest) - shift);
    store8(p + c, e, rest);
    for (int64_t k = 0; k < rest; ++k) sum += e[k];
  }
  for (int k = 0; k < 8; ++k) sum += sum8[k];
  std::fill(p + vis.hi, p + n, 0.0f);
  return sum;
}

}  // namespace

size_t attention_workspace_bytes_per_thread(size_t scalar_bytes) {
  // forward: s [BQ, BK], m [BQ], l [BQ]; backward: p [BQ, BK], ds [BQ, BK], D [BQ]
  return scalar_bytes * size_t(2 * BQ * BK + 2 * BQ);
}

template <class T>
void attention_forward(T* o, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t T_, int64_t H,
                       int64_t Hkv, int64_t dk, int64_t dv, int64_t window, T scale, Sequences seqs) {
  if (B * T_ == 0) return;
  const int64_t G = H / Hkv;  // query heads per kv head
  const int64_t ldq = H * dk, ldk = Hkv * dk, ldv = Hkv * dv, ldo = H * dv;  // row strides along time
  const int64_t n_tiles = tile_count(seqs, B, T_, BQ);
#pragma omp parallel if (worth_threads(B * H * T_ * effective_window(window, T_) * (dk + dv)))
  {
    std::vector<T> s(BQ * BK), m(BQ), l(BQ);  // s: [BQ, BK] scores, then probabilities
    // The last query blocks see the most keys (global attention): start them first.
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t tile = n_tiles - 1; tile >= 0; --tile)
      for (int64_t h = 0; h < H; ++h) {
        const Tile tl = tile_at(seqs, T_, BQ, tile);
        if (tl.idle) continue;
        // Query block tl.block of the sequence, in positions relative to its start.
        const int64_t len = tl.seq.len, W = effective_window(window, len);
        const int64_t i0 = tl.block * BQ, i1 = std::min(i0 + BQ, len), rows = i1 - i0;
        const T* qi = q + (tl.seq.start + i0) * ldq + h * dk;  // [rows, dk], stride ldq
        const T* kb = k + tl.seq.start * ldk + (h / G) * dk;   // [len, dk], stride ldk
        const T* vb = v + tl.seq.start * ldv + (h / G) * dv;   // [len, dv], stride ldv
        T* oi = o + (tl.seq.start + i0) * ldo + h * dv;        // [rows, dv], stride ldo: the running sum P V
        for (int64_t r = 0; r < rows; ++r) {
          m[r] = -std::numeric_limits<T>::infinity();
          l[r] = 0;
          std::fill(oi + r * ldo, oi + r * ldo + dv, T(0));
        }
        for (int64_t j0 = std::max<int64_t>(0, i0 - W + 1); j0 < i1; j0 += BK) {
          const int64_t j1 = std::min(j0 + BK, i1), cols = j1 - j0;
          // S = scale Q K^T for this block
          gemm<T>(false, true, rows, cols, dk, scale, qi, ldq, kb + j0 * ldk, ldk, T(0), s.data(), BK);
          for (int64_t r = 0; r < rows; ++r) {
            T* sr = s.data() + r * BK;
            const Visible vis = visible(i0 + r, j0, j1, W);
            if (vis.lo == vis.hi) {  // this row sees none of these keys: P row = 0, statistics unchanged
              std::fill(sr, sr + cols, T(0));
              continue;
            }
            const T new_max = row_max(sr, vis, m[r]);
            const T rescale = std::exp(m[r] - new_max);  // 0 on the row's first block (m = -inf)
            const T sum = exp_row(sr, sr, cols, vis, new_max);
            l[r] = l[r] * rescale + sum;
            m[r] = new_max;
            if (rescale != T(1))
              for (int64_t c = 0; c < dv; ++c) oi[r * ldo + c] *= rescale;
          }
          // O += P V
          gemm<T>(false, false, rows, dv, cols, T(1), s.data(), BK, vb + j0 * ldv, ldv, T(1), oi, ldo);
        }
        T* lse_i = lse ? lse + tl.seq.start * H + h * len + i0 : nullptr;  // the sequence's [H, len]
        for (int64_t r = 0; r < rows; ++r) {
          const T inv = T(1) / l[r];
          for (int64_t c = 0; c < dv; ++c) oi[r * ldo + c] *= inv;
          if (lse_i) lse_i[r] = m[r] + std::log(l[r]);
        }
      }
  }
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* do_, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_,
                        int64_t window, T scale, Sequences seqs) {
  if (B * T_ == 0) return;
  const int64_t G = H / Hkv;
  const int64_t ldq = H * dk_, ldk = Hkv * dk_, ldv = Hkv * dv_, ldo = H * dv_;
  const int64_t n_seqs = sequence_count(seqs, B);
  // One task per (sequence, kv head): it owns dk and dv of that kv head and dq of the G query heads
  // that read it, so every gradient is accumulated by exactly one thread, in a fixed order.
#pragma omp parallel if (worth_threads(B * H * T_ * effective_window(window, T_) * (dk_ + dv_)))
  {
    std::vector<T> p(BQ * BK), ds(BQ * BK), D(BQ);  // p: [BQ, BK], ds: [BQ, BK] (dP, then dS)
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t sq = 0; sq < n_seqs; ++sq)
      for (int64_t hk = 0; hk < Hkv; ++hk) {
        const Span seq = sequence(seqs, sq, T_);
        const int64_t len = seq.len, W = effective_window(window, len);
        const int64_t n_qblocks = (len + BQ - 1) / BQ;
        const T* kb = k + seq.start * ldk + hk * dk_;  // [len, dk], stride ldk
        const T* vb = v + seq.start * ldv + hk * dv_;  // [len, dv], stride ldv
        T* dkb = dk + seq.start * ldk + hk * dk_;
        T* dvb = dv + seq.start * ldv + hk * dv_;
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
          for (int64_t qb = 0; qb < n_qblocks; ++qb) {
            const int64_t i0 = qb * BQ, i1 = std::min(i0 + BQ, len), rows = i1 - i0;
            const T* qi = q + (seq.start + i0) * ldq + h * dk_;     // [rows, dk], stride ldq
            const T* oi = o + (seq.start + i0) * ldo + h * dv_;     // [rows, dv], stride ldo
            const T* doi = do_ + (seq.start + i0) * ldo + h * dv_;  // [rows, dv], stride ldo
            T* dqi = dq + (seq.start + i0) * ldq + h * dk_;
            const T* lse_i = lse + seq.start * H + h * len + i0;  // [rows] of the sequence's [H, len]
            // D_i = do_i . o_i = sum_j P_ij dP_ij
            for (int64_t r = 0; r < rows; ++r) {
              T d = 0;
              for (int64_t c = 0; c < dv_; ++c) d += doi[r * ldo + c] * oi[r * ldo + c];
              D[r] = d;
            }
            for (int64_t j0 = std::max<int64_t>(0, i0 - W + 1); j0 < i1; j0 += BK) {
              const int64_t j1 = std::min(j0 + BK, i1), cols = j1 - j0;
              // recompute P = exp(scale Q K^T - lse), 0 outside the causal window
              gemm<T>(false, true, rows, cols, dk_, scale, qi, ldq, kb + j0 * ldk, ldk, T(0), p.data(), BK);
              for (int64_t r = 0; r < rows; ++r)
                exp_row(p.data() + r * BK, p.data() + r * BK, cols, visible(i0 + r, j0, j1, W), lse_i[r]);
              // forward: O = P V  =>  dV += P^T dO, dP = dO V^T
              gemm<T>(true, false, cols, dv_, rows, T(1), p.data(), BK, doi, ldo, T(1), dvb + j0 * ldv, ldv);
              gemm<T>(false, true, rows, cols, dv_, T(1), doi, ldo, vb + j0 * ldv, ldv, T(0), ds.data(), BK);
              // forward: P_ij = exp(S_ij - lse_i), a softmax over j  =>  dS_ij = P_ij (dP_ij - D_i)
              for (int64_t r = 0; r < rows; ++r) {
                const T* pr = p.data() + r * BK;
                T* dsr = ds.data() + r * BK;
                const T Dr = D[r];
#pragma omp simd
                for (int64_t c = 0; c < cols; ++c) dsr[c] = pr[c] * (dsr[c] - Dr);
              }
              // forward: S = scale Q K^T  =>  dQ += scale dS K, dK += scale dS^T Q
              gemm<T>(false, false, rows, dk_, cols, scale, ds.data(), BK, kb + j0 * ldk, ldk, T(1), dqi, ldq);
              gemm<T>(true, false, cols, dk_, rows, scale, ds.data(), BK, qi, ldq, T(1), dkb + j0 * ldk, ldk);
            }
          }
      }
  }
}

template <class T>
void kv_cache_write(T* k_cache, T* v_cache, const T* k, const T* v, int64_t B, int64_t Tq, int64_t Hkv, int64_t dk,
                    int64_t dv, int64_t C, int64_t pos0) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = std::max<int64_t>(0, Tq - C); t < Tq; ++t) {  // only the last C positions fit
      const int64_t slot = (pos0 + t) % C;
      std::copy_n(k + (b * Tq + t) * Hkv * dk, Hkv * dk, k_cache + (b * C + slot) * Hkv * dk);
      std::copy_n(v + (b * Tq + t) * Hkv * dv, Hkv * dv, v_cache + (b * C + slot) * Hkv * dv);
    }
}

template <class T>
void attention_decode(T* o, const T* q, const T* k_cache, const T* v_cache, int64_t B, int64_t Tq, int64_t H,
                      int64_t Hkv, int64_t dk, int64_t dv, int64_t C, int64_t pos0, int64_t window, T scale) {
  if (Tq <= 0) return;
  const bool global = window <= 0;
  const int64_t first_needed = global ? 0 : std::max<int64_t>(0, pos0 - window + 1);
  const int64_t last = pos0 + Tq - 1;
  LINATTN_CHECK(last - first_needed + 1 <= C, "attention_decode: positions ", first_needed, "..", last,
                " must all be in the key/value cache, but it holds only C=", C,
                " positions; allocate C >= window + (new positions per call) - 1 for a windowed layer, or C >= the "
                "longest sequence for a global one");
  const int64_t G = H / Hkv;
#pragma omp parallel if (worth_threads(B * Tq * H * std::min(C, last + 1) * (dk + dv)))
  {
    std::vector<T> s(std::min(C, last + 1));  // scores of one query row
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t i = pos0 + t;
          const int64_t lo = global ? 0 : std::max<int64_t>(0, i - window + 1);
          const T* qi = q + ((b * Tq + t) * H + h) * dk;
          T* oi = o + ((b * Tq + t) * H + h) * dv;
          const int64_t hk = h / G;
          T row_max = -std::numeric_limits<T>::infinity();
          for (int64_t j = lo; j <= i; ++j) {
            const T* kj = k_cache + ((b * C + j % C) * Hkv + hk) * dk;
            T dot = 0;
            for (int64_t c = 0; c < dk; ++c) dot += qi[c] * kj[c];
            s[j - lo] = scale * dot;
            row_max = std::max(row_max, s[j - lo]);
          }
          T sum = 0;
          std::fill(oi, oi + dv, T(0));
          for (int64_t j = lo; j <= i; ++j) {
            const T pj = std::exp(s[j - lo] - row_max);
            sum += pj;
            const T* vj = v_cache + ((b * C + j % C) * Hkv + hk) * dv;
            for (int64_t c = 0; c < dv; ++c) oi[c] += pj * vj[c];
          }
          for (int64_t c = 0; c < dv; ++c) oi[c] /= sum;
        }
  }
}

#define LINATTN_INSTANTIATE(T)                                                                                    \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t,    \
                                     int64_t, int64_t, int64_t, T, Sequences);                                    \
  template void attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,     \
                                      int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, T, Sequences); \
  template void kv_cache_write<T>(T*, T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t,        \
                                  int64_t, int64_t);                                                              \
  template void attention_decode<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, int64_t, int64_t, \
                                    int64_t, int64_t, int64_t, int64_t, T);
LINATTN_INSTANTIATE(float)
LINATTN_INSTANTIATE(double)
#undef LINATTN_INSTANTIATE

}  // namespace linattn::cpu
