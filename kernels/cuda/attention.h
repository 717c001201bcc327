// CUDA causal softmax attention, global or sliding window, with grouped-query heads: the device
// twin of kernels/cpu/attention.h, with the same arguments, layouts and conventions (ops.md,
// "Softmax attention"): o_i = sum_j softmax_j(scale * q_i . k_j) v_j over j in [i - W + 1, i];
// query head h reads kv head h / (H / Hkv); window <= 0 or >= T means global; lse is [B, H, T];
// the backward ACCUMULATES into dq, dk, dv (+=). Documents: `seqs` (kernels/op_types.h, the offsets
// on the device) as in kernels/cpu/attention.h: one launch per kernel for the whole batch, each
// thread block on one tile of one sequence (kernels/sequences.h), so every sequence gets the bits
// of a launch on it alone; lse and the backward's D hold each sequence's [H, len] at start * H.
//
// Tiled (flash-style): the forward keeps a block of queries in shared memory and streams the key
// blocks of its causal window through it with a running max and sum; the backward recomputes the
// probabilities from lse, once in a pass that owns dk and dv (one thread block per key block and kv
// head, summing over the query heads of its group) and once in a pass that owns dq (one per query
// block and head). No float atomics: every gradient entry is written by one thread in a fixed
// order, so the results are the same bits on every run. Memory beyond the outputs: D = rowsum(dO * O),
// B * H * T floats, for the duration of the backward.
//
// Pointers are device memory; kernels run on linattn::cuda::compute_stream(). Head sizes dk, dv:
// 1..128 (larger ones are refused with an error).
//
// bf16 variants: q, k, v, o, do, dq, dk, dv hold bfloat16 bit patterns (the top 16 bits of a
// float32; uint16_t here so that this header needs no CUDA type), lse is float32; every product is
// accumulated and every softmax statistic kept in float32. With dk = dv in {32, 64, 128} the tile
// products run on the tensor cores (sm_80 and later), the probabilities and dS entering them rounded
// to bf16; other head sizes take the float32 CUDA-core kernels, reading and writing bf16.
//
// Without LINATTN_CUDA the same functions exist and throw, so callers need no #ifdefs.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "kernels/op_types.h"

namespace linattn::cuda {

inline constexpr int64_t kAttentionMaxHeadDim = 128;

#ifdef LINATTN_CUDA
// o: [B, T, H, dv] (overwritten)   lse: [B, H, T] (overwritten; may be nullptr)
// q: [B, T, H, dk]   k: [B, T, Hkv, dk]   v: [B, T, Hkv, dv]
void attention_forward(float* o, float* lse, const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window, float scale,
                       Sequences seqs = {});
// dq: [B, T, H, dk]   dk: [B, T, Hkv, dk]   dv: [B, T, Hkv, dv]   (all +=)
// q, k, v, o, lse as in the forward; do_: [B, T, H, dv]
void attention_backward(float* dq, float* dk, float* dv, const float* q, const float* k, const float* v,
                        const float* o, const float* lse, const float* do_, int64_t B, int64_t T, int64_t H,
                        int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window, float scale,
                        Sequences seqs = {});

void attention_forward_bf16(uint16_t* o, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t dk, int64_t dv, int64_t window,
                            float scale, Sequences seqs = {});
void attention_backward_bf16(uint16_t* dq, uint16_t* dk, uint16_t* dv, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, const uint16_t* o, const float* lse, const uint16_t* do_, int64_t B,
                             int64_t T, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_, int64_t window,
                             float scale, Sequences seqs = {});
#else
inline void attention_forward(float*, float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, float, Sequences = {}) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
inline void attention_backward(float*, float*, float*, const float*, const float*, const float*, const float*,
                               const float*, const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, float, Sequences = {}) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
inline void attention_forward_bf16(uint16_t*, float*, const uint16_t*, const uint16_t*, const uint16_t*, int64_t,
                                   int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, Sequences = {}) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
inline void attention_backward_bf16(uint16_t*, uint16_t*, uint16_t*, const uint16_t*, const uint16_t*,
                                    const uint16_t*, const uint16_t*, const float*, const uint16_t*, int64_t, int64_t,
                                    int64_t, int64_t, int64_t, int64_t, int64_t, float, Sequences = {}) {
  LINATTN_FAIL("linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
}
#endif

}  // namespace linattn::cuda
