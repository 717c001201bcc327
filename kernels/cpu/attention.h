// Causal softmax attention, global or sliding window, with grouped-query heads: a tiled forward
// (running max and sum, only the row log-sum-exp saved), a backward that recomputes the
// probabilities block by block, and a decoding path over a (rolling) key/value cache.
//
// Conventions (shared/design/ops.md, "Softmax attention"):
//   o_i = sum_j softmax_j(scale * q_i . k_j) v_j  over  j in [i - W + 1, i]  (causal, window W),
//   query head h reads kv head h / (H / Hkv). window <= 0 (kGlobalWindow) means global; so does
//   any window >= T, and the result is then bit-identical to the global one.
// No T x T matrix is ever formed: the work is done in blocks of kAttentionBlockQ queries against
// kAttentionBlockK keys, and a window skips the key blocks wholly outside it, so the cost is O(T W)
// and the memory O(T) (outputs, lse and a per-thread workspace whose size depends on the block
// sizes only). Threads: the forward splits (sequence, head, query block); the backward splits
// (sequence, kv head): each task owns all the gradients it writes, so its sums come out in the same
// order (the same bits) on every run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/op_types.h"

namespace linattn::cpu {

inline constexpr int64_t kGlobalWindow = 0;  // any window <= 0 means global causal attention
inline constexpr int64_t kAttentionBlockQ = 64;
inline constexpr int64_t kAttentionBlockK = 64;

// Bytes of scratch one thread holds during attention_forward / attention_backward (score and
// probability blocks plus per-row statistics); the total is this times the number of threads.
// Independent of T, B and H.
size_t attention_workspace_bytes_per_thread(size_t scalar_bytes);

// Documents: with `seqs` (kernels/op_types.h), a query sees the keys of its own sequence only and the
// window counts from the query as before; each sequence gets the bits of a call on it alone (its
// query blocks start at its first position). lse then holds each sequence's [H, len] at start * H
// (with the rows as the sequences that is [B, H, T]).
//
// Forward. o and lse are overwritten.
// o:   [B, T, H, dv]   output
// lse: [B, H, T]       log-sum-exp of the scaled, masked scores of each row (saved for backward;
//                      may be nullptr when no backward follows, e.g. the prompt of a generation)
// q:   [B, T, H, dk]
// k:   [B, T, Hkv, dk]
// v:   [B, T, Hkv, dv]
// H must be a multiple of Hkv; scale is usually dk^-1/2.
template <class T>
void attention_forward(T* o, T* lse, const T* q, const T* k, const T* v, int64_t B, int64_t T_, int64_t H,
                       int64_t Hkv, int64_t dk, int64_t dv, int64_t window, T scale, Sequences seqs = {});

// Backward: dq, dk, dv are ACCUMULATED (+=); the caller zeroes them.
// dq:  [B, T, H, dk]     dk: [B, T, Hkv, dk]     dv: [B, T, Hkv, dv]
// q, k, v as in the forward; o: [B, T, H, dv] and lse: [B, H, T] from the forward;
// do_: [B, T, H, dv] upstream gradient of o.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* o, const T* lse,
                        const T* do_, int64_t B, int64_t T_, int64_t H, int64_t Hkv, int64_t dk_, int64_t dv_,
                        int64_t window, T scale, Sequences seqs = {});

// ---- Decoding over a key/value cache -------------------------------------------------------
//
// Cache layout: k_cache [B, C, Hkv, dk], v_cache [B, C, Hkv, dv] with capacity C; the key and value
// of absolute position p live in slot p % C (a rolling buffer). A global layer uses C >= the
// longest sequence (then slot == position). A windowed layer needs the last W positions before
// the first new query plus the new ones: C >= W + Tq - 1 for blocks of up to Tq new positions
// (C = W when decoding one token at a time).
//
// Generation step for Tq new positions pos0 .. pos0 + Tq - 1:
//   kv_cache_write(k_cache, v_cache, k_new, v_new, ...);   // store their keys and values
//   attention_decode(o, q_new, k_cache, v_cache, ...);      // attend them to the cache
// The result equals rows pos0 .. pos0 + Tq - 1 of attention_forward on the whole sequence.
// A prompt can go either way: as one block through the two calls above (C large enough), or through
// attention_forward (lse = nullptr) followed by kv_cache_write of its keys and values at pos0 = 0,
// which keeps the last C of them. RoPE is applied to q and k before, with pos_offset = pos0.

// Writes the keys and values of positions pos0 .. pos0 + Tq - 1 into their slots. When Tq > C only
// the last C positions are kept (they are the only ones the cache can hold).
// k_cache: [B, C, Hkv, dk]   v_cache: [B, C, Hkv, dv]
// k: [B, Tq, Hkv, dk]        v: [B, Tq, Hkv, dv]
template <class T>
void kv_cache_write(T* k_cache, T* v_cache, const T* k, const T* v, int64_t B, int64_t Tq, int64_t Hkv, int64_t dk,
                    int64_t dv, int64_t C, int64_t pos0);

// o: [B, Tq, H, dv] (overwritten)   q: [B, Tq, H, dk] for positions pos0 .. pos0 + Tq - 1
// k_cache, v_cache: as above, already holding positions max(0, pos0 - W + 1) .. pos0 + Tq - 1
// (checked: throws if C is too small for that span).
template <class T>
void attention_decode(T* o, const T* q, const T* k_cache, const T* v_cache, int64_t B, int64_t Tq, int64_t H,
                      int64_t Hkv, int64_t dk, int64_t dv, int64_t C, int64_t pos0, int64_t window, T scale);

}  // namespace linattn::cpu
