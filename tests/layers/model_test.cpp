// The whole model in float64: every parameter's gradient through all six mixer layers, the
// MLPs, norms, embedding and loss, against central finite differences.
#include "layers/model.h"

#include <omp.h>

#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

ModelConfig tiny_hybrid() {
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 8
  num_hidden_layers: 6
  num_heads: 2
  intermediate_size: 12
  chunk_size: 4
  layers:
    - linear_attn
    - gla
    - retnet
    - deltanet
    - gated_deltanet
    - {mixer: attention, window_size: 3, num_kv_heads: 1}
train: {max_steps: 1}
)",
                          "tiny.yaml");
  return c.model;
}

TEST(Model, EveryParameterGradientMatchesFiniteDifferences) {
  // Thousands of forward passes of a tiny model: one thread avoids fork/join overhead per op.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Model model(tiny_hybrid(), DType::f64);
  model.params().initialize(7);
  // Weights 4x the default init so every path carries a gradient well above FD noise.
  Rng rng(3);
  const Tensor& all = model.params().values().all();
  for (int64_t i = 0; i < all.numel(); ++i) all.data<double>()[i] *= 4;
  // Gated DeltaNet's decay bias starts at sigmoid(2..6): its gradient would be below the noise of the
  // differences. Strong decays make it count.
  model.params().values()[model.params().layout().find("model.layers.4.attn.a_proj.bias")].fill_(0.0);

  Tensor ids = Tensor::empty({2, 7}, DType::i32), targets = Tensor::empty({2, 7}, DType::i32);
  for (int64_t i = 0; i < 14; ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(11));
    targets.data<int32_t>()[i] = int32_t(rng.below(11));
  }
  model.params().zero_grad();
  backward(model.loss(ids, targets));
  auto loss = [&] {
    NoGrad no_grad;
    return model.loss(ids, targets).value().data<double>()[0];
  };
  for (size_t p = 0; p < model.params().size(); ++p) {
    SCOPED_TRACE(model.params().name(int(p)));
    // Richardson extrapolation of two central differences cancels their h^2 error term: the
    // composed model is far more curved than a single op, so plain differences are only good to ~1e-6.
    const Tensor& w = model.params().values()[int(p)];
    Tensor coarse = testing::finite_difference(loss, w, 2e-5), fine = testing::finite_difference(loss, w, 1e-5);
    Tensor numeric = fine.clone();
    for (int64_t i = 0; i < numeric.numel(); ++i)
      numeric.data<double>()[i] = (4 * fine.data<double>()[i] - coarse.data<double>()[i]) / 3;
    EXPECT_CLOSE(model.params().grads()[int(p)], numeric, 1e-6);
  }
  omp_set_num_threads(threads);
}

TEST(Model, ParameterNamesFollowTheHFConvention) {
  Model model(tiny_hybrid(), DType::f32);
  const FlatLayout& layout = model.params().layout();
  for (const char* name : {"model.embeddings.weight", "model.layers.0.attn.q_proj.weight",
                           "model.layers.1.attn.gk_proj.1.bias", "model.layers.3.attn.q_conv1d.weight",
                           "model.layers.4.attn.a_proj.bias", "model.layers.5.attn.k_proj.weight",
                           "model.layers.5.mlp.gate_proj.weight", "model.layers.5.mlp_norm.weight", "model.norm.weight",
                           "lm_head.weight"})
    EXPECT_GE(layout.find(name), 0) << name;
  // Linear weights are [out, in]: grouped-query attention's k_proj has Hkv * head_dim = 4 rows.
  EXPECT_EQ(layout.entries()[size_t(layout.find("model.layers.5.attn.k_proj.weight"))].shape, (Shape{4, 8}));
}

// On a device without a mixer's kernels, the model names the first layer that cannot run there.
TEST(Model, UnsupportedDeviceNamesTheLayer) {
  const ModelConfig c = tiny_hybrid();  // layer 0 linear attention, layer 1 GLA, ...
  Model model(c, DType::f32);
  EXPECT_EQ(model.unsupported_on(Device::cpu), "");
  EXPECT_EQ(model.unsupported_on(Device::cuda),
            "model.layers.0 (linear_attn): the linear attention mixer has no CUDA kernel yet");
  ModelConfig gla_only = c;
  gla_only.layers.erase(gla_only.layers.begin());
  gla_only.num_hidden_layers = int64_t(gla_only.layers.size());
  EXPECT_EQ(Model(gla_only, DType::f32).unsupported_on(Device::cuda),
            "model.layers.0 (gla): the GLA mixer has no CUDA kernel yet");
}

}  // namespace
}  // namespace linattn
