// Softmax attention (fla's Attention layer): rotary q and k, causal attention over the whole
// sequence or a sliding window, grouped key/value heads.
#include <algorithm>

#include "autograd/decoding.h"
#include "layers/mixers/parts.h"

namespace linattn::mixers {

namespace {

class AttentionLayer : public MixerLayer {
 public:
  AttentionLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
                 double out_std)
      : H_(spec.num_heads), Hkv_(spec.num_kv_heads), window_(spec.window_size), head_dim_(c.hidden_size / H_),
        theta_(spec.rope_theta) {
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, H_ * head_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, Hkv_ * head_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, Hkv_ * head_dim_, std);
    o_proj_ = Linear(p, prefix + ".o_proj", H_ * head_dim_, c.hidden_size, out_std);
  }
  double mixing_flops_per_token(int64_t T) const override {
    // Each query meets (T + 1) / 2 keys on average (global) or at most W; q.k and p.v per key.
    double keys = window_ > 0 ? std::min<double>(double(window_), (double(T) + 1) / 2) : (double(T) + 1) / 2;
    return 3.0 * 2.0 * double(H_) * keys * 2.0 * double(head_dim_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t pos,
               const ops::Segments& segments) const override {
    const std::vector<Variable> qkv = project(p, x, {&q_proj_, &k_proj_, &v_proj_});
    Variable q = ops::rope(heads(qkv[0], H_), theta_, pos, segments);
    Variable k = ops::rope(heads(qkv[1], Hkv_), theta_, pos, segments);
    Variable v = heads(qkv[2], Hkv_);
    if (!s) return o_proj_(p, merge_heads(ops::attention(q, k, v, window_, 0, segments)));
    // The key/value cache lives in the state as "k_cache" and "v_cache".
    ops::KVCache cache{s->tensors["k_cache"], s->tensors["v_cache"]};
    Variable o = ops::attention_continue(q, k, v, cache, pos, window_);
    s->tensors["k_cache"] = cache.k;
    s->tensors["v_cache"] = cache.v;
    return o_proj_(p, merge_heads(o));
  }
  int64_t H_, Hkv_, window_, head_dim_;
  double theta_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
};

// The key and value cache: 2 x min(T, window_size or T) x num_kv_heads x head_dim.
int64_t state_size(const ModelConfig& c, const LayerSpec& spec, int64_t T) {
  const int64_t cached = spec.window_size > 0 ? std::min(T, spec.window_size) : T;
  return 2 * cached * spec.num_kv_heads * (c.hidden_size / spec.num_heads);
}

// An all-attention model is fla's Transformer; in a hybrid, fla_export writes the attention layers
// into the linear model's `attn`.
FlaFields fla_fields(const ModelConfig&, const LayerSpec& spec) {
  return {{"num_kv_heads", spec.num_kv_heads},
          {"qkv_bias", false},
          {"qk_norm", false},
          {"window_size", spec.window_size > 0 ? FlaValue(spec.window_size) : FlaValue(nullptr)},
          {"rope_theta", spec.rope_theta}};
}

}  // namespace

extern const MixerDescriptor attention = [] {
  MixerDescriptor d;
  d.name = "attention";
  d.summary = "causal softmax attention with rotary positions, global or a sliding window (window_size)";
  d.attention = true;
  d.make = make_layer<AttentionLayer>;
  d.state_size = state_size;
  d.op = &ops::attention_op;
  d.fla_model_type = "transformer";
  d.fla_architecture = "TransformerForCausalLM";
  d.fla_fields = fla_fields;
  return d;
}();

}  // namespace linattn::mixers
