// Linear attention (Katharopoulos et al. 2020), see shared/design/ops.md and derivations.md:
//   S_t = S_{t-1} + phi(k_t) v_t^T
//   unnormalized (default): o_t = scale * S_t^T phi(q_t)
//   normalized:             z_t = z_{t-1} + phi(k_t),  o_t = S_t^T phi(q_t) / (phi(q_t)^T z_t + eps), eps = 1e-6
// The normalized output is a ratio, so `scale` (which would cancel up to eps) is not applied to it.
//
// Two implementations of the same function, per (batch, head):
// - recurrent: token by token. The reference; its backward keeps every per-token state, O(T Dk Dv)
//   memory per (batch, head), so it is for tests and short sequences.
// - chunk: chunks of C tokens as small dense products (the training path). The forward stores each
//   chunk's start state and its causal score block in `saved` for the backward.
//
// Shapes: q, k [B, T, H, Dk]; v, o [B, T, H, Dv]; states h0, ht [B, H, Dk, Dv]; normalizer states
// z0, zT [B, H, Dk] (used only when normalized). h0, z0, ht, zT and their gradients may be nullptr
// (nullptr initial state = zeros; nullptr upstream gradient = zeros; nullptr output = not written).
// Gradients are accumulated (+=); the caller zeroes them. Inputs are assumed valid (finite).
#pragma once

#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cpu {

constexpr int64_t kLinearAttnDefaultChunkSize = 64;

template <class T>
void linear_attn_recurrent_forward(T* o,         // [B, T, H, Dv]
                                   T* ht,        // [B, H, Dk, Dv] or nullptr
                                   T* zT,        // [B, H, Dk] or nullptr (normalized only)
                                   const T* q,   // [B, T, H, Dk]
                                   const T* k,   // [B, T, H, Dk]
                                   const T* v,   // [B, T, H, Dv]
                                   const T* h0,  // [B, H, Dk, Dv] or nullptr
                                   const T* z0,  // [B, H, Dk] or nullptr (normalized only)
                                   int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                                   FeatureMap phi, bool normalize);

template <class T>
void linear_attn_recurrent_backward(T* dq,         // [B, T, H, Dk]
                                    T* dk,         // [B, T, H, Dk]
                                    T* dv,         // [B, T, H, Dv]
                                    T* dh0,        // [B, H, Dk, Dv] or nullptr
                                    T* dz0,        // [B, H, Dk] or nullptr (normalized only)
                                    const T* q,    // [B, T, H, Dk]
                                    const T* k,    // [B, T, H, Dk]
                                    const T* v,    // [B, T, H, Dv]
                                    const T* h0,   // [B, H, Dk, Dv] or nullptr
                                    const T* z0,   // [B, H, Dk] or nullptr (normalized only)
                                    const T* do_,  // [B, T, H, Dv]
                                    const T* dht,  // [B, H, Dk, Dv] or nullptr
                                    const T* dzT,  // [B, H, Dk] or nullptr (normalized only)
                                    int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale,
                                    FeatureMap phi, bool normalize);

// Elements of `saved` the chunk forward writes and the chunk backward reads: for every (batch, head)
// and chunk, the state at its start [Dk, Dv + normalize] (z is stored as the state's last column)
// and its block M ⊙ phi(Q) phi(K)^T [C, C]: [B, H, ceil(T / C), Dk * (Dv + normalize) + C * C].
int64_t linear_attn_chunk_saved_size(int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, bool normalize,
                                     int64_t chunk_size = kLinearAttnDefaultChunkSize);

// chunk_size: any C >= 1 (16, 32 or 64 in practice); T need not be a multiple of it.
template <class T>
void linear_attn_chunk_forward(T* o,         // [B, T, H, Dv]
                               T* ht,        // [B, H, Dk, Dv] or nullptr
                               T* zT,        // [B, H, Dk] or nullptr (normalized only)
                               T* saved,     // [linear_attn_chunk_saved_size(...)]
                               const T* q,   // [B, T, H, Dk]
                               const T* k,   // [B, T, H, Dk]
                               const T* v,   // [B, T, H, Dv]
                               const T* h0,  // [B, H, Dk, Dv] or nullptr
                               const T* z0,  // [B, H, Dk] or nullptr (normalized only)
                               int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale, FeatureMap phi,
                               bool normalize, int64_t chunk_size = kLinearAttnDefaultChunkSize);

template <class T>
void linear_attn_chunk_backward(T* dq,           // [B, T, H, Dk]
                                T* dk,           // [B, T, H, Dk]
                                T* dv,           // [B, T, H, Dv]
                                T* dh0,          // [B, H, Dk, Dv] or nullptr
                                T* dz0,          // [B, H, Dk] or nullptr (normalized only)
                                const T* saved,  // as written by linear_attn_chunk_forward
                                const T* q,      // [B, T, H, Dk]
                                const T* k,      // [B, T, H, Dk]
                                const T* v,      // [B, T, H, Dv]
                                const T* do_,    // [B, T, H, Dv]
                                const T* dht,    // [B, H, Dk, Dv] or nullptr
                                const T* dzT,    // [B, H, Dk] or nullptr (normalized only)
                                int64_t B, int64_t T_, int64_t H, int64_t Dk, int64_t Dv, T scale, FeatureMap phi,
                                bool normalize, int64_t chunk_size = kLinearAttnDefaultChunkSize);

}  // namespace linattn::cpu
