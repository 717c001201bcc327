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

namespace linattn::cpu {

constexpr int64_t kDeltaNetDefaultChunkSize = 64;

// Everything one DeltaNet kernel call reads and writes. A forward reads the inputs and writes o, ht
// and (chunk form) `saved`; a backward reads the inputs, `saved` (chunk form) and the upstream
// gradients, and accumulates into the gradients. Pointers a kernel does not use may stay null.
// A plain aggregate of pointers and sizes, so the CUDA kernels take it by value too
// (kernels/cuda/deltanet.h).
template <class T>
struct DeltaNetArgs {
  int64_t B = 0, len = 0, H = 0, Dk = 0, Dv = 0;  // len: the sequence length T
  T scale = 1;
  int64_t chunk_size = kDeltaNetDefaultChunkSize;  // the chunk forms: 16, 32 or 64 (any C >= 1 works)
  // forward outputs
  T* o = nullptr;      // [B, T, H, Dv]
  T* ht = nullptr;     // [B, H, Dk, Dv] or nullptr
  T* saved = nullptr;  // [deltanet_chunk_saved_size(...)]: chunk forward writes (nullptr: no backward follows), chunk backward reads
  // inputs
  const T* q = nullptr;     // [B, T, H, Dk]
  const T* k = nullptr;     // [B, T, H, Dk]
  const T* v = nullptr;     // [B, T, H, Dv]
  const T* beta = nullptr;  // [B, T, H] in (0, 1)
  const T* a = nullptr;     // [B, T, H] log-decay <= 0 (Gated DeltaNet), or nullptr (DeltaNet)
  const T* h0 = nullptr;    // [B, H, Dk, Dv] or nullptr
  // upstream gradients
  const T* dO = nullptr;   // [B, T, H, Dv]
  const T* dht = nullptr;  // [B, H, Dk, Dv] or nullptr
  // gradients (+=)
  T* dq = nullptr;     // [B, T, H, Dk]
  T* dk = nullptr;     // [B, T, H, Dk]
  T* dv = nullptr;     // [B, T, H, Dv]
  T* dbeta = nullptr;  // [B, T, H]
  T* da = nullptr;     // [B, T, H], or nullptr when a is
  T* dh0 = nullptr;    // [B, H, Dk, Dv] or nullptr
};

// Token by token: the reference and the decoding path. Writes o, ht.
template <class T>
void deltanet_recurrent_forward(const DeltaNetArgs<T>& p);

// Recomputes the states from checkpoints every 64 tokens (memory O(T/64 + 64) states per thread).
template <class T>
void deltanet_recurrent_backward(const DeltaNetArgs<T>& p);

// Elements of the `saved` buffer the chunkwise forward fills and the chunkwise backward reads, so
// that the backward recomputes nothing (the gates are recomputed from a). Layout: for each
// (batch, head) [B*H], for each chunk [ceil(T/C)], one block of
//   S0   [Dk, Dv]  the state at the chunk's start,
//   Ainv [C, C]    A^-1 (unit lower-triangular, zeros above the diagonal),
//   PG   [C, C]    P = tril(Q K^T) . D on and below the diagonal; K K^T . D (symmetric) above it,
//   U'   [C, Dv]   the state updates U' = A^-1 diag(beta) R,
//   R    [C, Dv]   R = V - diag(gamma) K S0,
// i.e. B*H*ceil(T/C)*(Dk*Dv + 2*C*C + 2*C*Dv) elements (a partial last chunk of n tokens uses the
// first n rows/columns of its block). For Dk = Dv = C = 64 that is 5 floats per token, head and
// head dimension: five times the size of v (about 42 MB at B=4, H=4, T=2048).
int64_t deltanet_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv,
                                  int64_t chunk_size = kDeltaNetDefaultChunkSize);

// Chunkwise WY forward (T need not be a multiple of the chunk size). Writes o, ht, saved.
template <class T>
void deltanet_chunk_forward(const DeltaNetArgs<T>& p);

// Chunkwise backward from the forward's `saved` (same sizes and chunk_size). Runs chunks last to
// first with small dense products only; nothing steps token by token.
template <class T>
void deltanet_chunk_backward(const DeltaNetArgs<T>& p);

}  // namespace linattn::cpu
