// Activation recomputation of the model's blocks (train.recompute, autograd/checkpoint.h): for every
// mixer of the registry the losses and parameter gradients of selective and full recomputation are
// those of none bit for bit, on the CPU in float32 and float64; the memory held falls; decoding and
// evaluation record nothing and give the same logits.
#include <malloc.h>

#include <cmath>

#include "autograd/checkpoint.h"
#include "layers/decoder.h"
#include "layers/mixer.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using ops::Recompute;

// Every mixer of the registry as configured by default (attention: global), then windowed
// grouped-query attention.
std::vector<std::string> every_layer() {
  std::vector<std::string> layers = mixer_names();
  layers.push_back("{mixer: attention, window_size: 3, num_kv_heads: 1}");
  return layers;
}

class RecomputeEveryMixer : public ::testing::TestWithParam<std::string> {};

TEST_P(RecomputeEveryMixer, SelectiveGradientsAreThoseOfNoneBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Model model(testing::two_blocks_of(GetParam()), dtype);
    model.params().initialize(3);
    EXPECT_EQ(testing::difference_from_none(model, Recompute::selective), "");
  }
}

TEST_P(RecomputeEveryMixer, FullGradientsAreThoseOfNoneBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Model model(testing::two_blocks_of(GetParam()), dtype);
    model.params().initialize(3);
    EXPECT_EQ(testing::difference_from_none(model, Recompute::full), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, RecomputeEveryMixer, ::testing::ValuesIn(every_layer()), [](const auto& info) {
  return info.param[0] == '{' ? std::string("windowed_gqa_attention") : info.param;
});

// Bytes of the heap in use (glibc: every malloc arena, and the blocks it maps): outside an arena each
// tensor has its own storage, freed with its last view.
size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// What one forward of `model` in `mode` leaves for its backward (bytes), and what is left once the
// backward has run (the gradients live in the parameters' buffer: only the loss).
struct Held {
  double kept, left;
};
Held held(Model& model, Recompute mode, const Tensor& ids) {
  model.set_recompute(mode);
  model.params().zero_grad();
  const double before = double(heap_in_use());
  Held h;
  {
    Variable loss = model.loss(ids, ids);
    h.kept = double(heap_in_use()) - before;
    backward(loss);
  }
  h.left = double(heap_in_use()) - before;
  return h;
}

// `layers` GLA blocks, hidden 64 (key dim 32, value dim 64, MLP 256), two heads.
Model gla_model(int64_t layers) {
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 64
  num_hidden_layers: )" + std::to_string(layers) + R"(
  num_heads: 2
  mixer: gla
train: {max_steps: 1}
)",
                          "gla.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  return model;
}

TEST(Recompute, EachBlockKeepsWhatTheModeSaysAndBackwardReleasesIt) {
  // What one block keeps for backward, per token: the difference between 8 and 4 blocks, over 4.
  //   full:      its output (the next block's input): hidden = 64 floats;
  //   selective: that and its products' outputs: q, k (32 each), v (64), the gate's low-rank 16 and
  //              its 32, g_proj (64), o_proj (64), the MLP's gate and up (256 each) and down (64):
  //              944 floats;
  //   none:      the block's input (the sum its first norm read, 64), the normed input the
  //              projections read (64), q, k, v (128), the gate's low rank and its second product's
  //              output (16 + 32), the core's log-gate and chunk states (32 + 16), the gated norm's
  //              input and gate (128), the MLP's residual sum and normed input (128), the MLP's gate
  //              and up (512), the norms' rstd (4): 1,124 floats.
  // The heap also holds the tape's own bookkeeping (nodes, closures): under 2% here.
  Tensor ids = Tensor::empty({2, 256}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int32_t>()[i] = int32_t(i * 7 % 11);
  const double tokens = double(ids.numel());
  Model eight = gla_model(8), four = gla_model(4);
  held(four, Recompute::none, ids);  // the first step's one-time allocations (kernel scratch)
  double per_block[3];
  for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
    const Held a = held(eight, mode, ids), b = held(four, mode, ids);
    per_block[int(mode)] = (a.kept - b.kept) / 4 / tokens / sizeof(float);
    std::printf("%s: a block keeps %.1f floats per token (8 blocks: %.0f bytes kept, %.0f left after backward)\n",
                ops::recompute_name(mode), per_block[int(mode)], a.kept, a.left);
    // Nothing of the step is left after backward (the gradients live in the parameters' buffer)
    // but the heap's own change: under 1% of what was kept.
    EXPECT_LT(std::abs(a.left), 0.01 * a.kept + 4096) << ops::recompute_name(mode);
  }
  EXPECT_NEAR(per_block[int(Recompute::full)], 64, 64 * 0.02);
  EXPECT_NEAR(per_block[int(Recompute::selective)], 944, 944 * 0.02);
  EXPECT_NEAR(per_block[int(Recompute::none)], 1124, 1124 * 0.02);
}

TEST(Recompute, DecodingAndEvaluationRecordNothingAndGiveTheSameLogits) {
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 16
  num_heads: 2
  intermediate_size: 24
  chunk_size: 4
  num_hidden_layers: 3
  layers: [gla, deltanet, {mixer: attention, window_size: 3}]
train: {max_steps: 1}
)",
                          "tiny.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(5);
  Tensor ids = Tensor::empty({1, 9}, DType::i32);
  for (int64_t i = 0; i < 9; ++i) ids.data<int32_t>()[i] = int32_t(i * 3 % 11);
  auto run = [&](Recompute mode) {
    model.set_recompute(mode);
    std::vector<Tensor> out;
    {
      NoGrad no_grad;
      out.push_back(model.logits(ids).value().clone());
    }
    Decoder decoder(model, 1);
    out.push_back(decoder.prefill_all(ids));
    out.push_back(decoder.step({4}));
    EXPECT_EQ(tape_size(), 0u) << ops::recompute_name(mode);
    return out;
  };
  const std::vector<Tensor> none = run(Recompute::none);
  for (Recompute mode : {Recompute::selective, Recompute::full}) {
    const std::vector<Tensor> got = run(mode);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(testing::bitwise_difference(got[i], none[i]), "") << ops::recompute_name(mode) << ", output " << i;
  }
}

}  // namespace
}  // namespace linattn
