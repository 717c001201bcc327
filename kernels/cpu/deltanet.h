// DeltaNet and Gated DeltaNet token mixers on the CPU: the step-by-step recurrence (the reference
// and the decoding path) and the chunkwise WY form (the training path), each with its backward.
//
// Per (batch, head), with q, k used exactly as given (the layer L2-normalizes them, these kernels
// do not) and beta in (0, 1):
//   DeltaNet:        S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T
//   Gated DeltaNet:  S_t = exp(a_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,  a_t <= 0
//   both:            o_t = scale * S_t^T q_t
// The chunkwise form (per chunk of C tokens, state S0 at its start, G the within-chunk inclusive
// cumulative sum of a, gamma = exp(G), lambda_j = exp(G_last - G_j), D_ij = exp(G_i - G_j) for
// j <= i; without gates all of these are 1):
//   A = I + tril(diag(beta) (K K^T . D), -1)       (unit lower-triangular; inverted by forward substitution)
//   R = V - diag(gamma) K S0                       (what the state does not already predict)
//   U' = A^-1 diag(beta) R                         (= T V - W S0 with T = A^-1 diag(beta), W = T diag(gamma) K)
//   O = scale (diag(gamma) Q S0 + (tril(Q K^T) . D) U')
//   S1 = gamma_last S0 + K^T diag(lambda) U'
// The backward passes are derived in deltanet_stages.h, next to the lines they differentiate.
//
// One implementation serves both mixers: a == nullptr is plain DeltaNet (every gate factor is 1; da
// is then not written and may be nullptr). The chunkwise form is a sequence of named stages, one
// function each (kernels/cpu/deltanet_stages.h), shared by the two mixers: the gated form passes its
// decays to the stages that use them.
//
// Shapes: q, k [B, T, H, Dk]; v, o [B, T, H, Dv]; beta, a [B, T, H]; states h0, ht [B, H, Dk, Dv].
// Optional pointers (a, h0, ht, dh0, dht) may be nullptr. Gradient outputs are accumulated (+=).
// The kernels assume valid input (beta in (0, 1), a <= 0, finite values): the autograd op checks it.
// Work is split over batch x heads with OpenMP; the products inside are single-threaded cpu::gemm.
#pragma once

#include <cstdint>

#include "kernels/deltanet.h"

namespace linattn::cpu {

// Token by token: the reference and the decoding path. Writes o, ht.
template <class T>
void deltanet_recurrent_forward(const DeltaNetArgs<T>& p);

// Recomputes the states from checkpoints every 64 tokens (memory O(T/64 + 64) states per thread).
template <class T>
void deltanet_recurrent_backward(const DeltaNetArgs<T>& p);

// Chunkwise WY forward (T need not be a multiple of the chunk size). Writes o, ht, saved.
template <class T>
void deltanet_chunk_forward(const DeltaNetArgs<T>& p);

// Chunkwise backward from the forward's `saved` (same sizes and chunk_size). Runs chunks last to
// first with small dense products only; nothing steps token by token.
template <class T>
void deltanet_chunk_backward(const DeltaNetArgs<T>& p);

}  // namespace linattn::cpu
