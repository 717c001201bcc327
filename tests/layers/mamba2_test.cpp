// The Mamba2 layer's gated norm is fla's and mamba_ssm's RMSNormGated with group_size =
// inner width / n_groups: each group of heads is normalized on its own, not the whole inner width.
#include <cmath>

#include "layers/mixer.h"
#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

// With the norm's weight at 1 and out_proj the identity, the layer's output is the normalized
// y * silu(z) itself, so each group of heads must come out with mean square ss / (ss + eps) ~ 1.
// The z rows of the first group are scaled 10x so that the groups differ in size by far: a norm
// over the whole width would leave the first group's mean square near 2 and the second's near 0.
TEST(Mamba2Layer, GatedNormIsPerGroupOfHeads) {
  const ModelConfig c = parse_config(R"(model:
  mixer: mamba2
  vocab_size: 11
  hidden_size: 16
  num_hidden_layers: 1
  num_heads: 4
  n_groups: 2
  state_size: 4
  chunk_size: 4
train: {max_steps: 1}
)",
                                     "mamba2.yaml")
                               .model;
  const int64_t I = 16, G = 2, Ig = I / G, T = 9;
  Parameters p;
  std::unique_ptr<MixerLayer> layer = mixer_descriptor("mamba2").make(p, "m", c, c.layers[0], 0.5, 0.5);
  p.allocate(DType::f64);
  p.initialize(5);
  auto param = [&](const std::string& name) { return p.values()[p.layout().find("m." + name)]; };
  const Tensor out_proj = param("out_proj.weight"), in_proj = param("in_proj.weight"), norm = param("norm.weight");
  ASSERT_EQ(out_proj.shape(), (Shape{16, I}));
  out_proj.fill_(0.0);
  for (int64_t i = 0; i < I; ++i) out_proj.data<double>()[i * I + i] = 1;
  for (int64_t i = 0; i < Ig * 16; ++i) in_proj.data<double>()[i] *= 10;  // z's rows [0, Ig): group 0
  ASSERT_EQ(norm.shape(), (Shape{I}));
  norm.fill_(1.0);

  Rng rng(2);
  const Tensor x = testing::random_tensor({1, T, 16}, rng);
  NoGrad no_grad;
  const Tensor o = layer->forward(p, Variable(x), {}).value();
  double worst = 0;
  std::vector<double> group_ms(G, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g) {
      double ms = 0;
      for (int64_t j = 0; j < Ig; ++j) ms += std::pow(o.data<double>()[t * I + g * Ig + j], 2) / double(Ig);
      group_ms[size_t(g)] += ms / double(T);
      worst = std::max(worst, std::abs(ms - 1));
    }
  // eps (1e-6) against mean squares of ~1e-2 and more before the norm: within 1e-3 of 1.
  EXPECT_LE(worst, 1e-3) << "mean squares of the groups, averaged over tokens: " << group_ms[0] << ", "
                         << group_ms[1];
}

}  // namespace
}  // namespace linattn
