// Ops for decoding (layers/decoder.h): they carry a layer's state from one call to the next and
// record nothing on the tape (generation needs no gradients; their outputs have none).
#pragma once

#include "autograd/variable.h"

namespace linattn::ops {

// Rows [t0, t1) along time of x [B, T, ...]: a copy [B, t1 - t0, ...].
Variable slice_time(const Variable& x, int64_t t0, int64_t t1);

// The causal short convolution of x [B, T, C] (weight [C, W], ops::short_conv's) continuing a
// sequence: window [B, W-1, C] holds the inputs of the W-1 positions before x (zeros before the
// first token, as short_conv pads) and is replaced by the last W-1 inputs of [window; x].
// An undefined window is a fresh sequence.
Variable short_conv_continue(const Variable& x, const Variable& weight, Tensor& window);

// One attention layer's key/value cache: the key and value of position p in slot p % capacity.
// window > 0: a ring of `window` slots; window 0 (global): slot == position, grown as needed.
struct KVCache {
  Tensor k;  // [B, capacity, Hkv, dk]
  Tensor v;  // [B, capacity, Hkv, dv]
  int64_t capacity() const { return k.defined() ? k.shape()[1] : 0; }
};

// Causal attention (ops::attention's) of q [B, T, H, dk] at positions pos .. pos + T - 1, whose keys and
// values k, v [B, T, Hkv, d] are added to the cache that holds the earlier positions. A fresh sequence
// (pos 0) runs the tiled training kernel and keeps the keys and values that the cache can hold.
Variable attention_continue(const Variable& q, const Variable& k, const Variable& v, KVCache& cache, int64_t pos,
                            int64_t window, double scale = 0);

}  // namespace linattn::ops
