#include "kernels/cuda/attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/sequences.h"

namespace linattn::cuda {

namespace {

// Every kernel here runs 256 threads, seen as a 16 x 16 grid: thread (ty, tx) = (t / 16, t % 16)
// owns the entries (ty + 16 i, tx + 16 j) of each tile product it computes, so a warp reads two
// rows of the left operand (broadcasts) and sixteen columns of the right one (distinct banks: the
// shared-memory tiles have an odd row stride, d + 1 or BK + 1).
constexpr int kThreads = kAttentionThreads;
constexpr int BQ = kAttentionBQ;    // forward: queries per thread block
constexpr int BK = kAttentionBK;    // keys per block, forward and backward
constexpr int BQB = kAttentionBQB;  // backward: queries per step (keeps the backward's shared memory under 116 KiB)
constexpr int LDP = BK + 1;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class S>
__device__ __forceinline__ S from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);  // round to nearest even
}

// dst[r * ld + c] = src[r * stride + c] as float for r < valid, 0 for valid <= r < rows; c < cols.
template <class S>
__device__ void load_tile(float* dst, int ld, const S* src, int64_t stride, int rows, int valid, int cols) {
  for (int e = threadIdx.x; e < rows * cols; e += kThreads) {
    const int r = e / cols, c = e - r * cols;
    dst[r * ld + c] = r < valid ? to_float(src[r * stride + c]) : 0.0f;
  }
}

// acc[i][j] += sum_{k < n} A(ty + 16 i, k) B(k, tx + 16 j) for the columns tx + 16 j < ncols, with
// A(r, k) = a[r * a_r + k * a_k] and B(k, c) = b[k * b_k + c * b_c] (shared memory; the strides
// say whether an operand is read as stored or transposed). The rows 16 I must exist in A.
template <int I, int J>
__device__ __forceinline__ void tile_mac(float (&acc)[I][J], const float* a, int a_r, int a_k, const float* b, int b_k,
                                         int b_c, int n, int ncols) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  for (int k = 0; k < n; ++k) {
    float av[I], bv[J];
#pragma unroll
    for (int i = 0; i < I; ++i) av[i] = a[(ty + 16 * i) * a_r + k * a_k];
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int c = tx + 16 * j;
      bv[j] = c < ncols ? b[k * b_k + c * b_c] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int j = 0; j < J; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// Query i sees key j when j <= i and j > i - W (W: the effective window, T for global).
__device__ __forceinline__ bool visible(int i, int j, int W) { return j <= i && j > i - W; }

// A thread block's tile of `tile` positions of one sequence (kernels/sequences.h; grid x: the tile
// indices, taken from the last when `reverse`): the sequence's first position and length, the
// tile's block within it, the effective window for its length (window: as the host clamps it, at
// most T + 1; <= 0 or > len: every earlier position), and whether the index is idle.
struct SequenceTile {
  int64_t start;
  int len, block, W;
  bool idle;
};
__device__ __forceinline__ SequenceTile sequence_tile(const Sequences& seqs, int T, int tile, int window,
                                                      bool reverse) {
  const int64_t index = reverse ? int64_t(gridDim.x) - 1 - blockIdx.x : int64_t(blockIdx.x);
  const Tile t = tile_at(seqs, T, tile, index);
  const int len = int(t.seq.len);
  return {t.seq.start, len, int(t.block), window <= 0 || window > len ? max(len, 1) : window, t.idle};
}

// ---- forward -----------------------------------------------------------------------------------

// Shared memory: launch_plan.cpp's attention_forward_smem_bytes, in floats q [BQ, dk+1], k [BK, dk+1],
// v [BK, dv+1], p [BQ, BK+1], m, l, rescale [BQ].

// Grid (query block of a sequence: its tile index, head). o: [B, T, H, dv], lse: [B, H, T], q: [B, T, H, dk],
// k: [B, T, Hkv, dk], v: [B, T, Hkv, dv].
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(S* o, float* lse, const S* q, const S* k, const S* v, int T, int H, int Hkv, int dk, int dv, int W,
                   float scale, Sequences seqs) {
  constexpr int I = BQ / 16, J = DMAX / 16;
  LINATTN_DYNAMIC_SHARED(float, smem);
  const int ldk = dk + 1, ldv = dv + 1;
  float* qs = smem;            // [BQ, ldk]
  float* ks = qs + BQ * ldk;   // [BK, ldk]
  float* vs = ks + BK * ldk;   // [BK, ldv]
  float* ps = vs + BK * ldv;   // [BQ, LDP]: scores, then probabilities
  float* m = ps + BQ * LDP;    // [BQ] running max
  float* l = m + BQ;           // [BQ] running sum
  float* rescale = l + BQ;     // [BQ] exp(old max - new max) of the current key block
  // the last query blocks see the most keys: start them first
  const SequenceTile st = sequence_tile(seqs, T, BQ, W, true);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * dk, k += st.start * Hkv * dk, v += st.start * Hkv * dv, o += st.start * H * dv;
  if (lse) lse += st.start * H;  // the sequence's [H, len]
  const int qb = st.block;
  const int h = blockIdx.y, hk = h / (H / Hkv);
  const int i0 = qb * BQ, rows = min(BQ, T - i0);
  const int64_t ldq_g = int64_t(H) * dk, ldk_g = int64_t(Hkv) * dk, ldv_g = int64_t(Hkv) * dv, ldo_g = int64_t(H) * dv;
  const S* kb = k + int64_t(hk) * dk;  // [T, dk], stride ldk_g
  const S* vb = v + int64_t(hk) * dv;  // [T, dv], stride ldv_g
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;

  load_tile(qs, ldk, q + int64_t(i0) * ldq_g + int64_t(h) * dk, ldq_g, BQ, rows, dk);
  for (int r = threadIdx.x; r < BQ; r += kThreads) m[r] = -INFINITY, l[r] = 0.0f;
  float acc[I][J] = {};  // rows ty + 16 i, columns tx + 16 j of the running P V
  for (int j0 = max(0, i0 - W + 1); j0 < i0 + rows; j0 += BK) {
    const int cols = min(BK, i0 + rows - j0);
    __syncthreads();  // the previous key block is consumed (first pass: q, m, l are in place)
    load_tile(ks, ldk, kb + int64_t(j0) * ldk_g, ldk_g, BK, cols, dk);
    load_tile(vs, ldv, vb + int64_t(j0) * ldv_g, ldv_g, BK, cols, dv);
    __syncthreads();
    // S = scale Q K^T, -inf outside the causal window
    float s[I][BK / 16] = {};
    tile_mac(s, qs, ldk, 1, ks, 1, ldk, dk, BK);
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int j = 0; j < BK / 16; ++j) {
        const int r = ty + 16 * i, c = tx + 16 * j;
        const bool in = r < rows && c < cols && visible(i0 + r, j0 + c, W);
        ps[r * LDP + c] = in ? scale * s[i][j] : -INFINITY;
      }
    __syncthreads();
    {  // online softmax: four threads (adjacent lanes of one warp) per row
      const int r = threadIdx.x / 4, part = threadIdx.x % 4;
      float* pr = ps + r * LDP;
      const float m_old = m[r];
      float mx = -INFINITY;
      for (int c = part; c < BK; c += 4) mx = fmaxf(mx, pr[c]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int c = part; c < BK; c += 4) {
        // a row that has seen no key yet (m_new = -inf) gets P = 0, not exp(-inf + inf)
        const float p = m_new == -INFINITY ? 0.0f : expf(pr[c] - m_new);
        pr[c] = p;
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      __syncwarp();  // every lane has read m[r] before it changes
      if (part == 0) {
        // 0 on the row's first visible block (m_old = -inf), 1 while it has seen nothing
        const float a = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        rescale[r] = a;
        l[r] = l[r] * a + sum;
        m[r] = m_new;
      }
    }
    __syncthreads();
    // O = rescale O + P V
#pragma unroll
    for (int i = 0; i < I; ++i) {
      const float a = rescale[ty + 16 * i];
#pragma unroll
      for (int j = 0; j < J; ++j) acc[i][j] *= a;
    }
    tile_mac(acc, ps, LDP, 1, vs, ldv, 1, cols, dv);
  }
  __syncthreads();  // l and m are final
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int r = ty + 16 * i, c = tx + 16 * j;
      if (r < rows && c < dv) o[int64_t(i0 + r) * ldo_g + int64_t(h) * dv + c] = from_float<S>(acc[i][j] / l[r]);
    }
  if (lse)
    for (int r = threadIdx.x; r < rows; r += kThreads) lse[int64_t(h) * T + i0 + r] = m[r] + logf(l[r]);
}

// ---- backward ----------------------------------------------------------------------------------

// D[b, h, t] = do[b, t, h, :] . o[b, t, h, :] (= sum_j P_ij dP_ij), one warp per (b, t, h); laid out
// as lse: each sequence's [H, len] at start * H.
template <class S>
__global__ void __launch_bounds__(kThreads)
    rowdot_kernel(float* D, const S* o, const S* do_, int64_t n_rows, int T, int H, int dv, Sequences seqs) {
  const int64_t row = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;  // (b * T + t) * H + h
  const int lane = threadIdx.x % 32;
  if (row >= n_rows) return;  // the whole warp: row is the same on its 32 lanes
  float d = 0.0f;
  for (int c = lane; c < dv; c += 32) d += to_float(do_[row * dv + c]) * to_float(o[row * dv + c]);
  for (int off = 16; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);
  if (lane == 0) {
    const int64_t h = row % H, bt = row / H;  // bt = b * T + t
    const Span seq = sequence(seqs, sequence_of(seqs, bt, T), T);
    D[seq.start * H + h * seq.len + bt - seq.start] = d;
  }
}

// P and dS of queries [i0, i0 + rows) against keys [j0, j0 + cols), both tiles in shared memory:
// P = exp(scale Q K^T - lse) inside the window, 0 outside; dP = dO V^T; dS = P (dP - D).
template <int DMAX>
__device__ __forceinline__ void probabilities_and_ds(float* ps, float* dss, const float* qs, const float* dos,
                                                     const float* ks, const float* vs, const float* lse_s,
                                                     const float* D_s, int ldk, int ldv, int dk, int dv, int i0,
                                                     int rows, int j0, int cols, int W, float scale) {
  constexpr int I = BQB / 16, J = BK / 16;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float s[I][J] = {}, dp[I][J] = {};
  tile_mac(s, qs, ldk, 1, ks, 1, ldk, dk, BK);
  tile_mac(dp, dos, ldv, 1, vs, 1, ldv, dv, BK);
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int r = ty + 16 * i, c = tx + 16 * j;
      const bool in = r < rows && c < cols && visible(i0 + r, j0 + c, W);
      // forward: P_ij = exp(S_ij - lse_i)  =>  dS_ij = P_ij (dP_ij - D_i)
      const float p = in ? expf(scale * s[i][j] - lse_s[r]) : 0.0f;
      ps[r * LDP + c] = p;
      dss[r * LDP + c] = p * (dp[i][j] - D_s[r]);
    }
}

// lse and D of rows [i0, i0 + rows) of head h into shared memory (0 past the end).
__device__ __forceinline__ void load_row_stats(float* lse_s, float* D_s, const float* lse, const float* D, int64_t at,
                                               int rows) {
  for (int r = threadIdx.x; r < BQB; r += kThreads) {
    lse_s[r] = r < rows ? lse[at + r] : 0.0f;
    D_s[r] = r < rows ? D[at + r] : 0.0f;
  }
}

// Shared memory: launch_plan.cpp's attention_backward_smem_bytes, in floats k [BK, dk+1], v [BK, dv+1],
// q [BQB, dk+1], do [BQB, dv+1], p and ds [BQB, BK+1], lse and D [BQB]. The dq pass uses the same minus p.

// Grid (key block of a sequence, kv head): owns dk and dv of BK keys of one kv head, summing over every
// query of the G heads that read it and that sees one of these keys.
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    backward_dkdv_kernel(S* dk, S* dv, const S* q, const S* k, const S* v, const float* lse, const float* D,
                         const S* do_, int T, int H, int Hkv, int dk_, int dv_, int W, float scale, Sequences seqs) {
  constexpr int I = BK / 16, J = DMAX / 16;
  LINATTN_DYNAMIC_SHARED(float, smem);
  const int ldk = dk_ + 1, ldv = dv_ + 1;
  float* ks = smem;             // [BK, ldk]
  float* vs = ks + BK * ldk;    // [BK, ldv]
  float* qs = vs + BK * ldv;    // [BQB, ldk]
  float* dos = qs + BQB * ldk;  // [BQB, ldv]
  float* ps = dos + BQB * ldv;  // [BQB, LDP]
  float* dss = ps + BQB * LDP;  // [BQB, LDP]
  float* lse_s = dss + BQB * LDP;
  float* D_s = lse_s + BQB;
  const SequenceTile st = sequence_tile(seqs, T, BK, W, false);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * dk_, k += st.start * Hkv * dk_, v += st.start * Hkv * dv_, do_ += st.start * H * dv_;
  dk += st.start * Hkv * dk_, dv += st.start * Hkv * dv_, lse += st.start * H, D += st.start * H;
  const int hk = blockIdx.y, G = H / Hkv;
  const int j0 = st.block * BK, cols = min(BK, T - j0);
  const int64_t ldq_g = int64_t(H) * dk_, ldk_g = int64_t(Hkv) * dk_, ldv_g = int64_t(Hkv) * dv_,
                ldo_g = int64_t(H) * dv_;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  S* dkb = dk + int64_t(j0) * ldk_g + int64_t(hk) * dk_;  // [cols, dk], stride ldk_g
  S* dvb = dv + int64_t(j0) * ldv_g + int64_t(hk) * dv_;  // [cols, dv], stride ldv_g
  load_tile(ks, ldk, k + int64_t(j0) * ldk_g + int64_t(hk) * dk_, ldk_g, BK, cols, dk_);
  load_tile(vs, ldv, v + int64_t(j0) * ldv_g + int64_t(hk) * dv_, ldv_g, BK, cols, dv_);
  float dk_acc[I][J] = {}, dv_acc[I][J] = {};  // key rows ty + 16 i, columns tx + 16 j
  const int i_end = min(T, j0 + cols - 1 + W);  // the last key here is seen up to query j0 + cols - 2 + W
  for (int h = hk * G; h < (hk + 1) * G; ++h)
    for (int i0 = j0; i0 < i_end; i0 += BQB) {
      const int rows = min(BQB, T - i0);
      __syncthreads();  // the previous query step is consumed
      load_tile(qs, ldk, q + int64_t(i0) * ldq_g + int64_t(h) * dk_, ldq_g, BQB, rows, dk_);
      load_tile(dos, ldv, do_ + int64_t(i0) * ldo_g + int64_t(h) * dv_, ldo_g, BQB, rows, dv_);
      load_row_stats(lse_s, D_s, lse, D, int64_t(h) * T + i0, rows);
      __syncthreads();
      probabilities_and_ds<DMAX>(ps, dss, qs, dos, ks, vs, lse_s, D_s, ldk, ldv, dk_, dv_, i0, rows, j0, cols, W,
                                 scale);
      __syncthreads();
      // forward: O = P V  =>  dV += P^T dO
      tile_mac(dv_acc, ps, 1, LDP, dos, ldv, 1, BQB, dv_);
      // forward: S = scale Q K^T  =>  dK += scale dS^T Q
      tile_mac(dk_acc, dss, 1, LDP, qs, ldk, 1, BQB, dk_);
    }
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int c = ty + 16 * i, d = tx + 16 * j;
      if (c >= cols) continue;
      if (d < dv_) {
        S& g = dvb[c * ldv_g + d];
        g = from_float<S>(to_float(g) + dv_acc[i][j]);
      }
      if (d < dk_) {
        S& g = dkb[c * ldk_g + d];
        g = from_float<S>(to_float(g) + scale * dk_acc[i][j]);
      }
    }
}

// Grid (query block of BQB of a sequence, head): owns dq of BQB queries of one head.
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    backward_dq_kernel(S* dq, const S* q, const S* k, const S* v, const float* lse, const float* D, const S* do_,
                       int T, int H, int Hkv, int dk_, int dv_, int W, float scale, Sequences seqs) {
  constexpr int I = BQB / 16, J = DMAX / 16;
  LINATTN_DYNAMIC_SHARED(float, smem);
  const int ldk = dk_ + 1, ldv = dv_ + 1;
  float* ks = smem;             // [BK, ldk]
  float* vs = ks + BK * ldk;    // [BK, ldv]
  float* qs = vs + BK * ldv;    // [BQB, ldk]
  float* dos = qs + BQB * ldk;  // [BQB, ldv]
  float* ps = dos + BQB * ldv;  // [BQB, LDP]
  float* dss = ps + BQB * LDP;  // [BQB, LDP]
  float* lse_s = dss + BQB * LDP;
  float* D_s = lse_s + BQB;
  // the last query blocks see the most keys: start them first
  const SequenceTile st = sequence_tile(seqs, T, BQB, W, true);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * dk_, k += st.start * Hkv * dk_, v += st.start * Hkv * dv_, do_ += st.start * H * dv_;
  dq += st.start * H * dk_, lse += st.start * H, D += st.start * H;
  const int qb = st.block;
  const int h = blockIdx.y, hk = h / (H / Hkv);
  const int i0 = qb * BQB, rows = min(BQB, T - i0);
  const int64_t ldq_g = int64_t(H) * dk_, ldk_g = int64_t(Hkv) * dk_, ldv_g = int64_t(Hkv) * dv_,
                ldo_g = int64_t(H) * dv_;
  const S* kb = k + int64_t(hk) * dk_;  // [T, dk], stride ldk_g
  const S* vb = v + int64_t(hk) * dv_;  // [T, dv], stride ldv_g
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  load_tile(qs, ldk, q + int64_t(i0) * ldq_g + int64_t(h) * dk_, ldq_g, BQB, rows, dk_);
  load_tile(dos, ldv, do_ + int64_t(i0) * ldo_g + int64_t(h) * dv_, ldo_g, BQB, rows, dv_);
  load_row_stats(lse_s, D_s, lse, D, int64_t(h) * T + i0, rows);
  float dq_acc[I][J] = {};  // query rows ty + 16 i, columns tx + 16 j
  for (int j0 = max(0, i0 - W + 1); j0 < i0 + rows; j0 += BK) {
    const int cols = min(BK, i0 + rows - j0);
    __syncthreads();  // the previous key block is consumed (first pass: q, do, lse, D are in place)
    load_tile(ks, ldk, kb + int64_t(j0) * ldk_g, ldk_g, BK, cols, dk_);
    load_tile(vs, ldv, vb + int64_t(j0) * ldv_g, ldv_g, BK, cols, dv_);
    __syncthreads();
    probabilities_and_ds<DMAX>(ps, dss, qs, dos, ks, vs, lse_s, D_s, ldk, ldv, dk_, dv_, i0, rows, j0, cols, W,
                               scale);
    __syncthreads();
    // forward: S = scale Q K^T  =>  dQ += scale dS K
    tile_mac(dq_acc, dss, LDP, 1, ks, ldk, 1, cols, dk_);
  }
  S* dqb = dq + int64_t(i0) * ldq_g + int64_t(h) * dk_;  // [rows, dk], stride ldq_g
#pragma unroll
  for (int i = 0; i < I; ++i)
#pragma unroll
    for (int j = 0; j < J; ++j) {
      const int r = ty + 16 * i, d = tx + 16 * j;
      if (r < rows && d < dk_) {
        S& g = dqb[r * ldq_g + d];
        g = from_float<S>(to_float(g) + scale * dq_acc[i][j]);
      }
    }
}

// ---- bf16 on tensor cores ----------------------------------------------------------------------
//
// The same algorithm as above with every tile product on the tensor cores (WMMA, bf16 operands,
// float32 accumulators, 16 x 16 x 16 steps), for head sizes that are multiples of 16. A thread block
// is four warps; each warp owns 16 rows of the block's 64 (queries in the forward and the dq pass,
// keys in the dk/dv pass) and works on its own scratch tiles, so within a key or query step the
// warps synchronize only with __syncwarp. Scores, probabilities and dS pass through shared memory
// (a fragment's element layout is unspecified), probabilities and dS as bf16 operands of the next
// product; the running output of the forward lives in shared memory, where each row is rescaled.
// WMMA wants 32-byte aligned tile pointers and strides that are multiples of 8 bf16 / 4 floats:
// every array below starts on a 128-byte boundary and the strides are d + 8 (bf16) and 64 + 4 (float).

namespace wmma = nvcuda::wmma;
using namespace tc_attention;  // the tiles and the shared-memory layout (attention_layout.h)

using bf16_t = __nv_bfloat16;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16_t, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16_t, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

static_assert(sizeof(bf16_t) == kBf16Bytes, "attention_layout.h sizes bf16 as 2 bytes");

// This warp's scratch tiles.
struct WarpScratch {
  float* s;       // [16, LDF] scores (S or S^T)
  float* dp;      // [16, LDF] dP (or dP^T); s and dp together hold the [16, d + 4] output tile
  bf16_t* p;      // [16, LDH] probabilities
  bf16_t* ds;     // [16, LDH] dS
  float* o;       // [16, dv + 4] forward: running output
  float* m;       // [16] forward: running max
  float* l;       // [16] forward: running sum
  __device__ WarpScratch(char* base, const TcLayout& L, int dv) {
    char* w = base + L.warp + (threadIdx.x / 32) * L.warp_bytes;
    s = reinterpret_cast<float*>(w);
    dp = s + 16 * LDF;
    p = reinterpret_cast<bf16_t*>(w + align128(sizeof(float) * 2 * 16 * LDF));
    ds = p + 16 * LDH;
    o = reinterpret_cast<float*>(reinterpret_cast<char*>(p) + align128(sizeof(bf16_t) * 2 * 16 * LDH));
    m = reinterpret_cast<float*>(reinterpret_cast<char*>(o) + align128(sizeof(float) * 16 * (dv + 4)));
    l = m + 16;
  }
};

// dst[r * (cols + 8) + c] = src[r * stride + c] for r < valid, 0 for valid <= r < TB; c < cols
// (a multiple of 16). Sixteen bytes at a time when src allows it.
__device__ void load_tile_bf16(bf16_t* dst, const bf16_t* src, int64_t stride, int valid, int cols) {
  const int ld = cols + 8;
  const bool vec = reinterpret_cast<uintptr_t>(src) % 16 == 0 && stride % 8 == 0;
  if (vec) {
    const int chunks = cols / 8;
    for (int e = threadIdx.x; e < TB * chunks; e += kTcThreads) {
      const int r = e / chunks, c = (e - r * chunks) * 8;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (r < valid) x = *reinterpret_cast<const uint4*>(src + r * stride + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = x;
    }
  } else {
    for (int e = threadIdx.x; e < TB * cols; e += kTcThreads) {
      const int r = e / cols, c = e - r * cols;
      dst[r * ld + c] = r < valid ? src[r * stride + c] : __float2bfloat16(0.0f);
    }
  }
}

// out[16, 16 * NT] (float, stride LDF, row-major) = A[16, 16 * KT] B[16 * KT, 16 * NT] with A
// row-major (stride lda) and B given transposed: B(k, n) = bt[n * ldb + k] (bt row-major [n, k]).
template <int KT, int NT>
__device__ __forceinline__ void warp_abt(float* out, const bf16_t* a, int lda, const bf16_t* bt, int ldb) {
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    FragC c;
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int k = 0; k < KT; ++k) {
      FragA fa;
      FragBCol fb;
      wmma::load_matrix_sync(fa, a + 16 * k, lda);
      wmma::load_matrix_sync(fb, bt + 16 * n * ldb + 16 * k, ldb);
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(out + 16 * n, c, LDF, wmma::mem_row_major);
  }
}

// acc[n] += A[16, TB] B[TB, 16 NT] with A = this warp's bf16 [16, LDH] tile and B row-major (stride ldb).
template <int NT>
__device__ __forceinline__ void warp_ab_acc(FragC (&acc)[NT], const bf16_t* a, const bf16_t* b, int ldb) {
#pragma unroll
  for (int k = 0; k < TB / 16; ++k) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + 16 * k, LDH);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + 16 * k * ldb + 16 * n, ldb);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// g[r * stride + c] += factor * acc(r, c) in bf16 for r < rows, c < 16 NT, through the warp's
// float scratch (16 x (16 NT + 4) fits in its two [16, LDF] tiles for 16 NT <= 128).
template <int NT>
__device__ __forceinline__ void warp_add_to_global(bf16_t* g, int64_t stride, int rows, FragC (&acc)[NT],
                                                   float factor, float* scratch) {
  constexpr int ld = 16 * NT + 4;
#pragma unroll
  for (int n = 0; n < NT; ++n) wmma::store_matrix_sync(scratch + 16 * n, acc[n], ld, wmma::mem_row_major);
  __syncwarp();
  for (int e = threadIdx.x % 32; e < 16 * 16 * NT; e += 32) {
    const int r = e / (16 * NT), c = e - r * (16 * NT);
    if (r < rows) {
      bf16_t& x = g[r * stride + c];
      x = __float2bfloat16(__bfloat162float(x) + factor * scratch[r * ld + c]);
    }
  }
  __syncwarp();
}

// Grid (query block of 64 of a sequence, head).
template <int DK, int DV>
__global__ void __launch_bounds__(kTcThreads)
    tc_forward_kernel(bf16_t* o, float* lse, const bf16_t* q, const bf16_t* k, const bf16_t* v, int T, int H, int Hkv,
                      int W, float scale, Sequences seqs) {
  LINATTN_DYNAMIC_SHARED(float, smem);
  char* base = reinterpret_cast<char*>(smem);
  const TcLayout L(DK, DV);
  bf16_t* qs = reinterpret_cast<bf16_t*>(base);                         // [TB, DK + 8]
  bf16_t* ks = reinterpret_cast<bf16_t*>(base + L.tile_k);              // [TB, DK + 8]
  bf16_t* vs = reinterpret_cast<bf16_t*>(base + 2 * L.tile_k);          // [TB, DV + 8]
  const WarpScratch ws(base, L, DV);
  constexpr int ldk = DK + 8, ldv = DV + 8, ldo = DV + 4;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // the last query blocks see the most keys: start them first
  const SequenceTile st = sequence_tile(seqs, T, TB, W, true);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * DK, k += st.start * Hkv * DK, v += st.start * Hkv * DV, o += st.start * H * DV;
  if (lse) lse += st.start * H;  // the sequence's [H, len]
  const int qb = st.block;
  const int h = blockIdx.y, hk = h / (H / Hkv);
  const int i0 = qb * TB, rows = min(TB, T - i0);
  const int r0 = 16 * warp;  // this warp's rows within the block
  const int64_t ldq_g = int64_t(H) * DK, ldk_g = int64_t(Hkv) * DK, ldv_g = int64_t(Hkv) * DV, ldo_g = int64_t(H) * DV;
  load_tile_bf16(qs, q + int64_t(i0) * ldq_g + int64_t(h) * DK, ldq_g, rows, DK);
  for (int e = lane; e < 16 * ldo; e += 32) ws.o[e] = 0.0f;
  if (lane < 16) ws.m[lane] = -INFINITY, ws.l[lane] = 0.0f;
  const bf16_t* kb = k + int64_t(hk) * DK;
  const bf16_t* vb = v + int64_t(hk) * DV;
  for (int j0 = max(0, i0 - W + 1); j0 < i0 + rows; j0 += TB) {
    const int cols = min(TB, i0 + rows - j0);
    __syncthreads();  // every warp is done with the previous k and v (first pass: q is in place)
    load_tile_bf16(ks, kb + int64_t(j0) * ldk_g, ldk_g, cols, DK);
    load_tile_bf16(vs, vb + int64_t(j0) * ldv_g, ldv_g, cols, DV);
    __syncthreads();
    // S = Q K^T for this warp's 16 queries
    warp_abt<DK / 16, TB / 16>(ws.s, qs + r0 * ldk, ldk, ks, ldk);
    __syncwarp();
    {  // online softmax: two lanes per row, 32 columns each
      const int r = lane / 2, half = lane % 2, i = i0 + r0 + r;
      const float m_old = ws.m[r];
      float mx = -INFINITY;
      for (int c = half * 32; c < half * 32 + 32; ++c)
        if (r0 + r < rows && c < cols && visible(i, j0 + c, W)) mx = fmaxf(mx, scale * ws.s[r * LDF + c]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int c = half * 32; c < half * 32 + 32; ++c) {
        const bool in = m_new != -INFINITY && r0 + r < rows && c < cols && visible(i, j0 + c, W);
        const float p = in ? expf(scale * ws.s[r * LDF + c] - m_new) : 0.0f;
        ws.p[r * LDH + c] = __float2bfloat16(p);
        sum += p;  // the float32 sum: lse exact to float32, as the backward needs it
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      // 0 on the row's first visible block (m_old = -inf), 1 while it has seen nothing
      const float a = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
      for (int c = half; c < DV; c += 2) ws.o[r * ldo + c] *= a;
      __syncwarp();  // both lanes of the row have read m before it changes
      if (half == 0) ws.l[r] = ws.l[r] * a + sum, ws.m[r] = m_new;
    }
    __syncwarp();
    // O += P V
    FragC acc[DV / 16];
#pragma unroll
    for (int n = 0; n < DV / 16; ++n) wmma::load_matrix_sync(acc[n], ws.o + 16 * n, ldo, wmma::mem_row_major);
    warp_ab_acc<DV / 16>(acc, ws.p, vs, ldv);
#pragma unroll
    for (int n = 0; n < DV / 16; ++n) wmma::store_matrix_sync(ws.o + 16 * n, acc[n], ldo, wmma::mem_row_major);
  }
  __syncwarp();
  for (int e = lane; e < 16 * DV; e += 32) {
    const int r = e / DV, c = e - r * DV;
    if (r0 + r < rows) o[int64_t(i0 + r0 + r) * ldo_g + int64_t(h) * DV + c] = __float2bfloat16(ws.o[r * ldo + c] / ws.l[r]);
  }
  if (lse && lane < 16 && r0 + lane < rows) lse[int64_t(h) * T + i0 + r0 + lane] = ws.m[lane] + logf(ws.l[lane]);
}

// Grid (key block of 64 of a sequence, kv head): owns dk and dv of 64 keys; warp w the keys 16 w .. 16 w + 15.
template <int DK, int DV>
__global__ void __launch_bounds__(kTcThreads)
    tc_backward_dkdv_kernel(bf16_t* dk, bf16_t* dv, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                            const float* lse, const float* D, const bf16_t* do_, int T, int H, int Hkv, int W,
                            float scale, Sequences seqs) {
  LINATTN_DYNAMIC_SHARED(float, smem);
  char* base = reinterpret_cast<char*>(smem);
  const TcLayout L(DK, DV);
  bf16_t* ks = reinterpret_cast<bf16_t*>(base);                                // [TB, DK + 8]
  bf16_t* qs = reinterpret_cast<bf16_t*>(base + L.tile_k);                     // [TB, DK + 8]
  bf16_t* vs = reinterpret_cast<bf16_t*>(base + 2 * L.tile_k);                 // [TB, DV + 8]
  bf16_t* dos = reinterpret_cast<bf16_t*>(base + 2 * L.tile_k + L.tile_v);     // [TB, DV + 8]
  float* lse_s = reinterpret_cast<float*>(base + L.stats);                     // [TB]
  float* D_s = lse_s + TB;                                                     // [TB]
  const WarpScratch ws(base, L, DV);
  constexpr int ldk = DK + 8, ldv = DV + 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const SequenceTile st = sequence_tile(seqs, T, TB, W, false);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * DK, k += st.start * Hkv * DK, v += st.start * Hkv * DV, do_ += st.start * H * DV;
  dk += st.start * Hkv * DK, dv += st.start * Hkv * DV, lse += st.start * H, D += st.start * H;
  const int hk = blockIdx.y, G = H / Hkv;
  const int j0 = st.block * TB, cols = min(TB, T - j0);
  const int c0 = 16 * warp;  // this warp's keys within the block
  const int64_t ldq_g = int64_t(H) * DK, ldk_g = int64_t(Hkv) * DK, ldv_g = int64_t(Hkv) * DV, ldo_g = int64_t(H) * DV;
  load_tile_bf16(ks, k + int64_t(j0) * ldk_g + int64_t(hk) * DK, ldk_g, cols, DK);
  load_tile_bf16(vs, v + int64_t(j0) * ldv_g + int64_t(hk) * DV, ldv_g, cols, DV);
  FragC dk_acc[DK / 16], dv_acc[DV / 16];
#pragma unroll
  for (int n = 0; n < DK / 16; ++n) wmma::fill_fragment(dk_acc[n], 0.0f);
#pragma unroll
  for (int n = 0; n < DV / 16; ++n) wmma::fill_fragment(dv_acc[n], 0.0f);
  const int i_end = min(T, j0 + cols - 1 + W);  // the last key here is seen up to query j0 + cols - 2 + W
  for (int h = hk * G; h < (hk + 1) * G; ++h)
    for (int i0 = j0; i0 < i_end; i0 += TB) {
      const int rows = min(TB, T - i0);
      __syncthreads();  // every warp is done with the previous q and do
      load_tile_bf16(qs, q + int64_t(i0) * ldq_g + int64_t(h) * DK, ldq_g, rows, DK);
      load_tile_bf16(dos, do_ + int64_t(i0) * ldo_g + int64_t(h) * DV, ldo_g, rows, DV);
      for (int r = threadIdx.x; r < TB; r += kTcThreads) {
        lse_s[r] = r < rows ? lse[int64_t(h) * T + i0 + r] : 0.0f;
        D_s[r] = r < rows ? D[int64_t(h) * T + i0 + r] : 0.0f;
      }
      __syncthreads();
      // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys against the 64 queries
      warp_abt<DK / 16, TB / 16>(ws.s, ks + c0 * ldk, ldk, qs, ldk);
      warp_abt<DV / 16, TB / 16>(ws.dp, vs + c0 * ldv, ldv, dos, ldv);
      __syncwarp();
      // forward: P_ij = exp(S_ij - lse_i)  =>  dS_ij = P_ij (dP_ij - D_i), here transposed (key c, query r)
      for (int e = lane; e < 16 * TB; e += 32) {
        const int c = e / TB, r = e - c * TB;
        const bool in = c0 + c < cols && r < rows && visible(i0 + r, j0 + c0 + c, W);
        const float p = in ? expf(scale * ws.s[c * LDF + r] - lse_s[r]) : 0.0f;
        ws.p[c * LDH + r] = __float2bfloat16(p);
        ws.ds[c * LDH + r] = __float2bfloat16(p * (ws.dp[c * LDF + r] - D_s[r]));
      }
      __syncwarp();
      // forward: O = P V  =>  dV += P^T dO;  forward: S = scale Q K^T  =>  dK += scale dS^T Q
      warp_ab_acc<DV / 16>(dv_acc, ws.p, dos, ldv);
      warp_ab_acc<DK / 16>(dk_acc, ws.ds, qs, ldk);
    }
  const int keys = max(0, min(16, cols - c0));
  warp_add_to_global<DV / 16>(dv + int64_t(j0 + c0) * ldv_g + int64_t(hk) * DV, ldv_g, keys, dv_acc, 1.0f, ws.s);
  warp_add_to_global<DK / 16>(dk + int64_t(j0 + c0) * ldk_g + int64_t(hk) * DK, ldk_g, keys, dk_acc, scale, ws.s);
}

// Grid (query block of 64 of a sequence, head): owns dq of 64 queries; warp w the queries 16 w .. 16 w + 15.
template <int DK, int DV>
__global__ void __launch_bounds__(kTcThreads)
    tc_backward_dq_kernel(bf16_t* dq, const bf16_t* q, const bf16_t* k, const bf16_t* v, const float* lse,
                          const float* D, const bf16_t* do_, int T, int H, int Hkv, int W, float scale, Sequences seqs) {
  LINATTN_DYNAMIC_SHARED(float, smem);
  char* base = reinterpret_cast<char*>(smem);
  const TcLayout L(DK, DV);
  bf16_t* qs = reinterpret_cast<bf16_t*>(base);                                // [TB, DK + 8]
  bf16_t* ks = reinterpret_cast<bf16_t*>(base + L.tile_k);                     // [TB, DK + 8]
  bf16_t* dos = reinterpret_cast<bf16_t*>(base + 2 * L.tile_k);                // [TB, DV + 8]
  bf16_t* vs = reinterpret_cast<bf16_t*>(base + 2 * L.tile_k + L.tile_v);      // [TB, DV + 8]
  float* lse_s = reinterpret_cast<float*>(base + L.stats);                     // [TB]
  float* D_s = lse_s + TB;                                                     // [TB]
  const WarpScratch ws(base, L, DV);
  constexpr int ldk = DK + 8, ldv = DV + 8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // the last query blocks see the most keys: start them first
  const SequenceTile st = sequence_tile(seqs, T, TB, W, true);
  if (st.idle) return;
  T = st.len, W = st.W;  // from here on, those of the sequence, whose rows the pointers start at
  q += st.start * H * DK, k += st.start * Hkv * DK, v += st.start * Hkv * DV, do_ += st.start * H * DV;
  dq += st.start * H * DK, lse += st.start * H, D += st.start * H;
  const int qb = st.block;
  const int h = blockIdx.y, hk = h / (H / Hkv);
  const int i0 = qb * TB, rows = min(TB, T - i0);
  const int r0 = 16 * warp;
  const int64_t ldq_g = int64_t(H) * DK, ldk_g = int64_t(Hkv) * DK, ldv_g = int64_t(Hkv) * DV, ldo_g = int64_t(H) * DV;
  load_tile_bf16(qs, q + int64_t(i0) * ldq_g + int64_t(h) * DK, ldq_g, rows, DK);
  load_tile_bf16(dos, do_ + int64_t(i0) * ldo_g + int64_t(h) * DV, ldo_g, rows, DV);
  for (int r = threadIdx.x; r < TB; r += kTcThreads) {
    lse_s[r] = r < rows ? lse[int64_t(h) * T + i0 + r] : 0.0f;
    D_s[r] = r < rows ? D[int64_t(h) * T + i0 + r] : 0.0f;
  }
  FragC dq_acc[DK / 16];
#pragma unroll
  for (int n = 0; n < DK / 16; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  const bf16_t* kb = k + int64_t(hk) * DK;
  const bf16_t* vb = v + int64_t(hk) * DV;
  for (int j0 = max(0, i0 - W + 1); j0 < i0 + rows; j0 += TB) {
    const int cols = min(TB, i0 + rows - j0);
    __syncthreads();  // every warp is done with the previous k and v (first pass: q, do, lse, D are in place)
    load_tile_bf16(ks, kb + int64_t(j0) * ldk_g, ldk_g, cols, DK);
    load_tile_bf16(vs, vb + int64_t(j0) * ldv_g, ldv_g, cols, DV);
    __syncthreads();
    // S = Q K^T and dP = dO V^T for this warp's 16 queries
    warp_abt<DK / 16, TB / 16>(ws.s, qs + r0 * ldk, ldk, ks, ldk);
    warp_abt<DV / 16, TB / 16>(ws.dp, dos + r0 * ldv, ldv, vs, ldv);
    __syncwarp();
    // forward: P_ij = exp(S_ij - lse_i)  =>  dS_ij = P_ij (dP_ij - D_i)
    for (int e = lane; e < 16 * TB; e += 32) {
      const int r = e / TB, c = e - r * TB;
      const bool in = r0 + r < rows && c < cols && visible(i0 + r0 + r, j0 + c, W);
      const float p = in ? expf(scale * ws.s[r * LDF + c] - lse_s[r0 + r]) : 0.0f;
      ws.ds[r * LDH + c] = __float2bfloat16(p * (ws.dp[r * LDF + c] - D_s[r0 + r]));
    }
    __syncwarp();
    // forward: S = scale Q K^T  =>  dQ += scale dS K
    warp_ab_acc<DK / 16>(dq_acc, ws.ds, ks, ldk);
  }
  __syncwarp();
  warp_add_to_global<DK / 16>(dq + int64_t(i0 + r0) * ldq_g + int64_t(h) * DK, ldq_g,
                              max(0, min(16, rows - r0)), dq_acc, scale, ws.s);
}

// ---- host side ---------------------------------------------------------------------------------

// The window as the kernels take it: <= 0 (global) as 0, and any window past T as T + 1, which
// every sequence reads as global too (sequence_tile applies it to the sequence's length).
int clamped_window(int64_t window, int64_t T) { return int(window <= 0 ? 0 : std::min<int64_t>(window, T + 1)); }

void check_sizes(const char* what, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv) {
  LINATTN_CHECK(B >= 0 && T >= 0 && H >= 1 && Hkv >= 1 && H % Hkv == 0, what, ": need B, T >= 0 and the ", H,
                " query heads a multiple of the ", Hkv, " key/value heads");
  LINATTN_CHECK(dk >= 1 && dk <= kAttentionMaxHeadDim && dv >= 1 && dv <= kAttentionMaxHeadDim, what,
                ": head sizes dk=", dk, " dv=", dv, " are not supported on CUDA (1 to ", kAttentionMaxHeadDim,
                "); use smaller heads (more of them) or train on the CPU");
  LINATTN_CHECK(T < INT_MAX / 2 && B <= 65535 && H <= 65535, what, ": B=", B, " T=", T, " H=", H,
                " exceed the CUDA grid (B and H at most 65535, T below 2^30)");
}

// Opts kernel in to `smem` bytes of dynamic shared memory (above the default 48 KiB a kernel must
// opt in, up to the device's per-block limit; remembered, common.cuh) and returns smem, for the
// launch.
template <class Kernel>
size_t opt_in_shared(int64_t smem, Kernel kernel) {
  const int limit = opt_in_dynamic_shared(kernel, smem);
  LINATTN_CHECK(smem <= limit, "attention (cuda): a kernel needs ", smem / 1024, " KiB of shared memory per thread ",
                "block, more than this GPU's ", limit / 1024, " KiB; use smaller heads or train on an sm_80 or sm_90 ",
                "GPU (or on the CPU)");
  return size_t(smem);
}

// Launches a kernel (the last argument) on the compute stream as `plan` (launch_plan.h) says, opted
// in to its dynamic shared memory: LAUNCH_WITH_SHARED(plan, kernel<...>)(args...). A macro rather
// than a function taking the kernel, so that the launch names the kernel (the emulation's errors do).
#define LAUNCH_WITH_SHARED(plan, ...)                                                                  \
  LINATTN_LAUNCH(to_dim3((plan).grid), to_dim3((plan).block), opt_in_shared((plan).shared_bytes, __VA_ARGS__), \
                 static_cast<cudaStream_t>(compute_stream()), __VA_ARGS__)

// Calls fn(std::integral_constant<int, d>) for the head sizes the tensor-core kernels are built for
// (attention_uses_tensor_cores: dk = dv = d in {32, 64, 128}).
template <class Fn>
void with_tc_head_size(int64_t d, Fn&& fn) {
  switch (d) {
    case 32: return fn(std::integral_constant<int, 32>{});
    case 64: return fn(std::integral_constant<int, 64>{});
    case 128: return fn(std::integral_constant<int, 128>{});
  }
  LINATTN_FAIL("attention: no tensor-core kernel for head size ", d);
}

template <class S>
void forward(S* o, float* lse, const S* q, const S* k, const S* v, int64_t B, int64_t T, int64_t H, int64_t Hkv,
             int64_t dk, int64_t dv, int64_t window, float scale, Sequences seqs) {
  check_sizes("cuda::attention_forward", B, T, H, Hkv, dk, dv);
  if (B == 0 || T == 0) return;
  const int W = clamped_window(window, T);
  constexpr bool is_bf16 = std::is_same_v<S, bf16_t>;
  const LaunchPlan plan = attention_forward_plans(is_bf16, B, T, H, dk, dv, seqs.count)[0];
  if constexpr (is_bf16) {
    if (attention_uses_tensor_cores(is_bf16, dk, dv)) {
      with_tc_head_size(dk, [&](auto d) {
        constexpr int hd = decltype(d)::value;
        LAUNCH_WITH_SHARED(plan, tc_forward_kernel<hd, hd>)(o, lse, q, k, v, int(T), int(H), int(Hkv), W, scale, seqs);
      });
      LINATTN_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  if (std::max(dk, dv) <= 64)
    LAUNCH_WITH_SHARED(plan, forward_kernel<S, 64>)(o, lse, q, k, v, int(T), int(H), int(Hkv), int(dk), int(dv), W,
                                                    scale, seqs);
  else
    LAUNCH_WITH_SHARED(plan, forward_kernel<S, 128>)(o, lse, q, k, v, int(T), int(H), int(Hkv), int(dk), int(dv), W,
                                                     scale, seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
}

template <class S>
void backward(S* dq, S* dk, S* dv, const S* q, const S* k, const S* v, const S* o, const float* lse, const S* do_,
              int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window, float scale,
              Sequences seqs) {
  check_sizes("cuda::attention_backward", B, T, H, Hkv, dk_, dv_);
  if (B == 0 || T == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(compute_stream());
  const int W = clamped_window(window, T);
  const int64_t n_rows = B * T * H;
  constexpr bool is_bf16 = std::is_same_v<S, bf16_t>;
  // rowdot, then the pass that owns dk and dv, then the one that owns dq
  const LaunchPlans plans = attention_backward_plans(is_bf16, B, T, H, Hkv, dk_, dv_, seqs.count);
  // [B, H, T] from the caching allocator (core/cuda/runtime.h): its release below only returns it to
  // the cache, and whatever reuses it next runs after the two passes on the same stream
  float* D = static_cast<float*>(allocate(size_t(n_rows) * sizeof(float)));
  LINATTN_LAUNCH_PLAN(plans[0], stream, rowdot_kernel<S>)(D, o, do_, n_rows, int(T), int(H), int(dv_), seqs);
  LINATTN_CUDA_CHECK_LAUNCH();
  const float* Dc = D;
  const int t = int(T), h = int(H), hkv = int(Hkv), dki = int(dk_), dvi = int(dv_);
  bool done = false;
  if constexpr (is_bf16) {
    if (attention_uses_tensor_cores(is_bf16, dk_, dv_)) {
      with_tc_head_size(dk_, [&](auto d) {
        constexpr int hd = decltype(d)::value;
        LAUNCH_WITH_SHARED(plans[1], tc_backward_dkdv_kernel<hd, hd>)(dk, dv, q, k, v, lse, Dc, do_, t, h, hkv, W,
                                                                       scale, seqs);
        LINATTN_CUDA_CHECK_LAUNCH();
        LAUNCH_WITH_SHARED(plans[2], tc_backward_dq_kernel<hd, hd>)(dq, q, k, v, lse, Dc, do_, t, h, hkv, W, scale, seqs);
        LINATTN_CUDA_CHECK_LAUNCH();
      });
      done = true;
    }
  }
  if (!done) {
    if (std::max(dk_, dv_) <= 64) {
      LAUNCH_WITH_SHARED(plans[1], backward_dkdv_kernel<S, 64>)(dk, dv, q, k, v, lse, Dc, do_, t, h, hkv, dki, dvi, W,
                                                                scale, seqs);
      LINATTN_CUDA_CHECK_LAUNCH();
      LAUNCH_WITH_SHARED(plans[2], backward_dq_kernel<S, 64>)(dq, q, k, v, lse, Dc, do_, t, h, hkv, dki, dvi, W, scale, seqs);
    } else {
      LAUNCH_WITH_SHARED(plans[1], backward_dkdv_kernel<S, 128>)(dk, dv, q, k, v, lse, Dc, do_, t, h, hkv, dki, dvi,
                                                                 W, scale, seqs);
      LINATTN_CUDA_CHECK_LAUNCH();
      LAUNCH_WITH_SHARED(plans[2], backward_dq_kernel<S, 128>)(dq, q, k, v, lse, Dc, do_, t, h, hkv, dki, dvi, W,
                                                               scale, seqs);
    }
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  release(D);
}

const __nv_bfloat16* bf16(const uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* bf16(uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void attention_forward(float* o, float* lse, const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window, float scale, Sequences seqs) {
  forward<float>(o, lse, q, k, v, B, T, H, Hkv, dk, dv, window, scale, seqs);
}

void attention_backward(float* dq, float* dk, float* dv, const float* q, const float* k, const float* v,
                        const float* o, const float* lse, const float* do_, int64_t B, int64_t T, int64_t H,
                        int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window, float scale, Sequences seqs) {
  backward<float>(dq, dk, dv, q, k, v, o, lse, do_, B, T, H, Hkv, dk_, dv_, window, scale, seqs);
}

void attention_forward_bf16(uint16_t* o, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window,
                            float scale, Sequences seqs) {
  forward<__nv_bfloat16>(bf16(o), lse, bf16(q), bf16(k), bf16(v), B, T, H, Hkv, dk, dv, window, scale, seqs);
}

void attention_backward_bf16(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, const uint16_t* o, const float* lse, const uint16_t* do_, int64_t B,
                             int64_t T, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window,
                             float scale, Sequences seqs) {
  backward<__nv_bfloat16>(bf16(dq), bf16(dk), bf16(dv), bf16(q), bf16(k), bf16(v), bf16(o), lse, bf16(do_), B, T, H,
                          Hkv, dk_, dv_, window, scale, seqs);
}

}  // namespace linattn::cuda
