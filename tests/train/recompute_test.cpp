// train.recompute in a whole run: training with selective or full recomputation takes the steps of
// recompute: none bit for bit (the same losses, the same weights after them), through the
// trainer's arena, gradient accumulation and document boundaries, in float32 and with bf16
// products; --dry-run measures with it. And what a block keeps, in the arena, in both precisions.
#include <unistd.h>

#include <filesystem>

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
  Tensor weights;
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
  TrainSummary s = trainer.run();
  r.losses = s.losses;
  r.weights = trainer.model().params().values().all().clone();
  fs::remove_all(dir);
  return r;
}

TEST(TrainRecompute, SelectiveAndFullTakeTheStepsOfNoneBitForBit) {
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    const TrainedRun none = train("none", precision);
    ASSERT_EQ(none.losses.size(), 3u);
    EXPECT_GT(none.measured_activations, 0u);
    for (const char* mode : {"selective", "full"}) {
      SCOPED_TRACE(mode);
      const TrainedRun got = train(mode, precision);
      ASSERT_EQ(got.losses.size(), none.losses.size());
      for (size_t i = 0; i < got.losses.size(); ++i) EXPECT_EQ(got.losses[i], none.losses[i]) << "step " << i + 1;
      EXPECT_EQ(testing::bitwise_difference(got.weights, none.weights), "");
      EXPECT_GT(got.measured_activations, 0u);
    }
  }
}

// What one GLA block keeps in the arena, per token, at the peak: the difference between 8 and 4
// blocks over 4. selective keeps the block's input and its products' outputs (944 floats at hidden
// 64: tests/layers/recompute_test.cpp counts them), full the input only (64), with bf16 products as
// with float32 ones.
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
    EXPECT_NEAR(per_block(ops::Recompute::selective), 944, 944 * 0.05);
    EXPECT_NEAR(per_block(ops::Recompute::full), 64, 64 * 0.05);
    EXPECT_GT(per_block(ops::Recompute::none), 1.2 * per_block(ops::Recompute::selective));
  }
}

}  // namespace
}  // namespace linattn
