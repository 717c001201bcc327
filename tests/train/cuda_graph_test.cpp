// train.cuda_graphs: the step's work captured at the run's second step and replayed from then on
// trains exactly as launching it op by op (losses and weights bit for bit, with accumulation,
// clipping and a learning rate that changes every step; over documents, whose sequence tables are
// padded to one size and grow when a batch outgrows them), and a replayed step is one graph launch
// after the uploads of its tokens (and tables) and AdamW's step numbers, with no host read or wait.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "testing.h"
#include "train/trainer.h"
#include "train_testing.h"

#ifdef LINATTN_CUDA_EMULATION
#include "cuda_emulation/counters.h"
#endif

namespace linattn {
namespace {

struct TrainedRun {
  std::vector<double> losses;
  Tensor weights;
#ifdef LINATTN_CUDA_EMULATION
  std::vector<cuda_emu::Counters> steps;  // from each step's start to its update being queued
#endif
};

// Byte-level shards of 60 documents of 1 to 3 bytes, then 50 of 30 to 59, removed at exit: a
// micro-batch's two 32-token rows hold 2 to 40 documents, depending on where they fall.
std::string short_document_shards() {
  namespace fs = std::filesystem;
  static const std::string dir = [] {
    const fs::path d = fs::temp_directory_path() / ("linattn-graph-documents-" + std::to_string(getpid()));
    fs::create_directories(d / "text");
    Rng rng(7);
    for (int i = 0; i < 120; ++i) {
      std::string doc = "Document " + std::to_string(i) + ": the state of the union is strong. ";
      doc.resize(size_t(i < 60 ? 1 + rng.next_u64() % 3 : 30 + rng.next_u64() % 30), '.');
      char name[32];
      std::snprintf(name, sizeof name, "%03d.txt", i);
      std::ofstream(d / "text" / name) << doc;
    }
    data::PrepareOptions o;
    o.inputs = {(d / "text").string()};
    o.out_dir = (d / "shards").string();
    o.val_globs = {"11*"};
    data::prepare(o);
    return d.string();
  }();
  static struct Cleanup {
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup;
  return dir + "/shards";
}

TrainedRun train(bool graphs, const std::vector<std::string>& more = {}, std::string* log = nullptr) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("linattn-graph-run-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(out);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "The state of the union is strong, number " + std::to_string(i) + ". ";
  static const std::string shards = testing::text_shards("graphs", text, text.substr(0, 2000));
  bool documents = false;
  for (const std::string& m : more) documents |= m == "data.document_boundaries=reset";
  std::vector<std::string> overrides = {"model.hidden_size=32", "data.seq_len=32", "data.document_boundaries=cross",
                                        "train.device=cuda", "train.batch_size=4", "train.micro_batch_size=2",
                                        "train.grad_clip=0.05", "train.warmup_steps=3", "train.max_steps=5",
                                        "train.log_every=1", "checkpoint.every=0", "train.sample_every=0",
                                        std::string("train.cuda_graphs=") + (graphs ? "true" : "false")};
  overrides.insert(overrides.end(), more.begin(), more.end());
  Trainer trainer(testing::tiny_config_on(documents ? short_document_shards() : shards, out, overrides));
  TrainedRun run;
#ifdef LINATTN_CUDA_EMULATION
  cuda_emu::Counters start;
  trainer.set_step_hooks({[&](int64_t) { start = cuda_emu::counters(); },
                          [&](int64_t) { run.steps.push_back(cuda_emu::counters() - start); }});
#endif
  if (log) ::testing::internal::CaptureStdout();
  run.losses = trainer.run().losses;
  if (log) *log = ::testing::internal::GetCapturedStdout();
  run.weights = trainer.model().params().values().all().to(Device::cpu);
  std::filesystem::remove_all(out);
  return run;
}

void expect_same_losses_and_weights(const TrainedRun& replayed, const TrainedRun& eager, size_t steps) {
  ASSERT_EQ(eager.losses.size(), steps);
  ASSERT_EQ(replayed.losses.size(), steps);
  for (size_t s = 0; s < steps; ++s) EXPECT_EQ(replayed.losses[s], eager.losses[s]) << "step " << s + 1;
  EXPECT_EQ(testing::compare(replayed.weights, eager.weights).max_abs, 0.0);
}

#ifdef LINATTN_CUDA_EMULATION
// Whether step s (from 0) of `replayed` was a replay: the uploads of two micro-batches' inputs and
// targets (and sequence tables, `tables`) and of AdamW's step numbers, then the graph launch, and
// far fewer stream operations than op by op. Every step from the second launches a graph (the
// second, and one that captures anew, as they capture it), and none reads the device or waits.
bool replayed_step(const TrainedRun& replayed, const TrainedRun& eager, size_t s, bool tables) {
  SCOPED_TRACE("step " + std::to_string(s + 1));
  const cuda_emu::Counters& c = replayed.steps[s];
  EXPECT_EQ(c.device_to_host, 0);
  EXPECT_EQ(c.host_waits, 0);
  EXPECT_EQ(c.graph_launches, s == 0 ? 0 : 1) << "the first step runs op by op, the second is captured";
  const bool replay = c.host_to_device == 2 * (tables ? 3 : 2) + 1 && c.stream_operations() == c.host_to_device + 1;
  if (replay) {
    EXPECT_LT(c.stream_operations() * 20, eager.steps[s].stream_operations())
        << eager.steps[s].stream_operations() << " stream operations op by op";
  }
  return replay;
}
#endif

void expect_same_training(const std::vector<std::string>& settings) {
  const TrainedRun eager = train(false, settings), replayed = train(true, settings);
  expect_same_losses_and_weights(replayed, eager, 5);
#ifdef LINATTN_CUDA_EMULATION
  ASSERT_EQ(replayed.steps.size(), 5u);
  for (size_t s = 0; s < 5; ++s) EXPECT_EQ(replayed_step(replayed, eager, s, false), s >= 2) << "step " << s + 1;
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

// document_boundaries: reset: each step's sequence tables, padded to one size, are uploaded into the
// buffers the graph reads; a micro-batch with more documents than they hold makes its step capture
// anew with larger ones. Documents of 3 to 60 tokens in 32-token rows: the counts vary, and grow past
// the first step's within the run.
TEST(CudaGraphTraining, AReplayedStepOverDocumentsTrainsAsLaunchingItOpByOp) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  const std::vector<std::string> settings = {"data.document_boundaries=reset", "train.max_steps=8"};
  std::string log;
  const TrainedRun eager = train(false, settings), replayed = train(true, settings, &log);
  expect_same_losses_and_weights(replayed, eager, 8);
  EXPECT_NE(log.find("is captured anew"), std::string::npos) << log;
#ifdef LINATTN_CUDA_EMULATION
  ASSERT_EQ(replayed.steps.size(), 8u);
  int replays = 0;
  for (size_t s = 0; s < 8; ++s) replays += replayed_step(replayed, eager, s, true);
  EXPECT_GE(replays, 3);
#endif
}

}  // namespace
}  // namespace linattn
