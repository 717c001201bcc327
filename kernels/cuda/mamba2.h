// CUDA Mamba2 (the SSD form, kernels/cpu/mamba2.h), forward and backward, served by GLA's
// chunk-parallel passes (kernels/cuda/gla.h): Mamba2 is GLA with one log-decay per head and step,
// a_t = dt_t A_h, given to every key channel, C as the queries, B as the keys, dt_t x_t as the values
// and scale 1. Around the GLA passes, per token row r and head h (rows = B T):
//   dt = softplus(gate)   A = -exp(A_log)   o = GLA(C, B, dt x, dt A; h0) + D x
// and, by the chain rule, from GLA's gradients dq, dk, dv, dg of its per-head inputs:
//   dx = dt dv + D dO                      dD_h += Σ_{r, p} x dO
//   da = Σ_n dg                            ddt = Σ_p x dv + A da
//   dgate = ddt sigmoid(gate)              dA_log_h += Σ_r A dt da
//   dC_g = Σ_{h in g} dq                   dB_g = Σ_{h in g} dk
// The chunk form and the recurrent one run the same passes (as GLA's do). The backward recomputes
// GLA's inputs and states: nothing is kept. Deterministic: the parameter gradients are column sums
// without atomics (column_sums.cuh). Pointers are device memory; kernels run on
// linattn::cuda::compute_stream(). Without LINATTN_CUDA the functions exist and throw.
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"
#include "kernels/op_types.h"
#include "kernels/sequences.h"

namespace linattn::cuda {

// One call: the shapes of kernels/backend.h's MixerArgs for Mamba2. x, gate, B and C are float32, or
// in a backward the bf16 copies a tape node keeps. Optional pointers may be null.
struct Mamba2Call {
  int64_t batch = 0, T = 0, H = 0;
  int64_t G = 0;  // groups of heads sharing B and C (H % G == 0)
  int64_t N = 0;  // state size: the channels of B and C
  int64_t P = 0;  // head dim of x and o
  MatmulPrecision precision = MatmulPrecision::f32;  // of GLA's intra-chunk products
  Sequences seqs;                                    // the documents of the batch ({} = its rows)
  Floats x;       // [batch, T, H, P]
  Floats gate;    // [batch, T, H]: the time step before its softplus
  Floats Bm, Cm;  // [batch, T, G, N]
  const float* A_log = nullptr;  // [H]
  const float* D = nullptr;      // [H]
  const float* h0 = nullptr;     // [batch, H, N, P]
  // forward
  float* o = nullptr;   // [batch, T, H, P]
  float* ht = nullptr;  // [batch, H, N, P], written when final_state
  bool final_state = true;
  // backward: dx, dgate, dB, dC written (=) with `write`, else added into; dA_log, dD, dh0 added into
  float *dx = nullptr, *dgate = nullptr, *dB = nullptr, *dC = nullptr;
  float *dA_log = nullptr, *dD = nullptr, *dh0 = nullptr;
  bool write = false;
  const float* dO = nullptr;   // [batch, T, H, P]
  const float* dht = nullptr;  // [batch, H, N, P] or null
};

#ifdef LINATTN_CUDA
void mamba2_forward(const Mamba2Call& c);
void mamba2_backward(const Mamba2Call& c);
#else
inline void mamba2_forward(const Mamba2Call&) { LINATTN_NO_CUDA(); }
inline void mamba2_backward(const Mamba2Call&) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
