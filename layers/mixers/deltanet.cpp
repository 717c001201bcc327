// DeltaNet and Gated DeltaNet (fla's DeltaNet and GatedDeltaNet layers): projections -> short
// convolution -> SiLU -> L2-normalized q, k; beta = sigmoid(b_proj(x)); per-head RMSNorm of the
// output, gated by silu(g_proj(x)) in the gated form, whose state also decays by exp(a) per token.
#include <cmath>

#include "autograd/decoding.h"
#include "layers/mixers/parts.h"

namespace linattn::mixers {

namespace {

// How Gated DeltaNet makes its per-head log-decay a from x:
// fla:        a = -exp(A_log) * softplus(a_proj(x) + dt_bias)   (fla's GatedDeltaNet; parameters A_log, dt_bias)
// logsigmoid: a = logsigmoid(a_proj(x) + a_proj.bias)            (linattn's first form; parameter a_proj.bias)
// A config without the key gets fla; a checkpoint whose saved config lacks it was written with
// logsigmoid (train/checkpoint.h keeps it so).
enum class GdnDecay { fla, logsigmoid };

struct GatedDeltaNetSettings {
  GdnDecay decay = GdnDecay::fla;
};

const ShortConvSettings& conv_settings(const ModelConfig& c) { return c.settings.of<ShortConvSettings>(); }
GdnDecay decay(const ModelConfig& c) { return c.settings.of<GatedDeltaNetSettings>().decay; }

class DeltaLayer : public MixerLayer {
 public:
  DeltaLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
             double out_std, bool gated)
      : H_(spec.num_heads), C_(c.chunk_size), key_dim_(key_dim(c, spec)), value_dim_(value_dim(c, spec)),
        gated_(gated), short_conv_(conv_settings(c).use_short_conv), decay_(decay(c)) {
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, key_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, key_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, value_dim_, std);
    b_proj_ = Linear(p, prefix + ".b_proj", c.hidden_size, H_, std);
    if (short_conv_) {
      // PyTorch's default Conv1d init: uniform(+-1/sqrt(fan_in)), fan_in = the kernel width.
      const int64_t W = conv_settings(c).conv_size;
      Init conv = Init::Uniform(1.0 / std::sqrt(double(W)));
      q_conv_ = p.add(prefix + ".q_conv1d.weight", {key_dim_, W}, conv, false);
      k_conv_ = p.add(prefix + ".k_conv1d.weight", {key_dim_, W}, conv, false);
      v_conv_ = p.add(prefix + ".v_conv1d.weight", {value_dim_, W}, conv, false);
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
  double mixing_flops_per_token(int64_t) const override {
    // The WY form adds K K^T, the triangular solve and W, U, W S0 to the linear-attention products.
    return 2.0 * chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t,
               const ops::Segments& segments) const override {
    const std::vector<Variable> qkvb = project(p, x, {&q_proj_, &k_proj_, &v_proj_, &b_proj_});
    Variable q = feature(p, qkvb[0], q_conv_, s ? &s->tensors["q_conv"] : nullptr, segments);
    Variable k = feature(p, qkvb[1], k_conv_, s ? &s->tensors["k_conv"] : nullptr, segments);
    Variable v = feature(p, qkvb[2], v_conv_, s ? &s->tensors["v_conv"] : nullptr, segments);
    q = ops::l2norm(heads(q, H_), 1e-6);
    k = ops::l2norm(heads(k, H_), 1e-6);
    v = heads(v, H_);
    Variable beta = ops::sigmoid(qkvb[3]);  // [B, T, H]
    Variable h0 = initial(s, "h");
    ops::MixerOptions options = linear_options(C_, s, x, segments);
    if (!gated_) {
      ops::MixerOutput out = ops::deltanet(q, k, v, beta, h0, options);
      keep(s, out);
      return o_proj_(p, merge_heads(o_norm_(p, out.o)));
    }
    Variable a = decay_ == GdnDecay::fla ? ops::gdn_decay(a_proj_(p, x), p[p_A_log_], p[p_dt_bias_])
                                         : ops::linear_activation(x, p[a_proj_.weight], p[p_a_bias_],
                                                                  Activation::logsigmoid, 1.0);
    ops::MixerOutput out = ops::gated_deltanet(q, k, v, beta, a, h0, options);
    keep(s, out);
    return gated_norm_output(p, o_proj_, g_proj_(p, x), o_norm_, out.o);  // o_proj(silu(g_proj(x)) * RMSNorm(o))
  }
  // window: the convolution's last inputs when decoding (nullptr in training).
  Variable feature(const Parameters& p, const Variable& x, int conv, Tensor* window,
                   const ops::Segments& segments) const {
    if (!short_conv_) return ops::silu(x);
    return ops::silu(window ? ops::short_conv_continue(x, p[conv], *window) : ops::short_conv(x, p[conv], {}, segments));
  }
  int64_t H_, C_, key_dim_, value_dim_;
  bool gated_, short_conv_;
  GdnDecay decay_;
  Linear q_proj_, k_proj_, v_proj_, b_proj_, a_proj_, g_proj_, o_proj_;
  int q_conv_ = -1, k_conv_ = -1, v_conv_ = -1, p_a_bias_ = -1, p_A_log_ = -1, p_dt_bias_ = -1;
  RMSNorm o_norm_;
};

// The dk x dv state per head, and the short convolutions' last conv_size - 1 inputs of q, k and v.
int64_t state_size(const ModelConfig& c, const LayerSpec& spec, int64_t) {
  const ShortConvSettings& sc = conv_settings(c);
  const int64_t conv = sc.use_short_conv ? (sc.conv_size - 1) * (2 * key_dim(c, spec) + value_dim(c, spec)) : 0;
  return matrix_state_size(c, spec) + conv;
}

FlaFields deltanet_fields(const ModelConfig& c, const LayerSpec& spec) {
  return {{"expand_k", c.resolved_expand_k(spec.mixer)},
          {"expand_v", c.expand_v},
          {"use_gate", false},
          {"use_short_conv", conv_settings(c).use_short_conv},
          {"conv_size", conv_settings(c).conv_size},
          {"use_beta", true},
          {"use_output_norm", true},
          {"qk_norm", std::string("l2")},
          {"qk_activation", std::string("silu")},
          {"allow_neg_eigval", false},
          {"attn_mode", std::string("chunk")}};
}

std::vector<std::string> gated_problems(const ModelConfig& c, const LayerSpec& spec) {
  std::vector<std::string> problems;
  if (decay(c) != GdnDecay::fla)
    problems.push_back("gated_deltanet with gated_deltanet_decay: logsigmoid has no fla equivalent (fla's decay is "
                       "-exp(A_log) * softplus(a_proj(x) + dt_bias)); train with gated_deltanet_decay: fla");
  // fla derives the value head dim as int(head_dim * expand_v): it must come out exact.
  const int64_t kd = key_dim(c, spec), vd = value_dim(c, spec);
  const int64_t head_dim = kd / spec.num_heads, head_v_dim = vd / spec.num_heads;
  if (double(head_dim) * (double(vd) / double(kd)) != double(head_v_dim))
    problems.push_back("gated_deltanet's value head dim " + std::to_string(head_v_dim) + " is not exactly head_dim " +
                       std::to_string(head_dim) + " x expand_v in floating point, as fla computes it");
  return problems;
}

FlaFields gated_fields(const ModelConfig& c, const LayerSpec& spec) {
  const int64_t kd = key_dim(c, spec), vd = value_dim(c, spec);
  return {{"head_dim", kd / spec.num_heads},
          {"expand_v", double(vd) / double(kd)},
          {"num_v_heads", nullptr},
          {"use_gate", true},
          {"use_short_conv", conv_settings(c).use_short_conv},
          {"conv_size", conv_settings(c).conv_size},
          {"allow_neg_eigval", false},
          {"attn_mode", std::string("chunk")}};
}

}  // namespace

extern const MixerDescriptor deltanet = [] {
  MixerDescriptor d;
  d.name = "deltanet";
  d.config_keys = {use_short_conv_key(), conv_size_key()};
  d.summary = "DeltaNet: the delta rule S += beta k (v - S^T k)^T, chunkwise in WY form";
  d.make = make_layer<DeltaLayer, /*gated=*/false>;
  d.state_size = state_size;
  d.op = &ops::deltanet_op;
  d.fla_model_type = "delta_net";
  d.fla_architecture = "DeltaNetForCausalLM";
  d.fla_fields = deltanet_fields;
  return d;
}();

extern const MixerDescriptor gated_deltanet = [] {
  MixerDescriptor d;
  d.name = "gated_deltanet";
  d.config_keys = {
      use_short_conv_key(),
      conv_size_key(),
      setting_choice("gated_deltanet_decay", &GatedDeltaNetSettings::decay,
                    {{GdnDecay::fla, {"fla", "-exp(A_log) * softplus(a_proj(x) + dt_bias), as fla computes it"}},
                     {GdnDecay::logsigmoid, {"logsigmoid", "logsigmoid(a_proj(x) + bias), linattn's first form"}}},
                    "Gated DeltaNet's decay: `fla` = `-exp(A_log) * softplus(a_proj(x) + dt_bias)` (fla's, with "
                    "its init), `logsigmoid` = `logsigmoid(a_proj(x) + bias)` (linattn's first form; a checkpoint "
                    "whose config lacks the key has it)"),
  };
  d.summary = "Gated DeltaNet: the delta rule with a data-dependent decay per head";
  d.make = make_layer<DeltaLayer, /*gated=*/true>;
  d.state_size = state_size;
  d.op = &ops::gated_deltanet_op;
  d.fla_model_type = "gated_deltanet";
  d.fla_architecture = "GatedDeltaNetForCausalLM";
  d.fla_problems = gated_problems;
  d.fla_fields = gated_fields;
  return d;
}();

}  // namespace linattn::mixers
