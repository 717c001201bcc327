// train.recompute in a whole run: training with selective or full recomputation takes the steps of
// recompute: none bit for bit in float32 (the same losses, the same weights after them), through
// the trainer's arena, gradient accumulation and document boundaries, and tracks them under bf16;
// --dry-run measures with it. And what a block keeps, in the arena, in both precisions.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "kernels/backend.h"
#include "recompute_testing.h"
#include "train/memory_plan.h"
#include "train/optimizer.h"
#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

struct TrainedRun {
  std::vector<double> losses;
  Tensor initial_weights, weights;
  size_t measured_activations;
};

TrainedRun train(const std::string& recompute, const std::string& precision) {
  const std::string dir =
      (fs::temp_directory_path() / ("linattn-recompute-" + recompute + "-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  // 3 steps of 2 micro-batches of 4 x 64 tokens (the tiny hybrid: GLA, then windowed attention).
  Trainer trainer(testing::tiny_config(dir, {"train.max_steps=3", "train.micro_batch_size=4",
                                             "train.recompute=" + recompute, "train.precision=" + precision,
                                             "checkpoint.every=0"}));
  EXPECT_EQ(ops::recompute_name(trainer.model().recompute()), recompute);
  TrainedRun r;
  r.measured_activations = trainer.measure_activation_bytes();
  r.initial_weights = trainer.model().params().values().all().clone();
  TrainSummary s = trainer.run();
  r.losses = s.losses;
  r.weights = trainer.model().params().values().all().clone();
  fs::remove_all(dir);
  return r;
}

TEST(TrainRecompute, SelectiveAndFullTakeTheStepsOfNoneBitForBit) {
  const TrainedRun none = train("none", "fp32");
  ASSERT_EQ(none.losses.size(), 3u);
  EXPECT_GT(none.measured_activations, 0u);
  for (const char* mode : {"selective", "full"}) {
    SCOPED_TRACE(mode);
    const TrainedRun got = train(mode, "fp32");
    ASSERT_EQ(got.losses.size(), none.losses.size());
    for (size_t i = 0; i < got.losses.size(); ++i) EXPECT_EQ(got.losses[i], none.losses[i]) << "step " << i + 1;
    EXPECT_EQ(testing::bitwise_difference(got.weights, none.weights), "");
    EXPECT_GT(got.measured_activations, 0u);
  }
}

// Under bf16 the replays start from the block's input, and take the kept products, rounded to bf16
// (autograd/checkpoint.h): the first loss is none's bit for bit (the forward is the same), the
// weights after it move by bf16 roundings of the gradients: relative 2^-9 per element of what the
// backward reads, of the same order as bf16's own difference from float32 in
// CpuBf16Training.LossesTrackTheFloat32Run. AdamW moves a weight by about lr a step whatever the
// size of its gradient, so a weight whose gradient is rounding noise may move either way: the
// updates are compared as a whole. Bar: 1e-3 relative on the later losses, and the updates (the
// weights' moves over the run) within 10% of none's in root mean square.
TEST(TrainRecompute, SelectiveAndFullTrackNoneUnderBf16) {
  const TrainedRun none = train("none", "bf16");
  ASSERT_EQ(none.losses.size(), 3u);
  // the weights' moves over the run, and the root mean square of a - b
  auto update = [](const TrainedRun& r) {
    const Tensor after = r.weights.to(DType::f64), before = r.initial_weights.to(DType::f64);
    std::vector<double> u(size_t(after.numel()));
    for (size_t i = 0; i < u.size(); ++i) u[i] = after.data<double>()[i] - before.data<double>()[i];
    return u;
  };
  auto rms = [](const std::vector<double>& a, const std::vector<double>& b) {
    double sum = 0;
    for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - (b.empty() ? 0.0 : b[i])) * (a[i] - (b.empty() ? 0.0 : b[i]));
    return std::sqrt(sum / double(a.size()));
  };
  const std::vector<double> none_update = update(none);
  for (const char* mode : {"selective", "full"}) {
    SCOPED_TRACE(mode);
    const TrainedRun got = train(mode, "bf16");
    ASSERT_EQ(got.losses.size(), none.losses.size());
    EXPECT_EQ(testing::bitwise_difference(got.initial_weights, none.initial_weights), "");
    EXPECT_EQ(got.losses[0], none.losses[0]);
    for (size_t i = 1; i < got.losses.size(); ++i)
      EXPECT_NEAR(got.losses[i], none.losses[i], 1e-3 * none.losses[i]) << "step " << i + 1;
    const double gap = rms(update(got), none_update) / rms(none_update, {});
    EXPECT_LE(gap, 0.1);
    EXPECT_NE(testing::bitwise_difference(got.weights, none.weights), "")
        << "bit for bit: were the replays' inputs rounded?";
    std::printf("bf16 %s against none: losses %.6f %.6f %.6f against %.6f %.6f %.6f; updates %.4f of none's "
                "(root mean square)\n", mode, got.losses[0], got.losses[1], got.losses[2], none.losses[0],
                none.losses[1], none.losses[2], gap);
  }
}

// What one GLA block keeps in the arena, per token, at the peak: the difference between 8 and 4
// blocks over 4. selective keeps the block's input and its products' outputs (944 floats at hidden
// 64: tests/layers/recompute_test.cpp counts them), full the input only (64); under bf16 both in
// bf16, half the bytes (autograd/saved.h).
TEST(TrainRecompute, SelectiveKeepsTheProductsInBothPrecisions) {
  const int64_t tokens = 2 * 256;
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    backend::set_matmul_precision(std::string(precision) == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32);
    double peak[2][3];  // [4 or 8 blocks][mode]
    for (int k = 0; k < 2; ++k) {
      const Config c = parse_config("model:\n  vocab_size: 11\n  hidden_size: 64\n  num_hidden_layers: " +
                                        std::to_string(4 * (k + 1)) + "\n  num_heads: 2\n  mixer: gla\n"
                                        "train: {max_steps: 1}\n", "gla.yaml");
      Model model(c.model, DType::f32);
      model.params().initialize(4);
      if (std::string(precision) == "bf16") {
        model.params().keep_bf16_copy();
        refresh_bf16_weights(model.params());
      }
      Arena arena;
      for (ops::Recompute mode : {ops::Recompute::none, ops::Recompute::selective, ops::Recompute::full}) {
        model.set_recompute(mode);
        peak[k][int(mode)] = double(activation_peaks(model, arena, 2, 256).live);
      }
    }
    backend::set_matmul_precision(MatmulPrecision::f32);
    auto per_block = [&](ops::Recompute mode) { return (peak[1][int(mode)] - peak[0][int(mode)]) / 4 / tokens / 4; };
    const double share = std::string(precision) == "bf16" ? 0.5 : 1.0;  // float32s' worth of bytes
    EXPECT_NEAR(per_block(ops::Recompute::selective), 944 * share, 944 * share * 0.05);
    EXPECT_NEAR(per_block(ops::Recompute::full), 64 * share, 64 * share * 0.05);
    for (ops::Recompute mode : {ops::Recompute::none, ops::Recompute::selective, ops::Recompute::full})
      std::printf("%s, %s: a block keeps %.1f floats' worth per token\n", precision, ops::recompute_name(mode),
                  per_block(mode));
    // none keeps what selective recomputes (the two normed inputs the products read, the gated norm's
    // input, the MLP's residual sum: 64 each; the core's log-gate and chunk states, 32 + 16; the
    // rstds, 4) and not the two branch outputs selective keeps (o_proj's and down's, 64 each): 180
    // float32s more at hidden 64 (1,124 against 944; in bf16 all but the rstds and states at half)
    EXPECT_GT(per_block(ops::Recompute::none), per_block(ops::Recompute::selective) + 150 * share);
  }
}

}  // namespace
}  // namespace linattn
