// What the mixer layers of layers/mixers/ share: head reshapes, the projected dims, the chunkwise
// FLOP count, and the bookkeeping of a linear mixer's recurrent state when decoding.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/mixers.h"
#include "layers/mixer.h"

namespace linattn::mixers {

// [B, T, H*d] -> [B, T, H, d]
Variable heads(const Variable& x, int64_t H);
// [B, T, H, d] -> [B, T, H*d]
Variable merge_heads(const Variable& x);

// round(expand * hidden): the key or value dim a mixer projects to.
int64_t scaled_dim(double expand, int64_t hidden);
// The key and value dims of `spec`'s linear mixer in model c.
int64_t key_dim(const ModelConfig& c, const LayerSpec& spec);
int64_t value_dim(const ModelConfig& c, const LayerSpec& spec);

// Chunkwise linear mixers: per head and token, the forward does C (hk + hv) multiply-adds within the
// chunk and 2 hk hv against the state; backward about twice the forward.
double chunk_mixing_flops(int64_t H, int64_t hk, int64_t hv, int64_t C);

// The options of a linear mixer op: in training (s == nullptr) the chunk form over `segments`; when
// decoding, the chunk form for a prompt and the recurrent step for one token.
ops::MixerOptions linear_options(int64_t chunk_size, const MixerState* s, const Variable& x,
                                 const ops::Segments& segments);
// The state tensor `name` of s as an op's initial state; undefined when training or fresh.
Variable initial(const MixerState* s, const std::string& name);
// Keeps the op's final states in s ("h", and "z" when defined) when decoding.
void keep(MixerState* s, const ops::MixerOutput& out);

// The state size of a linear mixer with one dk x dv matrix per head: key_dim value_dim / H.
int64_t matrix_state_size(const ModelConfig& c, const LayerSpec& spec);

// The short convolutions' settings (DeltaNet and Gated DeltaNet read both, Mamba2 conv_size) and
// their keys.
struct ShortConvSettings {
  bool use_short_conv = true;
  int64_t conv_size = 4;
};
ConfigKey<ModelConfig> conv_size_key();
ConfigKey<ModelConfig> use_short_conv_key();

}  // namespace linattn::mixers
