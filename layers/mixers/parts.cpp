#include "layers/mixers/parts.h"

#include <cmath>

namespace linattn::mixers {

Variable heads(const Variable& x, int64_t H) {
  const Shape& s = x.shape();
  return ops::view(x, {s[0], s[1], H, s[2] / H});
}

Variable merge_heads(const Variable& x) {
  const Shape& s = x.shape();
  return ops::view(x, {s[0], s[1], s[2] * s[3]});
}

int64_t scaled_dim(double expand, int64_t hidden) { return int64_t(std::llround(expand * double(hidden))); }

int64_t key_dim(const ModelConfig& c, const LayerSpec& spec) {
  return scaled_dim(c.resolved_expand_k(spec.mixer), c.hidden_size);
}

int64_t value_dim(const ModelConfig& c, const LayerSpec&) { return scaled_dim(c.expand_v, c.hidden_size); }

double chunk_mixing_flops(int64_t H, int64_t hk, int64_t hv, int64_t C) {
  return 3.0 * 2.0 * double(H) * (double(C) * double(hk + hv) + 2.0 * double(hk * hv));
}

ops::MixerOptions linear_options(int64_t chunk_size, const MixerState* s, const Variable& x,
                                 const ops::Segments& segments) {
  ops::MixerOptions o;
  o.chunk_size = chunk_size;
  if (s && x.shape()[1] == 1) o.form = ops::MixerForm::recurrent;
  o.segments = &segments;
  o.final_state = s != nullptr;  // kept for decoding (keep); training reads no final state
  return o;
}

Variable initial(const MixerState* s, const std::string& name) {
  if (!s) return {};
  auto it = s->tensors.find(name);
  return it != s->tensors.end() && it->second.defined() ? Variable(it->second) : Variable();
}

void keep(MixerState* s, const ops::MixerOutput& out) {
  if (!s) return;
  s->tensors["h"] = out.ht.value().clone();  // a copy: the op's outputs may live in an activation arena
  if (out.zt.defined()) s->tensors["z"] = out.zt.value().clone();
}

int64_t matrix_state_size(const ModelConfig& c, const LayerSpec& spec) {
  return key_dim(c, spec) * value_dim(c, spec) / spec.num_heads;
}

ConfigKey<ModelConfig> conv_size_key() {
  return setting_key("conv_size", &ShortConvSettings::conv_size,
                    "DeltaNet / Gated DeltaNet / Mamba2: the short convolution's width")
      .in(1, 16);
}

ConfigKey<ModelConfig> use_short_conv_key() {
  return setting_key("use_short_conv", &ShortConvSettings::use_short_conv,
                    "DeltaNet / Gated DeltaNet: causal depthwise convolution on q, k, v");
}

}  // namespace linattn::mixers
