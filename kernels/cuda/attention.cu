#include "kernels/cuda/attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"

namespace linattn::cuda {

namespace {

// Every kernel here runs 256 threads, seen as a 16 x 16 grid: thread (ty, tx) = (t / 16, t % 16)
// owns the entries (ty + 16 i, tx + 16 j) of each tile product it computes, so a warp reads two
// rows of the left operand (broadcasts) and sixteen columns of the right one (distinct banks: the
// shared-memory tiles have an odd row stride, d + 1 or BK + 1).
constexpr int kThreads = 256;
constexpr int BQ = 64;   // forward: queries per thread block
constexpr int BK = 64;   // keys per block, forward and backward
constexpr int BQB = 32;  // backward: queries per step (keeps the backward's shared memory under 116 KiB)
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

// ---- forward -----------------------------------------------------------------------------------

// Shared memory, in floats: q [BQ, dk+1], k [BK, dk+1], v [BK, dv+1], p [BQ, BK+1], m, l, rescale [BQ].
size_t forward_smem_bytes(int dk, int dv) {
  return sizeof(float) * size_t(BQ * (dk + 1) + BK * (dk + 1) + BK * (dv + 1) + BQ * LDP + 3 * BQ);
}

// Grid (query block, head, batch). o: [B, T, H, dv], lse: [B, H, T], q: [B, T, H, dk],
// k: [B, T, Hkv, dk], v: [B, T, Hkv, dv].
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(S* o, float* lse, const S* q, const S* k, const S* v, int T, int H, int Hkv, int dk, int dv, int W,
                   float scale) {
  constexpr int I = BQ / 16, J = DMAX / 16;
  extern __shared__ float smem[];
  const int ldk = dk + 1, ldv = dv + 1;
  float* qs = smem;            // [BQ, ldk]
  float* ks = qs + BQ * ldk;   // [BK, ldk]
  float* vs = ks + BK * ldk;   // [BK, ldv]
  float* ps = vs + BK * ldv;   // [BQ, LDP]: scores, then probabilities
  float* m = ps + BQ * LDP;    // [BQ] running max
  float* l = m + BQ;           // [BQ] running sum
  float* rescale = l + BQ;     // [BQ] exp(old max - new max) of the current key block
  const int qb = gridDim.x - 1 - blockIdx.x;  // the last query blocks see the most keys: start them first
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (H / Hkv);
  const int i0 = qb * BQ, rows = min(BQ, T - i0);
  const int64_t ldq_g = int64_t(H) * dk, ldk_g = int64_t(Hkv) * dk, ldv_g = int64_t(Hkv) * dv, ldo_g = int64_t(H) * dv;
  const S* kb = k + int64_t(b) * T * ldk_g + int64_t(hk) * dk;  // [T, dk], stride ldk_g
  const S* vb = v + int64_t(b) * T * ldv_g + int64_t(hk) * dv;  // [T, dv], stride ldv_g
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;

  load_tile(qs, ldk, q + (int64_t(b) * T + i0) * ldq_g + int64_t(h) * dk, ldq_g, BQ, rows, dk);
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
      if (r < rows && c < dv) o[(int64_t(b) * T + i0 + r) * ldo_g + int64_t(h) * dv + c] = from_float<S>(acc[i][j] / l[r]);
    }
  if (lse)
    for (int r = threadIdx.x; r < rows; r += kThreads) lse[(int64_t(b) * H + h) * T + i0 + r] = m[r] + logf(l[r]);
}

// ---- backward ----------------------------------------------------------------------------------

// D[b, h, t] = do[b, t, h, :] . o[b, t, h, :] (= sum_j P_ij dP_ij), one warp per (b, t, h).
template <class S>
__global__ void __launch_bounds__(kThreads)
    rowdot_kernel(float* D, const S* o, const S* do_, int64_t n_rows, int T, int H, int dv) {
  const int64_t row = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;  // (b * T + t) * H + h
  const int lane = threadIdx.x % 32;
  if (row >= n_rows) return;  // the whole warp: row is the same on its 32 lanes
  float d = 0.0f;
  for (int c = lane; c < dv; c += 32) d += to_float(do_[row * dv + c]) * to_float(o[row * dv + c]);
  for (int off = 16; off > 0; off /= 2) d += __shfl_xor_sync(0xffffffffu, d, off);
  if (lane == 0) {
    const int64_t h = row % H, bt = row / H;  // bt = b * T + t
    D[((bt / T) * H + h) * T + bt % T] = d;
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

// Shared memory, in floats: k [BK, dk+1], v [BK, dv+1], q [BQB, dk+1], do [BQB, dv+1],
// p and ds [BQB, BK+1], lse and D [BQB]. The dq pass uses the same minus p.
size_t backward_smem_bytes(int dk, int dv) {
  return sizeof(float) * size_t((BK + BQB) * (dk + 1 + dv + 1) + 2 * BQB * LDP + 2 * BQB);
}

// Grid (key block, kv head, batch): owns dk and dv of BK keys of one kv head, summing over every
// query of the G heads that read it and that sees one of these keys.
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    backward_dkdv_kernel(S* dk, S* dv, const S* q, const S* k, const S* v, const float* lse, const float* D,
                         const S* do_, int T, int H, int Hkv, int dk_, int dv_, int W, float scale) {
  constexpr int I = BK / 16, J = DMAX / 16;
  extern __shared__ float smem[];
  const int ldk = dk_ + 1, ldv = dv_ + 1;
  float* ks = smem;             // [BK, ldk]
  float* vs = ks + BK * ldk;    // [BK, ldv]
  float* qs = vs + BK * ldv;    // [BQB, ldk]
  float* dos = qs + BQB * ldk;  // [BQB, ldv]
  float* ps = dos + BQB * ldv;  // [BQB, LDP]
  float* dss = ps + BQB * LDP;  // [BQB, LDP]
  float* lse_s = dss + BQB * LDP;
  float* D_s = lse_s + BQB;
  const int hk = blockIdx.y, b = blockIdx.z, G = H / Hkv;
  const int j0 = blockIdx.x * BK, cols = min(BK, T - j0);
  const int64_t ldq_g = int64_t(H) * dk_, ldk_g = int64_t(Hkv) * dk_, ldv_g = int64_t(Hkv) * dv_,
                ldo_g = int64_t(H) * dv_;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  S* dkb = dk + (int64_t(b) * T + j0) * ldk_g + int64_t(hk) * dk_;  // [cols, dk], stride ldk_g
  S* dvb = dv + (int64_t(b) * T + j0) * ldv_g + int64_t(hk) * dv_;  // [cols, dv], stride ldv_g
  load_tile(ks, ldk, k + (int64_t(b) * T + j0) * ldk_g + int64_t(hk) * dk_, ldk_g, BK, cols, dk_);
  load_tile(vs, ldv, v + (int64_t(b) * T + j0) * ldv_g + int64_t(hk) * dv_, ldv_g, BK, cols, dv_);
  float dk_acc[I][J] = {}, dv_acc[I][J] = {};  // key rows ty + 16 i, columns tx + 16 j
  const int i_end = min(T, j0 + cols - 1 + W);  // the last key here is seen up to query j0 + cols - 2 + W
  for (int h = hk * G; h < (hk + 1) * G; ++h)
    for (int i0 = j0; i0 < i_end; i0 += BQB) {
      const int rows = min(BQB, T - i0);
      __syncthreads();  // the previous query step is consumed
      load_tile(qs, ldk, q + (int64_t(b) * T + i0) * ldq_g + int64_t(h) * dk_, ldq_g, BQB, rows, dk_);
      load_tile(dos, ldv, do_ + (int64_t(b) * T + i0) * ldo_g + int64_t(h) * dv_, ldo_g, BQB, rows, dv_);
      load_row_stats(lse_s, D_s, lse, D, (int64_t(b) * H + h) * T + i0, rows);
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

// Grid (query block of BQB, head, batch): owns dq of BQB queries of one head.
template <class S, int DMAX>
__global__ void __launch_bounds__(kThreads)
    backward_dq_kernel(S* dq, const S* q, const S* k, const S* v, const float* lse, const float* D, const S* do_,
                       int T, int H, int Hkv, int dk_, int dv_, int W, float scale) {
  constexpr int I = BQB / 16, J = DMAX / 16;
  extern __shared__ float smem[];
  const int ldk = dk_ + 1, ldv = dv_ + 1;
  float* ks = smem;             // [BK, ldk]
  float* vs = ks + BK * ldk;    // [BK, ldv]
  float* qs = vs + BK * ldv;    // [BQB, ldk]
  float* dos = qs + BQB * ldk;  // [BQB, ldv]
  float* ps = dos + BQB * ldv;  // [BQB, LDP]
  float* dss = ps + BQB * LDP;  // [BQB, LDP]
  float* lse_s = dss + BQB * LDP;
  float* D_s = lse_s + BQB;
  const int qb = gridDim.x - 1 - blockIdx.x;  // the last query blocks see the most keys: start them first
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (H / Hkv);
  const int i0 = qb * BQB, rows = min(BQB, T - i0);
  const int64_t ldq_g = int64_t(H) * dk_, ldk_g = int64_t(Hkv) * dk_, ldv_g = int64_t(Hkv) * dv_,
                ldo_g = int64_t(H) * dv_;
  const S* kb = k + int64_t(b) * T * ldk_g + int64_t(hk) * dk_;  // [T, dk], stride ldk_g
  const S* vb = v + int64_t(b) * T * ldv_g + int64_t(hk) * dv_;  // [T, dv], stride ldv_g
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  load_tile(qs, ldk, q + (int64_t(b) * T + i0) * ldq_g + int64_t(h) * dk_, ldq_g, BQB, rows, dk_);
  load_tile(dos, ldv, do_ + (int64_t(b) * T + i0) * ldo_g + int64_t(h) * dv_, ldo_g, BQB, rows, dv_);
  load_row_stats(lse_s, D_s, lse, D, (int64_t(b) * H + h) * T + i0, rows);
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
  S* dqb = dq + (int64_t(b) * T + i0) * ldq_g + int64_t(h) * dk_;  // [rows, dk], stride ldq_g
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

// ---- host side ---------------------------------------------------------------------------------

// The window actually applied (as in the CPU kernel): <= 0 and >= T both mean every earlier position.
int effective_window(int64_t window, int64_t T) { return int(window <= 0 || window > T ? std::max<int64_t>(T, 1) : window); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_sizes(const char* what, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv) {
  LINATTN_CHECK(B >= 0 && T >= 0 && H >= 1 && Hkv >= 1 && H % Hkv == 0, what, ": need B, T >= 0 and the ", H,
                " query heads a multiple of the ", Hkv, " key/value heads");
  LINATTN_CHECK(dk >= 1 && dk <= kAttentionMaxHeadDim && dv >= 1 && dv <= kAttentionMaxHeadDim, what,
                ": head sizes dk=", dk, " dv=", dv, " are not supported on CUDA (1 to ", kAttentionMaxHeadDim,
                "); use smaller heads (more of them) or train on the CPU");
  LINATTN_CHECK(T < INT_MAX / 2 && B <= 65535 && H <= 65535, what, ": B=", B, " T=", T, " H=", H,
                " exceed the CUDA grid (B and H at most 65535, T below 2^30)");
}

// Launches kernel on the compute stream with `smem` bytes of dynamic shared memory (above the
// default 48 KiB a kernel must opt in, up to the device's per-block limit).
template <class Kernel, class... Args>
void launch(Kernel kernel, dim3 grid, size_t smem, Args... args) {
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<grid, kThreads, smem, static_cast<cudaStream_t>(compute_stream())>>>(args...);
  LINATTN_CUDA_CHECK_LAUNCH();
}

template <class S>
void forward(S* o, float* lse, const S* q, const S* k, const S* v, int64_t B, int64_t T, int64_t H, int64_t Hkv,
             int64_t dk, int64_t dv, int64_t window, float scale) {
  check_sizes("cuda::attention_forward", B, T, H, Hkv, dk, dv);
  if (B == 0 || T == 0) return;
  const dim3 grid(unsigned(ceil_div(T, BQ)), unsigned(H), unsigned(B));
  const size_t smem = forward_smem_bytes(int(dk), int(dv));
  const int W = effective_window(window, T);
  if (std::max(dk, dv) <= 64)
    launch(forward_kernel<S, 64>, grid, smem, o, lse, q, k, v, int(T), int(H), int(Hkv), int(dk), int(dv), W, scale);
  else
    launch(forward_kernel<S, 128>, grid, smem, o, lse, q, k, v, int(T), int(H), int(Hkv), int(dk), int(dv), W, scale);
}

template <class S>
void backward(S* dq, S* dk, S* dv, const S* q, const S* k, const S* v, const S* o, const float* lse, const S* do_,
              int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window, float scale) {
  check_sizes("cuda::attention_backward", B, T, H, Hkv, dk_, dv_);
  if (B == 0 || T == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(compute_stream());
  const int W = effective_window(window, T);
  const int64_t n_rows = B * T * H;
  float* D = nullptr;  // [B, H, T], lives on the stream until the two passes below are done
  LINATTN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&D), size_t(n_rows) * sizeof(float), stream));
  rowdot_kernel<S><<<unsigned(ceil_div(n_rows * 32, kThreads)), kThreads, 0, stream>>>(D, o, do_, n_rows, int(T),
                                                                                        int(H), int(dv_));
  LINATTN_CUDA_CHECK_LAUNCH();
  const size_t smem = backward_smem_bytes(int(dk_), int(dv_));
  const dim3 kv_grid(unsigned(ceil_div(T, BK)), unsigned(Hkv), unsigned(B));
  const dim3 q_grid(unsigned(ceil_div(T, BQB)), unsigned(H), unsigned(B));
  const int t = int(T), h = int(H), hkv = int(Hkv), dki = int(dk_), dvi = int(dv_);
  if (std::max(dk_, dv_) <= 64) {
    launch(backward_dkdv_kernel<S, 64>, kv_grid, smem, dk, dv, q, k, v, lse, (const float*)D, do_, t, h, hkv, dki,
           dvi, W, scale);
    launch(backward_dq_kernel<S, 64>, q_grid, smem, dq, q, k, v, lse, (const float*)D, do_, t, h, hkv, dki, dvi, W,
           scale);
  } else {
    launch(backward_dkdv_kernel<S, 128>, kv_grid, smem, dk, dv, q, k, v, lse, (const float*)D, do_, t, h, hkv, dki,
           dvi, W, scale);
    launch(backward_dq_kernel<S, 128>, q_grid, smem, dq, q, k, v, lse, (const float*)D, do_, t, h, hkv, dki, dvi, W,
           scale);
  }
  LINATTN_CUDA_CHECK(cudaFreeAsync(D, stream));
}

const __nv_bfloat16* bf16(const uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* bf16(uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void attention_forward(float* o, float* lse, const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window, float scale) {
  forward<float>(o, lse, q, k, v, B, T, H, Hkv, dk, dv, window, scale);
}

void attention_backward(float* dq, float* dk, float* dv, const float* q, const float* k, const float* v,
                        const float* o, const float* lse, const float* do_, int64_t B, int64_t T, int64_t H,
                        int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window, float scale) {
  backward<float>(dq, dk, dv, q, k, v, o, lse, do_, B, T, H, Hkv, dk_, dv_, window, scale);
}

void attention_forward_bf16(uint16_t* o, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window,
                            float scale) {
  forward<__nv_bfloat16>(bf16(o), lse, bf16(q), bf16(k), bf16(v), B, T, H, Hkv, dk, dv, window, scale);
}

void attention_backward_bf16(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, const uint16_t* o, const float* lse, const uint16_t* do_, int64_t B,
                             int64_t T, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window,
                             float scale) {
  backward<__nv_bfloat16>(bf16(dq), bf16(dk), bf16(dv), bf16(q), bf16(k), bf16(v), bf16(o), lse, bf16(do_), B, T, H,
                          Hkv, dk_, dv_, window, scale);
}

}  // namespace linattn::cuda
