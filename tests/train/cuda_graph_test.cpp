// train.cuda_graphs: the step's work captured at the run's second step and replayed from then on
// trains exactly as launching it op by op (losses and weights bit for bit, with accumulation,
// clipping and a learning rate that changes every step), and a replayed step is one graph launch
// after the uploads of its tokens and AdamW's step numbers, with no host read or wait.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing.h"
#include "train/trainer.h"
#include "train_testing.h"

#ifdef LINATTN_CUDA_EMULATION
#include "cuda_emulation/counters.h"
#endif

namespace linattn {
namespace {

struct Run {
  std::vector<double> losses;
  Tensor weights;
#ifdef LINATTN_CUDA_EMULATION
  std::vector<cuda_emu::Counters> steps;  // from each step's start to its update being queued
#endif
};

Run train(bool graphs, const std::vector<std::string>& more = {}) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("linattn-graph-run-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(out);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "The state of the union is strong, number " + std::to_string(i) + ". ";
  static const std::string shards = testing::text_shards("graphs", text, text.substr(0, 2000));
  std::vector<std::string> overrides = {"model.hidden_size=32", "data.seq_len=32", "data.document_boundaries=cross",
                                        "train.device=cuda", "train.batch_size=4", "train.micro_batch_size=2",
                                        "train.grad_clip=0.05", "train.warmup_steps=3", "train.max_steps=5",
                                        "train.log_every=1", "checkpoint.every=0", "train.sample_every=0",
                                        std::string("train.cuda_graphs=") + (graphs ? "true" : "false")};
  overrides.insert(overrides.end(), more.begin(), more.end());
  Trainer trainer(testing::tiny_config_on(shards, out, overrides));
  Run run;
#ifdef LINATTN_CUDA_EMULATION
  cuda_emu::Counters start;
  trainer.set_step_hooks({[&](int64_t) { start = cuda_emu::counters(); },
                          [&](int64_t) { run.steps.push_back(cuda_emu::counters() - start); }});
#endif
  run.losses = trainer.run().losses;
  run.weights = trainer.model().params().values().all().to(Device::cpu);
  std::filesystem::remove_all(out);
  return run;
}

void expect_same_training(const std::vector<std::string>& settings) {
  const Run eager = train(false, settings), replayed = train(true, settings);
  ASSERT_EQ(eager.losses.size(), 5u);
  ASSERT_EQ(replayed.losses.size(), 5u);
  for (size_t s = 0; s < eager.losses.size(); ++s) EXPECT_EQ(replayed.losses[s], eager.losses[s]) << "step " << s + 1;
  EXPECT_EQ(testing::compare(replayed.weights, eager.weights).max_abs, 0.0);
#ifdef LINATTN_CUDA_EMULATION
  ASSERT_EQ(replayed.steps.size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    const cuda_emu::Counters& c = replayed.steps[s];
    EXPECT_EQ(c.device_to_host, 0);
    EXPECT_EQ(c.host_waits, 0);
    EXPECT_EQ(c.graph_launches, s == 0 ? 0 : 1) << "the first step runs op by op, the second is captured";
    if (s < 2) continue;
    // the uploads of two micro-batches' inputs and targets and of AdamW's step numbers, then the graph
    EXPECT_EQ(c.host_to_device, 2 * 2 + 1);
    EXPECT_EQ(c.stream_operations(), c.host_to_device + 1);
    EXPECT_LT(c.stream_operations() * 20, eager.steps[s].stream_operations())
        << eager.steps[s].stream_operations() << " stream operations op by op";
  }
#endif
}

TEST(CudaGraphTraining, AReplayedStepTrainsAsLaunchingItOpByOp) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  expect_same_training({});
}

TEST(CudaGraphTraining, AReplayedBf16StepWithRecomputationTrainsAsLaunchingItOpByOp) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  expect_same_training({"train.precision=bf16", "train.recompute=selective"});
}

}  // namespace
}  // namespace linattn
