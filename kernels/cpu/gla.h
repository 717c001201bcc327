// Gated linear attention, GLA (Yang et al. 2024), see shared/design/ops.md and derivations.md:
//   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = scale * S_t^T q_t
// with the log-gate g <= 0 (log of the per-key-channel decay). RetNet is the special case of a
// constant gate g[b, t, h, :] = log(gamma_h).
//
// Two implementations of the same function, per (batch, head):
// - recurrent: token by token. The reference; its backward keeps every per-token state, O(T Dk Dv)
//   memory per (batch, head), so it is for tests and short sequences.
// - chunk: chunks of C tokens as small dense products (the training path). Gates stay in log space:
//   every exponential taken is of a number <= 0 (cumulative log-gates relative to an anchor inside
//   the chunk, 16-token sub-chunks), so strong decays underflow harmlessly and never overflow.
//   The forward stores each chunk's start state and the final state in `saved` for the backward.
//
// Shapes: q, k, g [B, T, H, Dk]; v, o [B, T, H, Dv]; states h0, ht [B, H, Dk, Dv]. h0, ht, dh0, dht
// may be nullptr (nullptr initial state = zeros; nullptr dht = zeros; nullptr output = not written).
// Gradients are accumulated (+=); the caller zeroes them. Inputs are assumed valid (finite, g <= 0):
// the autograd op checks them.
#pragma once

#include <cstdint>

namespace linattn::cpu {

constexpr int64_t kGlaDefaultChunkSize = 64;

template <class T>
void gla_recurrent_forward(T* o,         // [B, T, H, Dv]
                           T* ht,        // [B, H, Dk, Dv] or nullptr
                           const T* q,   // [B, T, H, Dk]
                           const T* k,   // [B, T, H, Dk]
                           const T* v,   // [B, T, H, Dv]
                           const T* g,   // [B, T, H, Dk] log-gate, <= 0
                           const T* h0,  // [B, H, Dk, Dv] or nullptr
                           int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale);

template <class T>
void gla_recurrent_backward(T* dq,         // [B, T, H, Dk]
                            T* dk,         // [B, T, H, Dk]
                            T* dv,         // [B, T, H, Dv]
                            T* dg,         // [B, T, H, Dk]
                            T* dh0,        // [B, H, Dk, Dv] or nullptr
                            const T* q,    // [B, T, H, Dk]
                            const T* k,    // [B, T, H, Dk]
                            const T* v,    // [B, T, H, Dv]
                            const T* g,    // [B, T, H, Dk]
                            const T* h0,   // [B, H, Dk, Dv] or nullptr
                            const T* do_,  // [B, T, H, Dv]
                            const T* dht,  // [B, H, Dk, Dv] or nullptr
                            int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale);

// Elements of `saved` the chunk forward writes and the chunk backward reads: the state at the start
// of every chunk and the final state, [B, H, ceil(T / C) + 1, Dk, Dv].
int64_t gla_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv,
                             int64_t chunk_size = kGlaDefaultChunkSize);

// chunk_size: any C >= 1 (16, 32 or 64 in practice); T need not be a multiple of it.
template <class T>
void gla_chunk_forward(T* o,         // [B, T, H, Dv]
                       T* ht,        // [B, H, Dk, Dv] or nullptr
                       T* saved,     // [gla_chunk_saved_size(...)]
                       const T* q,   // [B, T, H, Dk]
                       const T* k,   // [B, T, H, Dk]
                       const T* v,   // [B, T, H, Dv]
                       const T* g,   // [B, T, H, Dk] log-gate, <= 0
                       const T* h0,  // [B, H, Dk, Dv] or nullptr
                       int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                       int64_t chunk_size = kGlaDefaultChunkSize);

template <class T>
void gla_chunk_backward(T* dq,           // [B, T, H, Dk]
                        T* dk,           // [B, T, H, Dk]
                        T* dv,           // [B, T, H, Dv]
                        T* dg,           // [B, T, H, Dk]
                        T* dh0,          // [B, H, Dk, Dv] or nullptr
                        const T* saved,  // as written by gla_chunk_forward
                        const T* q,      // [B, T, H, Dk]
                        const T* k,      // [B, T, H, Dk]
                        const T* v,      // [B, T, H, Dv]
                        const T* g,      // [B, T, H, Dk]
                        const T* do_,    // [B, T, H, Dv]
                        const T* dht,    // [B, H, Dk, Dv] or nullptr
                        int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                        int64_t chunk_size = kGlaDefaultChunkSize);

}  // namespace linattn::cpu
