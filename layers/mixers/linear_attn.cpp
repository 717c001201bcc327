// Linear attention (fla's LinearAttention layer): q, k through the feature map phi, o = phi(q) S
// (normalized by phi(q) z when `normalize`), per-head RMSNorm, output projection.
#include "layers/mixers/parts.h"

namespace linattn::mixers {

namespace {

struct LinearAttentionSettings {
  std::string feature_map = "elu1";  // identity | elu1 | relu
  bool normalize = false;            // the normalized form
};

const LinearAttentionSettings& settings(const ModelConfig& c) { return c.settings.of<LinearAttentionSettings>(); }

FeatureMap feature_map(const ModelConfig& c) {
  const std::string& phi = settings(c).feature_map;
  return phi == "identity" ? FeatureMap::identity : phi == "relu" ? FeatureMap::relu : FeatureMap::elu1;
}

class LinearAttentionLayer : public MixerLayer {
 public:
  LinearAttentionLayer(Parameters& p, const std::string& prefix, const ModelConfig& c, const LayerSpec& spec,
                       double std, double out_std)
      : H_(spec.num_heads), C_(c.chunk_size), key_dim_(key_dim(c, spec)), value_dim_(value_dim(c, spec)),
        normalize_(settings(c).normalize), phi_(feature_map(c)) {
    q_proj_ = Linear(p, prefix + ".q_proj", c.hidden_size, key_dim_, std);
    k_proj_ = Linear(p, prefix + ".k_proj", c.hidden_size, key_dim_, std);
    v_proj_ = Linear(p, prefix + ".v_proj", c.hidden_size, value_dim_, std);
    norm_ = RMSNorm(p, prefix + ".norm", value_dim_ / H_, c.norm_eps);
    o_proj_ = Linear(p, prefix + ".o_proj", value_dim_, c.hidden_size, out_std);
  }
  double mixing_flops_per_token(int64_t) const override {
    return chunk_mixing_flops(H_, key_dim_ / H_, value_dim_ / H_, C_);
  }

 private:
  Variable mix(const Parameters& p, const Variable& x, MixerState* s, int64_t,
               const ops::Segments& segments) const override {
    const std::vector<Variable> qkv = project(p, x, {&q_proj_, &k_proj_, &v_proj_});
    Variable q = heads(qkv[0], H_), k = heads(qkv[1], H_), v = heads(qkv[2], H_);
    ops::MixerOutput out = ops::linear_attention(q, k, v, initial(s, "h"), phi_, normalize_,
                                                 linear_options(C_, s, x, segments), initial(s, "z"));
    keep(s, out);
    return o_proj_(p, merge_heads(norm_(p, out.o)));
  }
  int64_t H_, C_, key_dim_, value_dim_;
  bool normalize_;
  FeatureMap phi_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_;
  RMSNorm norm_;
};

// The dk x dv state per head, and the key_dim normalizer of the normalized form.
int64_t state_size(const ModelConfig& c, const LayerSpec& spec, int64_t) {
  return matrix_state_size(c, spec) + (settings(c).normalize ? key_dim(c, spec) : 0);
}

std::vector<std::string> fla_problems(const ModelConfig& c, const LayerSpec&) {
  if (!settings(c).normalize) return {};
  return {"linear_attn with normalize: true is not exported: the normalized form's epsilon is not the one of "
          "fla's norm_feature_map; train with normalize: false"};
}

FlaFields fla_fields(const ModelConfig& c, const LayerSpec& spec) {
  const std::string& phi = settings(c).feature_map;
  return {{"expand_k", c.resolved_expand_k(spec.mixer)},
          {"expand_v", c.expand_v},
          {"num_kv_heads", nullptr},
          {"feature_map", phi == "elu1" ? std::string("elu") : phi},  // fla's 'elu' is elu(x) + 1
          {"tie_feature_map_qk", false},
          {"norm_q", false},
          {"norm_k", false},
          {"norm_feature_map", false},
          {"elementwise_affine", true},
          {"attn_mode", std::string("chunk")}};
}

}  // namespace

extern const MixerDescriptor linear_attn = [] {
  MixerDescriptor d;
  d.name = "linear_attn";
  d.config_keys = {
      setting_key("feature_map", &LinearAttentionSettings::feature_map, "linear attention's feature map")
          .one_of({{"identity", ""}, {"elu1", ""}, {"relu", ""}}),
      setting_key("normalize", &LinearAttentionSettings::normalize, "linear attention's normalized form"),
  };
  d.summary = "linear attention with a feature map (feature_map, normalize)";
  d.make = make_layer<LinearAttentionLayer>;
  d.state_size = state_size;
  d.op = &ops::linear_attn_op;
  d.fla_model_type = "linear_attn";
  d.fla_architecture = "LinearAttentionForCausalLM";
  d.fla_problems = fla_problems;
  d.fla_fields = fla_fields;
  return d;
}();

}  // namespace linattn::mixers
