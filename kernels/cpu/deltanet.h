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
// The backward passes are derived in the .cpp, next to the lines they differentiate.
//
// Shapes: q, k [B, T, H, dk]; v, o [B, T, H, dv]; beta, a [B, T, H]; states h0, ht [B, H, dk, dv].
// Optional pointers (h0, ht, dh0, dht) may be nullptr. Gradient outputs are accumulated (+=).
// The kernels assume valid input (beta in (0, 1), a <= 0, finite values): the autograd op checks it.
// Work is split over batch x heads with OpenMP; the products inside are single-threaded cpu::gemm.
#pragma once

#include <cstdint>

namespace linattn::cpu {

// ---- DeltaNet -----------------------------------------------------------------------------------

// Token by token. o: [B, T, H, dv] (written); ht: [B, H, dk, dv] (written, nullable);
// q, k: [B, T, H, dk]; v: [B, T, H, dv]; beta: [B, T, H]; h0: [B, H, dk, dv] (nullable).
template <class T>
void deltanet_recurrent_forward(T* o, T* ht, const T* q, const T* k, const T* v, const T* beta, const T* h0,
                                int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv, T scale);

// Gradients of the recurrent forward (accumulated): dq, dk: [B, T, H, dk]; dv: [B, T, H, dv];
// dbeta: [B, T, H]; dh0: [B, H, dk, dv] (nullable); do_: [B, T, H, dv]; dht: [B, H, dk, dv] (nullable).
// Recomputes the states from checkpoints every 64 tokens (memory O(T/64 + 64) states per thread).
template <class T>
void deltanet_recurrent_backward(T* dq, T* dk, T* dv, T* dbeta, T* dh0, const T* q, const T* k, const T* v,
                                 const T* beta, const T* h0, const T* do_, const T* dht, int64_t B, int64_t T_,
                                 int64_t H, int64_t dk_, int64_t dv_, T scale);

// Elements of the `saved` buffer the chunkwise forward fills and the chunkwise backward reads, so
// that the backward recomputes nothing. Layout: for each (batch, head) [B*H], for each chunk
// [ceil(T/C)], one block of
//   S0   [dk, dv]  the state at the chunk's start,
//   Ainv [C, C]    A^-1 (unit lower-triangular, zeros above the diagonal),
//   PG   [C, C]    P = tril(Q K^T) . D on and below the diagonal; K K^T . D (symmetric) above it,
//   U'   [C, dv]   the state updates U' = A^-1 diag(beta) R,
//   R    [C, dv]   R = V - diag(gamma) K S0,
// i.e. B*H*ceil(T/C)*(dk*dv + 2*C*C + 2*C*dv) elements (a partial last chunk of n tokens uses the
// first n rows/columns of its block). For dk = dv = C = 64 that is 5 floats per token, head and
// head dimension: five times the size of v (about 42 MB at B=4, H=4, T=2048).
int64_t deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv, int64_t chunk_size);

// Chunkwise WY forward. o: [B, T, H, dv] (written); ht: [B, H, dk, dv] (written, nullable);
// saved: deltanet_chunk_saved_size(...) elements (written; nullable when no backward will follow);
// inputs as in the recurrent forward. chunk_size: 16, 32 or 64 (any C >= 1 works); T need not be
// a multiple of it.
template <class T>
void deltanet_chunk_forward(T* o, T* ht, T* saved, const T* q, const T* k, const T* v, const T* beta, const T* h0,
                            int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv, T scale,
                            int64_t chunk_size = 64);

// Chunkwise backward from the forward's `saved` (same sizes and chunk_size). Gradients as in the
// recurrent backward (accumulated). Runs chunks last to first with small dense products only;
// nothing steps token by token.
template <class T>
void deltanet_chunk_backward(T* dq, T* dk, T* dv, T* dbeta, T* dh0, const T* saved, const T* q, const T* k,
                             const T* v, const T* beta, const T* h0, const T* do_, const T* dht, int64_t B,
                             int64_t T_, int64_t H, int64_t dk_, int64_t dv_, T scale, int64_t chunk_size = 64);

// ---- Gated DeltaNet: the same with a log-decay a: [B, T, H] (a <= 0) and its gradient da: [B, T, H] ----

template <class T>
void gated_deltanet_recurrent_forward(T* o, T* ht, const T* q, const T* k, const T* v, const T* beta, const T* a,
                                      const T* h0, int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv,
                                      T scale);

template <class T>
void gated_deltanet_recurrent_backward(T* dq, T* dk, T* dv, T* dbeta, T* da, T* dh0, const T* q, const T* k,
                                       const T* v, const T* beta, const T* a, const T* h0, const T* do_,
                                       const T* dht, int64_t B, int64_t T_, int64_t H, int64_t dk_, int64_t dv_,
                                       T scale);

// Same layout and size as deltanet_chunk_saved_size (the gates are recomputed from a).
int64_t gated_deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv,
                                        int64_t chunk_size);

template <class T>
void gated_deltanet_chunk_forward(T* o, T* ht, T* saved, const T* q, const T* k, const T* v, const T* beta,
                                  const T* a, const T* h0, int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv,
                                  T scale, int64_t chunk_size = 64);

template <class T>
void gated_deltanet_chunk_backward(T* dq, T* dk, T* dv, T* dbeta, T* da, T* dh0, const T* saved, const T* q,
                                   const T* k, const T* v, const T* beta, const T* a, const T* h0, const T* do_,
                                   const T* dht, int64_t B, int64_t T_, int64_t H, int64_t dk_, int64_t dv_, T scale,
                                   int64_t chunk_size = 64);

}  // namespace linattn::cpu
