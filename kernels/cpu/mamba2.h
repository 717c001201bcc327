// Mamba2's token mixer, the state-space duality (SSD) form (Dao and Gu 2024; fla's mamba2 layer), on
// the CPU: the step-by-step recurrence (the reference and the decoding path) and the chunkwise form
// (the training path), each with its hand-derived backward.
//
// Per batch b and head h, with g = h / (H / G) the group whose B and C the head reads:
//   a_t = dt_t A_h                                  log-decay <= 0 (dt = softplus(...) > 0, A = -exp(A_log) < 0)
//   S_t = exp(a_t) S_{t-1} + B_t (dt_t x_t)^T       state S [N, P]
//   y_t = S_t^T C_t                                 no 1/sqrt(N) scale: Mamba2 has none
// It is linear attention with one scalar decay per head and step (Gated DeltaNet's decay without the
// delta rule): C plays q, B plays k, v_t = dt_t x_t plays v, and the scale is 1. The D skip
// (y + D x), the short convolutions, softplus, the gate and the norm are the layer's autograd ops.
// The state is [N, P] ([dk, dv] as for the other mixers); the mamba_ssm/fla caches hold its transpose.
//
// Chunkwise form, per chunk of n <= C tokens with state S0 at its start (derivations.md's notation;
// Q = the chunk's C rows, K = its B rows [n, N], V = diag(dt) X [n, P]):
//   l_i = a_1 + ... + a_i          inclusive cumulative log-decay inside the chunk (<= 0, non-increasing)
//   gamma_i = e^(l_i),  lambda_i = e^(l_n - l_i),  D_ij = e^(l_i - l_j) for j <= i, 0 above
//   P  = (Q K^T) ⊙ D                                (causal: zero above the diagonal)
//   Y  = diag(gamma) Q S0 + P V
//   S1 = gamma_n S0 + (diag(lambda) K)^T V
// Every exponent taken is <= 0, so strong decays underflow harmlessly and nothing overflows. Q K^T
// depends only on the group, so the heads of a group share it.
//
// Backward per chunk, last to first, carrying dS (the gradient wrt S1; dht or zero at the end):
//   dV  = P^T dY + diag(lambda) K dS1
//   dP  = (dY V^T) ⊙ D                              (causal)
//   dQ  = diag(gamma) dY S0^T + dP K
//   dK  = dP^T Q + diag(lambda) V dS1^T
//   dS0 = gamma_n dS1 + (diag(gamma) Q)^T dY
// The decay's gradient. a_t multiplies exactly the terms of the loss that reach across token t, from
// a token (or state) before t to a readout (or state) at or after it; per chunk, with dS1 the gradient
// wrt S1 and dP as above:
//   da_t = gamma_n <dS1, S0>                            S0 carried through the chunk into S1
//        + Σ_{u >= t} gamma_u C_u · (S0 dy_u)           S0 read out at u
//        + Σ_{j < t} lambda_j B_j · (dS1 v_j)           token j written into S1
//        + Σ_{u >= t > j} dP_uj (C_u · B_j)             token j read out at u
// Every term carries the decay across t, so under strong decays all are small together. (GLA's rule,
// da_t = Σ_{u >= t} (C_u · dq_u - B_u · dk_u) + <dht, S_T> over the whole sequence, gives the same
// value as a difference of O(1) sums: float32 lost 2e-3 of dA that way at dt A ~ -6.)
// Then the chain rule through a_t = dt_t A_h and v_t = dt_t x_t:
//   dx_t += dt_t dv_t,   ddt_t += x_t · dv_t + A_h da_t,   dA_h += Σ_{b, t} dt_t da_t,
//   dB_{t, g} += Σ_{h in g} dk_{t, h},   dC_{t, g} += Σ_{h in g} dq_{t, h}.
//
// Gradients are accumulated (+=); the caller zeroes them. Optional pointers (h0, ht, dh0, dht) may be
// nullptr (initial state zeros, final state not written, no final-state gradient). The kernels assume
// valid values (dt >= 0, A <= 0, finite): the autograd op checks them. Work is split over
// (batch, head) pairs with OpenMP.
#pragma once

#include <cstdint>

namespace linattn::cpu {

constexpr int64_t kMamba2DefaultChunkSize = 64;

struct Mamba2Dims {
  int64_t batch;  // B
  int64_t T;      // tokens
  int64_t H;      // heads
  int64_t G;      // groups of heads sharing B and C (H % G == 0; G = 1: all heads share them)
  int64_t N;      // state size (the dimension of B and C)
  int64_t P;      // head dim (of x and y)
};

template <class T>
struct Mamba2Forward {
  T* y;         // [B, T, H, P]
  T* ht;        // [B, H, N, P] or nullptr
  T* saved;     // chunk form: [mamba2_chunk_saved_size(dims, chunk_size)] (always: the forward's chunk
                //   states, then the backward's input); recurrent: unused, may be nullptr
  const T* x;   // [B, T, H, P]
  const T* dt;  // [B, T, H]  > 0 (after softplus)
  const T* A;   // [H]  < 0 (-exp(A_log))
  const T* B;   // [B, T, G, N]
  const T* C;   // [B, T, G, N]
  const T* h0;  // [B, H, N, P] or nullptr
  Mamba2Dims dims;
  int64_t chunk_size = kMamba2DefaultChunkSize;  // chunk form: any C >= 1; T need not be a multiple
};

template <class T>
struct Mamba2Backward {
  T* dx;           // [B, T, H, P]
  T* ddt;          // [B, T, H]
  T* dA;           // [H]
  T* dB;           // [B, T, G, N]
  T* dC;           // [B, T, G, N]
  T* dh0;          // [B, H, N, P] or nullptr
  const T* saved;  // chunk form: as written by mamba2_chunk_forward with the same inputs; recurrent: unused
  const T* x;      // [B, T, H, P]
  const T* dt;     // [B, T, H]
  const T* A;      // [H]
  const T* B;      // [B, T, G, N]
  const T* C;      // [B, T, G, N]
  const T* h0;     // [B, H, N, P] or nullptr
  const T* dy;     // [B, T, H, P]
  const T* dht;    // [B, H, N, P] or nullptr
  Mamba2Dims dims;
  int64_t chunk_size = kMamba2DefaultChunkSize;
};

// Token by token: the reference and the decoding path (T = 1 with h0 = the cache, ht = the new cache).
template <class T>
void mamba2_recurrent_forward(const Mamba2Forward<T>& a);
// Keeps every per-token state, O(T N P) memory per thread: for tests and short sequences.
template <class T>
void mamba2_recurrent_backward(const Mamba2Backward<T>& a);

// Elements of `saved`: the state at the start of every chunk and the final state,
// [B, H, ceil(T / C) + 1, N, P].
int64_t mamba2_chunk_saved_size(const Mamba2Dims& dims, int64_t chunk_size = kMamba2DefaultChunkSize);

template <class T>
void mamba2_chunk_forward(const Mamba2Forward<T>& a);
// When G < H, allocates two [B, T, H, N] buffers for the per-head gradients of B and C, summed over
// each group's heads at the end.
template <class T>
void mamba2_chunk_backward(const Mamba2Backward<T>& a);

}  // namespace linattn::cpu
