// GLA and RetNet (fla's GatedLinearAttention layer, and RetNet's fixed decay): they share the output
// path o_proj(RMSNorm(o) * silu(g_proj(x))) and GLA's kernels; they differ in the gate.
#include <cmath>

#include "layers/mixers/parts.h"

namespace linattn::mixers {

namespace {

class GatedLayer : public MixerLayer {
 public:
  GatedLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
             double out_std, bool retnet)
      : H_(spec.num_heads), C_(c.chunk_size), key_dim_(key_dim(c, spec)), value_dim_(value_dim(c, spec)),
        retnet_(retnet) {
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
  double mixing_flops_per_token(int64_t) const override {
    // GLA's gated products cost about twice the plain ones (the decays enter every product).
    return (retnet_ ? 1.0 : 2.0) * chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  static constexpr int64_t kGateLowRank = 16;
  static constexpr double kGateNormalizer = 16;  // fla's gate_logit_normalizer

  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t,
               const ops::Segments& segments) const override {
    // q, k, v, the output gate and GLA's low-rank gate: one product of x (declared in this order)
    const std::vector<Variable> proj = retnet_ ? project(p, x, {&q_proj_, &k_proj_, &v_proj_, &g_proj_})
                                               : project(p, x, {&q_proj_, &k_proj_, &v_proj_, &g_proj_, &gk_low_});
    Variable q = heads(proj[0], H_), k = heads(proj[1], H_), v = heads(proj[2], H_);
    // GLA's log-gate logsigmoid(gk_proj(x)) / 16: gk_proj.1, its bias and the activation one node
    auto log_gate = [&] {
      return ops::linear_activation(proj[4], p[gk_up_.weight], p[gk_up_.bias], Activation::logsigmoid,
                                    1.0 / kGateNormalizer);
    };
    Variable g = retnet_ ? Variable(retnet_gate(q.shape(), x.dtype(), x.device())) : heads(log_gate(), H_);
    ops::MixerOutput out = ops::gla(q, k, v, g, initial(s, "h"), linear_options(C_, s, x, segments));
    keep(s, out);
    return gated_norm_output(p, o_proj_, proj[3], g_norm_, out.o);  // o_proj(silu(g_proj(x)) * RMSNorm(o))
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

  int64_t H_, C_, key_dim_, value_dim_;
  bool retnet_;
  Linear q_proj_, k_proj_, v_proj_, g_proj_, gk_low_, gk_up_, o_proj_;
  RMSNorm g_norm_;
};

int64_t state_size(const ModelConfig& c, const LayerSpec& spec, int64_t) { return matrix_state_size(c, spec); }

FlaFields fla_fields(const ModelConfig& c, const LayerSpec& spec) {
  return {{"expand_k", c.resolved_expand_k(spec.mixer)},
          {"expand_v", c.expand_v},
          {"num_kv_heads", nullptr},
          {"feature_map", nullptr},
          {"use_short_conv", false},
          {"use_output_gate", true},
          {"use_gk", true},
          {"use_gv", false},
          {"clamp_min", nullptr},
          {"elementwise_affine", true},
          {"attn_mode", std::string("chunk")}};
}

}  // namespace

extern const MixerDescriptor gla = [] {
  MixerDescriptor d;
  d.name = "gla";
  d.summary = "gated linear attention: a data-dependent decay per key dim";
  d.default_expand_k = 0.5;
  d.make = make_layer<GatedLayer, /*retnet=*/false>;
  d.state_size = state_size;
  d.op = &ops::gla_op;
  d.fla_model_type = "gla";
  d.fla_architecture = "GLAForCausalLM";
  d.fla_fields = fla_fields;
  return d;
}();

extern const MixerDescriptor retnet = [] {
  MixerDescriptor d;
  d.name = "retnet";
  d.summary = "RetNet's retention: a fixed decay 1 - 2^(-5-h) per head, on GLA's kernels";
  d.make = make_layer<GatedLayer, /*retnet=*/true>;
  d.state_size = state_size;
  d.op = &ops::gla_op;
  d.fla_unsupported = "retnet has no fla equivalent: fla's RetNet applies rotary position embedding to q and k "
                     "inside its retention layers, linattn's RetNet does not";
  return d;
}();

}  // namespace linattn::mixers
