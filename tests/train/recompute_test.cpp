// train.recompute in a whole run: training with selective or full recomputation takes the steps of
// recompute: none bit for bit (the same losses, the same weights after them), through the
// trainer's arena, gradient accumulation and document boundaries; --dry-run measures with it.
#include <unistd.h>

#include <filesystem>

#include "recompute_testing.h"
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

TrainedRun train(const std::string& recompute) {
  const std::string dir =
      (fs::temp_directory_path() / ("linattn-recompute-" + recompute + "-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  // 3 steps of 2 micro-batches of 4 x 64 tokens (the tiny hybrid: GLA, then windowed attention).
  Trainer trainer(testing::tiny_config(dir, {"train.max_steps=3", "train.micro_batch_size=4",
                                             "train.recompute=" + recompute, "checkpoint.every=0"}));
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
  const TrainedRun none = train("none");
  ASSERT_EQ(none.losses.size(), 3u);
  EXPECT_GT(none.measured_activations, 0u);
  for (const char* mode : {"selective", "full"}) {
    SCOPED_TRACE(mode);
    const TrainedRun got = train(mode);
    ASSERT_EQ(got.losses.size(), none.losses.size());
    for (size_t i = 0; i < got.losses.size(); ++i) EXPECT_EQ(got.losses[i], none.losses[i]) << "step " << i + 1;
    EXPECT_EQ(testing::bitwise_difference(got.weights, none.weights), "");
    EXPECT_GT(got.measured_activations, 0u);
  }
}

}  // namespace
}  // namespace linattn
