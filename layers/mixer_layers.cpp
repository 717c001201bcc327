#include "layers/mixer_layers.h"

#include <cmath>

#include "autograd/mixers.h"

namespace linattn {

namespace {

// [B, T, H*d] -> [B, T, H, d]
Variable heads(const Variable& x, int64_t H) {
  const Shape& s = x.shape();
  return ops::view(x, {s[0], s[1], H, s[2] / H});
}
// [B, T, H, d] -> [B, T, H*d]
Variable merge_heads(const Variable& x) {
  const Shape& s = x.shape();
  return ops::view(x, {s[0], s[1], s[2] * s[3]});
}

int64_t scaled_dim(double expand, int64_t hidden) { return int64_t(std::llround(expand * double(hidden))); }

// Chunkwise linear mixers: per head and token, the forward does C (hk + hv) multiply-adds within the
// chunk and 2 hk hv against the state; backward about twice the forward.
double chunk_mixing_flops(int64_t H, int64_t hk, int64_t hv, int64_t C) {
  return 3.0 * 2.0 * double(H) * (double(C) * double(hk + hv) + 2.0 * double(hk * hv));
}

ops::MixerOptions chunk_options(const ModelConfig& c) {
  ops::MixerOptions o;
  o.chunk_size = c.chunk_size;
  return o;
}

// Decoding (s: the layer's state, nullptr in training): the state a mixer op starts from, the form it
// runs in (the chunk form for a prompt, the recurrent step for one token), and the final state kept.
Variable initial(const MixerState* s, Tensor MixerState::*member) {
  return s && (s->*member).defined() ? Variable(s->*member) : Variable();
}
ops::MixerOptions step_options(ops::MixerOptions o, const MixerState* s, const Variable& x) {
  if (s && x.shape()[1] == 1) o.form = ops::MixerForm::recurrent;
  return o;
}
void keep(MixerState* s, const ops::MixerOutput& out) {
  if (!s) return;
  s->h = out.ht.value().clone();  // a copy: the op's outputs may live in an activation arena
  if (out.zt.defined()) s->z = out.zt.value().clone();
}
ops::MixerOptions with_segments(ops::MixerOptions o, const ops::Segments& segments) {
  o.segments = &segments;
  return o;
}

class LinearAttentionLayer : public MixerLayer {
 public:
  LinearAttentionLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec,
                       double std, double out_std)
      : H_(spec.num_heads), C_(c.chunk_size), options_(chunk_options(c)), normalize_(c.normalize) {
    key_dim_ = scaled_dim(c.resolved_expand_k(spec.mixer), c.hidden_size);
    value_dim_ = scaled_dim(c.expand_v, c.hidden_size);
    phi_ = c.feature_map == "identity" ? FeatureMap::identity
           : c.feature_map == "relu"   ? FeatureMap::relu
                                       : FeatureMap::elu1;
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, key_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, key_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, value_dim_, std);
    norm_ = RMSNorm(p, prefix + ".norm", value_dim_ / H_, c.norm_eps);
    o_proj_ = Linear(p, prefix + ".o_proj", value_dim_, c.hidden_size, out_std);
  }
  Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const override {
    return mix(p, x, nullptr, segments);
  }
  Variable decode(const Parameters& p, const Variable& x, MixerState& s, int64_t) const override {
    return mix(p, x, &s, {});
  }
  double mixing_flops_per_token(int64_t) const override {
    return chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, const ops::Segments& segments) const {
    Variable q = heads(q_proj_(p, x), H_), k = heads(k_proj_(p, x), H_), v = heads(v_proj_(p, x), H_);
    ops::MixerOutput out =
        ops::linear_attention(q, k, v, initial(s, &MixerState::h), phi_, normalize_,
                              with_segments(step_options(options_, s, x), segments), initial(s, &MixerState::z));
    keep(s, out);
    return o_proj_(p, merge_heads(norm_(p, out.o)));
  }
  int64_t H_, C_, key_dim_ = 0, value_dim_ = 0;
  ops::MixerOptions options_;
  bool normalize_;
  FeatureMap phi_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RMSNorm norm_;
};

// GLA and RetNet share the output path o_proj(RMSNorm(o) * silu(g_proj(x))); they differ in the gate.
class GatedLayer : public MixerLayer {
 public:
  GatedLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
             double out_std, bool retnet)
      : H_(spec.num_heads), C_(c.chunk_size), options_(chunk_options(c)), retnet_(retnet) {
    key_dim_ = scaled_dim(c.resolved_expand_k(spec.mixer), c.hidden_size);
    value_dim_ = scaled_dim(c.expand_v, c.hidden_size);
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, key_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, key_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, value_dim_, std);
    g_proj_ = Linear(p, prefix + ".g_proj", c.hidden_size, value_dim_, std);
    if (!retnet_) {
      gk_low_ = Linear(p, prefix + ".gk_proj.0", c.hidden_size, kGateLowRank, std);
      gk_up_ = Linear(p, prefix + ".gk_proj.1", kGateLowRank, key_dim_, std, /*with_bias=*/true);
    }
    g_norm_ = RMSNorm(p, prefix + ".g_norm_swish_gate", value_dim_ / H_, c.norm_eps);
    o_proj_ = Linear(p, prefix + ".o_proj", value_dim_, c.hidden_size, out_std);
  }
  Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const override {
    return mix(p, x, nullptr, segments);
  }
  Variable decode(const Parameters& p, const Variable& x, MixerState& s, int64_t) const override {
    return mix(p, x, &s, {});
  }
  double mixing_flops_per_token(int64_t) const override {
    // GLA's gated products cost about twice the plain ones (the decays enter every product).
    return (retnet_ ? 1.0 : 2.0) * chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  static constexpr int64_t kGateLowRank = 16;
  static constexpr double kGateNormalizer = 16;  // fla's gate_logit_normalizer

  Variable mix(const Parameters& p, const Variable& x, MixerState* s, const ops::Segments& segments) const {
    Variable q = heads(q_proj_(p, x), H_), k = heads(k_proj_(p, x), H_), v = heads(v_proj_(p, x), H_);
    Variable g = retnet_ ? Variable(retnet_gate(q.shape(), x.dtype(), x.device()))
                         : heads(ops::scale(ops::logsigmoid(gk_up_(p, gk_low_(p, x))), 1.0 / kGateNormalizer), H_);
    ops::MixerOutput out = ops::gla(q, k, v, g, initial(s, &MixerState::h),
                                    with_segments(step_options(options_, s, x), segments));
    keep(s, out);
    Variable gated = ops::swiglu(heads(g_proj_(p, x), H_), g_norm_(p, out.o));  // silu(g_proj(x)) * RMSNorm(o)
    return o_proj_(p, merge_heads(gated));
  }

  // RetNet's fixed decay per head, gamma_h = 1 - 2^(-5-h), as a constant log-gate,
  // filled on the host (and copied to `device`).
  Tensor retnet_gate(const Shape& s, DType dtype, Device device) const {
    Tensor g = Tensor::scratch(s, dtype);
    dispatch_float(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* p = g.data<T>();
      const int64_t rows = s[0] * s[1], Hh = s[2], d = s[3];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < Hh; ++h) {
          T value = T(std::log1p(-std::exp2(-5.0 - double(h))));
          for (int64_t j = 0; j < d; ++j) p[(r * Hh + h) * d + j] = value;
        }
    });
    return device == Device::cpu ? g : g.to(device);
  }

  int64_t H_, C_, key_dim_ = 0, value_dim_ = 0;
  ops::MixerOptions options_;
  bool retnet_;
  Linear q_proj_, k_proj_, v_proj_, g_proj_, gk_low_, gk_up_, o_proj_;
  RMSNorm g_norm_;
};

// DeltaNet and Gated DeltaNet: projections -> short convolution -> SiLU -> L2-normalized q, k;
// beta = sigmoid(b_proj(x)); per-head RMSNorm of the output (gated by silu(g_proj(x)) in the gated form).
class DeltaLayer : public MixerLayer {
 public:
  DeltaLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
             double out_std, bool gated)
      : H_(spec.num_heads), C_(c.chunk_size), options_(chunk_options(c)), gated_(gated),
        short_conv_(c.use_short_conv), decay_(c.gated_deltanet_decay) {
    key_dim_ = scaled_dim(c.resolved_expand_k(spec.mixer), c.hidden_size);
    value_dim_ = scaled_dim(c.expand_v, c.hidden_size);
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, key_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, key_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, value_dim_, std);
    b_proj_ = Linear(p, prefix + ".b_proj", c.hidden_size, H_, std);
    if (short_conv_) {
      // PyTorch's default Conv1d init: uniform(+-1/sqrt(fan_in)), fan_in = the kernel width.
      Init conv = Init::Uniform(1.0 / std::sqrt(double(c.conv_size)));
      q_conv_ = p.add(prefix + ".q_conv1d.weight", {key_dim_, c.conv_size}, conv, false);
      k_conv_ = p.add(prefix + ".k_conv1d.weight", {key_dim_, c.conv_size}, conv, false);
      v_conv_ = p.add(prefix + ".v_conv1d.weight", {value_dim_, c.conv_size}, conv, false);
    }
    if (gated_) {
      a_proj_ = Linear(p, prefix + ".a_proj", c.hidden_size, H_, std);
      if (decay_ == GdnDecay::fla) {
        // fla's decay and init: A = exp(A_log) ~ U(0, 16), softplus(dt_bias) = dt with log(dt) ~ U(log 0.001, log 0.1).
        p_A_log_ = p.add(prefix + ".A_log", {H_}, Init::LogOfUniform(0.0, 16.0), false);
        p_dt_bias_ = p.add(prefix + ".dt_bias", {H_}, Init::SoftplusInverseOfLogUniform(0.001, 0.1), false);
      } else {
        // The decay a = logsigmoid(a_proj(x)); the bias spreads the heads' initial decays from
        // sigmoid(2) = 0.88 to sigmoid(6) = 0.998 per step (memories of ~8 to ~400 tokens).
        p_a_bias_ = p.add(prefix + ".a_proj.bias", {H_}, Init::Range(2.0, 6.0), false);
      }
      g_proj_ = Linear(p, prefix + ".g_proj", c.hidden_size, value_dim_, std);
    }
    o_norm_ = RMSNorm(p, prefix + ".o_norm", value_dim_ / H_, c.norm_eps);
    o_proj_ = Linear(p, prefix + ".o_proj", value_dim_, c.hidden_size, out_std);
  }
  Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const override {
    return mix(p, x, nullptr, segments);
  }
  Variable decode(const Parameters& p, const Variable& x, MixerState& s, int64_t) const override {
    return mix(p, x, &s, {});
  }
  double mixing_flops_per_token(int64_t) const override {
    // The WY form adds K K^T, the triangular solve and W, U, W S0 to the linear-attention products.
    return 2.0 * chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, const ops::Segments& segments) const {
    Variable q = feature(p, q_proj_(p, x), q_conv_, s ? &s->q_conv : nullptr, segments);
    Variable k = feature(p, k_proj_(p, x), k_conv_, s ? &s->k_conv : nullptr, segments);
    Variable v = feature(p, v_proj_(p, x), v_conv_, s ? &s->v_conv : nullptr, segments);
    q = ops::l2norm(heads(q, H_), 1e-6);
    k = ops::l2norm(heads(k, H_), 1e-6);
    v = heads(v, H_);
    Variable beta = ops::sigmoid(b_proj_(p, x));  // [B, T, H]
    Variable h0 = initial(s, &MixerState::h);
    ops::MixerOptions options = with_segments(step_options(options_, s, x), segments);
    ops::MixerOutput out;
    Variable o;
    if (gated_) {
      Variable a = decay_ == GdnDecay::fla ? ops::gdn_decay(a_proj_(p, x), p[p_A_log_], p[p_dt_bias_])
                                           : ops::logsigmoid(ops::linear(x, p[a_proj_.weight], p[p_a_bias_]));
      out = ops::gated_deltanet(q, k, v, beta, a, h0, options);
      o = ops::swiglu(heads(g_proj_(p, x), H_), o_norm_(p, out.o));
    } else {
      out = ops::deltanet(q, k, v, beta, h0, options);
      o = o_norm_(p, out.o);
    }
    keep(s, out);
    return o_proj_(p, merge_heads(o));
  }
  // window: the convolution's last inputs when decoding (nullptr in training).
  Variable feature(const Parameters& p, const Variable& x, int conv, Tensor* window,
                   const ops::Segments& segments) const {
    if (!short_conv_) return ops::silu(x);
    return ops::silu(window ? ops::short_conv_continue(x, p[conv], *window) : ops::short_conv(x, p[conv], {}, segments));
  }
  int64_t H_, C_, key_dim_ = 0, value_dim_ = 0;
  ops::MixerOptions options_;
  bool gated_, short_conv_;
  GdnDecay decay_;
  Linear q_proj_, k_proj_, v_proj_, b_proj_, a_proj_, g_proj_, o_proj_;
  int q_conv_ = -1, k_conv_ = -1, v_conv_ = -1, p_a_bias_ = -1, p_A_log_ = -1, p_dt_bias_ = -1;
  RMSNorm o_norm_;
};

class AttentionLayer : public MixerLayer {
 public:
  AttentionLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
                 double out_std)
      : H_(spec.num_heads), Hkv_(spec.num_kv_heads), window_(spec.window_size), theta_(spec.rope_theta) {
    head_dim_ = c.hidden_size / H_;
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, H_ * head_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, Hkv_ * head_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, Hkv_ * head_dim_, std);
    o_proj_ = Linear(p, prefix + ".o_proj", H_ * head_dim_, c.hidden_size, out_std);
  }
  Variable forward(const Parameters& p, const Variable& x, const ops::Segments& segments) const override {
    return mix(p, x, nullptr, 0, segments);
  }
  Variable decode(const Parameters& p, const Variable& x, MixerState& s, int64_t pos) const override {
    return mix(p, x, &s, pos, {});
  }
  double mixing_flops_per_token(int64_t T) const override {
    // Each query meets (T + 1) / 2 keys on average (global) or at most W; q.k and p.v per key.
    double keys = window_ > 0 ? std::min<double>(double(window_), (double(T) + 1) / 2) : (double(T) + 1) / 2;
    return 3.0 * 2.0 * double(H_) * keys * 2.0 * double(head_dim_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t pos,
               const ops::Segments& segments) const {
    Variable q = ops::rope(heads(q_proj_(p, x), H_), theta_, pos, segments);
    Variable k = ops::rope(heads(k_proj_(p, x), Hkv_), theta_, pos, segments);
    Variable v = heads(v_proj_(p, x), Hkv_);
    Variable o = s ? ops::attention_continue(q, k, v, s->kv, pos, window_)
                   : ops::attention(q, k, v, window_, 0, segments);
    return o_proj_(p, merge_heads(o));
  }
  int64_t H_, Hkv_, window_, head_dim_ = 0;
  double theta_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
};

}  // namespace

Variable MixerLayer::decode(const Parameters&, const Variable&, MixerState&, int64_t) const {
  LINATTN_FAIL("this mixer has no decoding path yet (MixerLayer::decode)");
}

size_t MixerState::bytes() const {
  size_t n = 0;
  for (const Tensor* t : {&h, &z, &q_conv, &k_conv, &v_conv, &kv.k, &kv.v})
    if (t->defined()) n += t->nbytes();
  return n;
}

std::unique_ptr<MixerLayer> make_mixer(Parameters& p, const std::string& prefix, const ModelConfig& c,
                                       const LayerSpec& spec, double std, double out_std) {
  switch (spec.mixer) {
    case MixerKind::linear_attn: return std::make_unique<LinearAttentionLayer>(p, prefix, c, spec, std, out_std);
    case MixerKind::gla: return std::make_unique<GatedLayer>(p, prefix, c, spec, std, out_std, false);
    case MixerKind::retnet: return std::make_unique<GatedLayer>(p, prefix, c, spec, std, out_std, true);
    case MixerKind::deltanet: return std::make_unique<DeltaLayer>(p, prefix, c, spec, std, out_std, false);
    case MixerKind::gated_deltanet: return std::make_unique<DeltaLayer>(p, prefix, c, spec, std, out_std, true);
    case MixerKind::attention: return std::make_unique<AttentionLayer>(p, prefix, c, spec, std, out_std);
  }
  LINATTN_FAIL("unknown mixer");
}

}  // namespace linattn
