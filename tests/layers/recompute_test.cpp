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
    testing::expect_same_as_none(model, Recompute::selective);
  }
}

TEST_P(RecomputeEveryMixer, FullGradientsAreThoseOfNoneBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    Model model(testing::two_blocks_of(GetParam()), dtype);
    model.params().initialize(3);
    testing::expect_same_as_none(model, Recompute::full);
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

TEST(Recompute, TheForwardKeepsLessWithEachModeAndBackwardReleasesIt) {
  // Eight GLA blocks, hidden 64, 2 x 256 tokens (chunks of 64). Per token and block, none keeps
  // ~45 [hidden]-sized tensors (the norm outputs, q, k, v, the gate's four, the core's output and
  // states, the output norm and SwiGLU, the sum, the MLP's gate, up and SwiGLU of 2.7 x hidden...),
  // selective the products' outputs (~20) and full the block's input (1): selective keeps under 60%
  // of none, full under 5%.
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 64
  num_hidden_layers: 8
  num_heads: 2
  mixer: gla
train: {max_steps: 1}
)",
                          "eight.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  Tensor ids = Tensor::empty({2, 256}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int32_t>()[i] = int32_t(i * 7 % 11);
  held(model, Recompute::none, ids);  // the first step's one-time allocations (kernel scratch)
  const Held none = held(model, Recompute::none, ids), selective = held(model, Recompute::selective, ids),
             full = held(model, Recompute::full, ids);
  std::printf("kept after the forward: none %.0f, selective %.0f (%.2f), full %.0f (%.3f) bytes\n", none.kept,
              selective.kept, selective.kept / none.kept, full.kept, full.kept / none.kept);
  EXPECT_LT(selective.kept, 0.6 * none.kept);
  EXPECT_LT(full.kept, 0.05 * none.kept);
  // Nothing of the step is left but small change (the heap's own bookkeeping): under 1% of it.
  for (const Held& h : {none, selective, full}) EXPECT_LT(std::abs(h.left), 0.01 * none.kept);
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
