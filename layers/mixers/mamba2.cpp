// Mamba2 (fla's Mamba2 layer, the SSD form): one input projection split into z, x, B, C and the
// time step; a short convolution and SiLU on x, B and C; the SSD scan with per-head decay
// exp(softplus(dt) A) and the D skip (autograd/mamba2.h); then RMSNorm(y * silu(z)) over each group
// of heads and the output projection. The inner width is value_dim = expand_v x hidden_size, split
// into num_heads heads; B and C have state_size (N) channels per group of heads (n_groups).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/decoding.h"
#include "autograd/mamba2.h"
#include "layers/mixers/parts.h"

namespace linattn::mixers {

namespace {

struct Mamba2Settings {
  int64_t state_size = 64;  // N, the dim of B and C (the state per head is N x head dim)
  int64_t n_groups = 1;     // groups of heads sharing B and C
};

const Mamba2Settings& settings(const ModelConfig& c) { return c.settings.of<Mamba2Settings>(); }
int64_t conv_size(const ModelConfig& c) { return c.settings.of<ShortConvSettings>().conv_size; }

class Mamba2Layer : public MixerLayer {
 public:
  Mamba2Layer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec, double std,
              double out_std)
      : H_(spec.num_heads), C_(c.chunk_size), I_(value_dim(c, spec)), G_(settings(c).n_groups),
        N_(settings(c).state_size) {
    // fla's in_proj rows: z [I], x [I], B [G N], C [G N], dt [H]; conv1d over x, B, C (no bias).
    in_proj_ = p.add(prefix + ".in_proj.weight", {2 * I_ + 2 * G_ * N_ + H_, c.hidden_size}, Init::Normal(std), true);
    const int64_t W = conv_size(c);
    Init conv = Init::Uniform(1.0 / std::sqrt(double(W)));  // PyTorch's Conv1d default
    conv_ = p.add(prefix + ".conv1d.weight", {I_ + 2 * G_ * N_, W}, conv, false);
    // fla's init: dt = softplus(dt_bias) with log(dt) ~ U(log 0.001, log 0.1); A = -exp(A_log), -A ~ U(1, 16); D = 1.
    dt_bias_ = p.add(prefix + ".dt_bias", {H_}, Init::SoftplusInverseOfLogUniform(0.001, 0.1), false);
    A_log_ = p.add(prefix + ".A_log", {H_}, Init::LogOfUniform(1.0, 16.0), false);
    D_ = p.add(prefix + ".D", {H_}, Init::Constant(1.0), false);
    // fla's RMSNormGated(group_size = I / n_groups), as mamba_ssm's: each group of heads is normalized
    // on its own (with n_groups 1, the whole inner width).
    norm_ = RMSNorm(p, prefix + ".norm", I_, c.norm_eps, G_);
    out_proj_ = Linear(p, prefix + ".out_proj", I_, c.hidden_size, out_std);
  }
  double mixing_flops_per_token(int64_t) const override { return chunk_mixing_flops(H_, N_, I_ / H_, C_); }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t,
               const ops::Segments& segments) const override {
    const Variable& w = p[in_proj_];
    const int64_t GN = G_ * N_;
    Variable z = ops::linear(x, ops::rows(w, 0, I_));
    Variable xs = conv(p, ops::linear(x, ops::rows(w, I_, I_)), 0, I_, s ? &s->tensors["x_conv"] : nullptr, segments);
    Variable b = conv(p, ops::linear(x, ops::rows(w, 2 * I_, GN)), I_, GN, s ? &s->tensors["B_conv"] : nullptr,
                      segments);
    Variable c = conv(p, ops::linear(x, ops::rows(w, 2 * I_ + GN, GN)), I_ + GN, GN,
                      s ? &s->tensors["C_conv"] : nullptr, segments);
    Variable dt = ops::linear(x, ops::rows(w, 2 * I_ + 2 * GN, H_), p[dt_bias_]);  // [B, T, H], before softplus
    const Shape& bt = x.shape();
    ops::MixerOutput out = ops::mamba2(heads(xs, H_), dt, p[A_log_], ops::view(b, {bt[0], bt[1], G_, N_}),
                                       ops::view(c, {bt[0], bt[1], G_, N_}), p[D_], initial(s, "h"),
                                       linear_options(C_, s, x, segments));
    keep(s, out);
    Variable gated = ops::swiglu(z, merge_heads(out.o));  // y * silu(z), normalized after (fla: norm_before_gate=False)
    return out_proj_(p, norm_(p, gated));
  }
  // The short convolution and SiLU on channels [first, first + n) of conv1d; window: its last
  // inputs when decoding (nullptr in training).
  Variable conv(const Parameters& p, const Variable& x, int64_t first, int64_t n, Tensor* window,
                const ops::Segments& segments) const {
    Variable w = ops::rows(p[conv_], first, n);
    return ops::silu(window ? ops::short_conv_continue(x, w, *window) : ops::short_conv(x, w, {}, segments));
  }
  int64_t H_, C_, I_, G_, N_;
  int in_proj_ = -1, conv_ = -1, dt_bias_ = -1, A_log_ = -1, D_ = -1;
  RMSNorm norm_;
  Linear out_proj_;
};

// The N x P state per head and the convolution's last conv_size - 1 inputs of x, B and C.
int64_t state_size(const ModelConfig& c, const LayerSpec& spec, int64_t) {
  const int64_t I = value_dim(c, spec), N = settings(c).state_size, G = settings(c).n_groups;
  return I * N + (conv_size(c) - 1) * (I + 2 * G * N);
}

// ---- fla's Mamba2ForCausalLM (fla/models/mamba2; mamba_ssm's MambaLMHeadModel has the same layout)

// fla computes its inner width as int(expand * hidden_size) and takes the head count from it and
// head_dim; expand is an integer there unless ours is not.
FlaValue fla_expand(const ModelConfig& c, const LayerSpec& spec) {
  const int64_t I = value_dim(c, spec);
  if (I % c.hidden_size == 0) return I / c.hidden_size;
  return double(I) / double(c.hidden_size);
}

std::vector<std::string> fla_problems(const ModelConfig& c, const LayerSpec& spec) {
  std::vector<std::string> problems;
  const int64_t I = value_dim(c, spec);
  const FlaValue expand = fla_expand(c, spec);
  if (const double* e = std::get_if<double>(&expand); e && int64_t(*e * double(c.hidden_size)) != I)
    problems.push_back("mamba2's inner width " + std::to_string(I) + " is not exactly int(expand x hidden_size) in "
                       "floating point, as fla computes it: choose expand_v so that expand_v x hidden_size is whole");
  return problems;
}

// Mamba2Config's fields (fla/models/mamba2/configuration_mamba2.py), in its order; num_heads and
// the shared fields are written by the exporter. No biases in in_proj, out_proj or the convolution;
// D one per head; the gated norm after the gate (norm_before_gate false) per group of heads.
FlaFields fla_fields(const ModelConfig& c, const LayerSpec& spec) {
  return {{"head_dim", value_dim(c, spec) / spec.num_heads},
          {"state_size", settings(c).state_size},
          {"expand", fla_expand(c, spec)},
          {"conv_kernel", conv_size(c)},
          {"n_groups", settings(c).n_groups},
          {"use_bias", false},
          {"use_conv_bias", false},
          {"hidden_act", std::string("silu")},
          {"D_has_hdim", false},
          {"residual_in_fp32", true},
          {"rmsnorm", true},
          {"norm_before_gate", false},
          {"chunk_size", c.chunk_size}};
}

// Mamba2ForCausalLM's names: backbone.embeddings, backbone.layers.N.norm (our attn_norm),
// backbone.layers.N.mixer.* (our attn.*), backbone.norm_f, lm_head. Its lm_head is not tied to the
// embeddings by fla (no _tied_weights_keys), so a tied model writes the embedding under both names.
std::vector<std::string> fla_names(const ModelConfig& c, const std::string& ours) {
  if (ours == "model.embeddings.weight") {
    if (c.tie_word_embeddings) return {"backbone.embeddings.weight", "lm_head.weight"};
    return {"backbone.embeddings.weight"};
  }
  if (ours == "model.norm.weight") return {"backbone.norm_f.weight"};
  const std::string layers = "model.layers.";
  if (ours.rfind(layers, 0) != 0) return {ours};  // lm_head.weight
  const size_t dot = ours.find('.', layers.size());
  const std::string block = "backbone.layers." + ours.substr(layers.size(), dot - layers.size());
  const std::string rest = ours.substr(dot + 1);
  if (rest == "attn_norm.weight") return {block + ".norm.weight"};
  if (rest.rfind("attn.", 0) == 0) return {block + ".mixer." + rest.substr(5)};
  return {block + "." + rest};  // an MLP's: fla's Mamba2 has none (fla_config says so)
}

}  // namespace

extern const MixerDescriptor mamba2 = [] {
  MixerDescriptor d;
  d.name = "mamba2";
  // config.yaml names them only for a model with Mamba2 layers, so the configs of the other
  // models read as before in builds that predate Mamba2.
  auto has_mamba2 = [](const ModelConfig& m) {
    return std::any_of(m.layers.begin(), m.layers.end(), [](const LayerSpec& l) { return l.mixer == "mamba2"; });
  };
  d.config_keys = {
      setting_key("state_size", &Mamba2Settings::state_size,
                 "Mamba2: N, the channels of B and C per group (a head's state is N x its head dim)")
          .in(1, 1024)
          .written_only_if(has_mamba2),
      setting_key("n_groups", &Mamba2Settings::n_groups, "Mamba2: groups of heads sharing B and C (must divide `num_heads`)")
          .in(1, 1024)
          .written_only_if(has_mamba2),
      conv_size_key(),
  };
  d.config_problem = [](const ModelConfig& c, const LayerSpec& spec) -> std::string {
    const int64_t G = settings(c).n_groups;
    if (spec.num_heads % G == 0) return "";
    return "the mamba2 layers' " + std::to_string(spec.num_heads) + " heads do not split into n_groups (" +
           std::to_string(G) + ") groups: make n_groups divide num_heads";
  };
  d.summary = "Mamba2 (SSD): a data-dependent scalar decay per head, B and C shared by groups of heads";
  d.make = make_layer<Mamba2Layer>;
  d.state_size = state_size;
  d.op = &ops::mamba2_op;
  d.fla_model_type = "mamba2";
  d.fla_architecture = "Mamba2ForCausalLM";
  d.fla_problems = fla_problems;
  d.fla_fields = fla_fields;
  d.fla_mlp = false;
  d.fla_attention = false;
  d.fla_names = fla_names;
  return d;
}();

}  // namespace linattn::mixers
