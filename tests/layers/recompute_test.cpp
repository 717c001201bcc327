// Activation recomputation of the model's blocks (train.recompute, autograd/checkpoint.h): for every
// mixer of the registry the losses and parameter gradients of selective and full recomputation are
// those of none bit for bit, on the CPU in float32 and float64; the memory held falls; decoding and
// evaluation record nothing and give the same logits.
#include "autograd/checkpoint.h"
#include "core/memory.h"
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

// Bytes of activation storage alive at the peak of one forward and backward of `model` in `mode`,
// outside an arena (each tensor freed with its last view: what an arena that frees slices holds),
// and what is left after it besides the gradients.
struct Peak {
  size_t peak, left;
};
Peak activation_peak(Model& model, Recompute mode, const Tensor& ids) {
  model.set_recompute(mode);
  model.params().zero_grad();
  const size_t before = storage_bytes(Device::cpu);
  reset_storage_peak(Device::cpu);
  {
    Variable loss = model.loss(ids, ids);
    backward(loss);
  }
  return {storage_peak_bytes(Device::cpu) - before, storage_bytes(Device::cpu) - before};
}

TEST(Recompute, ThePeakFallsWithEachModeAndNothingIsLeft) {
  // Eight GLA blocks, hidden 64, 2 x 128 tokens (chunks of 16). Per token and block, none keeps
  // ~21 [hidden]-sized tensors (projections, gates, norm outputs, the core's output and states,
  // SwiGLUs, sums) and the gradient of each; selective keeps the products' outputs (~10) and full
  // only the block's input, and each recomputes one block at a time. The tape of none holds every
  // block's tensors at the peak, the others one block's plus what they keep: selective well under
  // none's, full at most a third of it with eight blocks.
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 64
  num_hidden_layers: 8
  num_heads: 2
  chunk_size: 16
  mixer: gla
train: {max_steps: 1}
)",
                          "eight.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  Tensor ids = Tensor::empty({2, 128}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int32_t>()[i] = int32_t(i * 7 % 11);
  const Peak none = activation_peak(model, Recompute::none, ids);
  const Peak selective = activation_peak(model, Recompute::selective, ids);
  const Peak full = activation_peak(model, Recompute::full, ids);
  std::printf("activation peak: none %zu, selective %zu (%.2f), full %zu (%.2f) bytes\n", none.peak, selective.peak,
              double(selective.peak) / double(none.peak), full.peak, double(full.peak) / double(none.peak));
  EXPECT_LT(double(selective.peak), 0.75 * double(none.peak));
  EXPECT_LT(double(full.peak), double(none.peak) / 3);
  EXPECT_LT(full.peak, selective.peak);
  // The gradients live in the parameters' buffer: after backward nothing of the step is left.
  EXPECT_EQ(none.left, 0u);
  EXPECT_EQ(selective.left, 0u);
  EXPECT_EQ(full.left, 0u);
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
