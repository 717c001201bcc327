// What a training step asks of the GPU, counted by the CUDA emulation (cuda_emulation/counters.h):
// between a step's start and its update being queued the host neither reads device memory nor
// waits for the device (the step's loss, gradient norm and skip decision are read once, after);
// the optimizer is three launches (the norm's two passes with the clip and skip decision, AdamW
// over the whole flat buffer); and the step's stream operations are counted and printed.
// Emulation build only: a GPU has no such counters.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train/trainer.h"
#include "train_testing.h"

#ifdef LINATTN_CUDA_EMULATION
#include <cuda_runtime.h>

#include "cuda_emulation/counters.h"
#endif

namespace linattn {
namespace {

#ifdef LINATTN_CUDA_EMULATION

// bench.yaml's model (GLA with sliding-window attention at layers 2 and 5), on a few State of the
// Union addresses (a small validation split keeps the final evaluation quick).
std::string shards() {
  static const std::string dir = [] {
    std::string train;
    for (const char* year : {"1790_george_washington_n", "1791_george_washington_n"}) {
      std::ifstream in(std::string("data/corpus/sotu/") + year + ".txt");
      train += std::string(std::istreambuf_iterator<char>(in), {});
    }
    EXPECT_GT(train.size(), 10000u) << "the default corpus is missing: run ./scripts/fetch-data";
    return testing::text_shards("step-sync-shards", train, train.substr(0, 1024));
  }();
  return dir;
}

struct StepCount {
  cuda_emu::Counters queued;               // from the step's start to its update being queued
  std::map<std::string, int64_t> kernels;  // the kernels launched then, by name
};

std::string base_name(std::string s) {
  s = s.substr(0, s.find('<'));
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

// Trains `overrides` on configs/bench.yaml for `steps` steps on the emulated GPU, op by op (a replayed
// CUDA graph is one operation: tests/train/cuda_graph_test.cpp), and counts each step.
std::vector<StepCount> count_steps(int64_t steps, std::vector<std::string> overrides) {
  const std::string out = (std::filesystem::temp_directory_path() / ("linattn-step-sync-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(out);
  const std::vector<std::string> run = {"data.path=" + shards(), "train.device=cuda", "train.out_dir=" + out,
                                        "train.max_steps=" + std::to_string(steps), "train.log_every=1",
                                        "train.eval_every=0", "checkpoint.every=0", "train.sample_every=0",
                                        "train.cuda_graphs=false"};
  overrides.insert(overrides.begin(), run.begin(), run.end());
  Trainer trainer(load_config("configs/bench.yaml", overrides));
  std::vector<StepCount> counts;
  cuda_emu::LaunchRecorder recorder;
  cuda_emu::Counters start;
  size_t first = 0;
  trainer.set_step_hooks({[&](int64_t) {
                            start = cuda_emu::counters();
                            first = recorder.launches().size();
                          },
                          [&](int64_t) {
                            StepCount c{cuda_emu::counters() - start, {}};
                            const auto& all = recorder.launches();
                            for (size_t i = first; i < all.size(); ++i) ++c.kernels[base_name(all[i].name)];
                            counts.push_back(c);
                          }});
  trainer.run();
  std::filesystem::remove_all(out);
  return counts;
}

std::string describe(const cuda_emu::Counters& c) {
  std::ostringstream os;
  os << c.stream_operations() << " stream operations (" << c.kernels << " kernels, " << c.library_calls
     << " cuBLAS/NCCL calls, " << c.memsets << " memsets, " << c.host_to_device << " copies from the host, "
     << c.device_to_device << " on the device, " << c.device_to_host << " to the host), " << c.host_waits
     << " host waits";
  return os.str();
}

TEST(CudaStepSync, TheHostNeverWaitsInTheMiddleOfAStep) {
  // Two micro-batches a step (the losses stay on the device), clipping at 1.0 (bench.yaml's default).
  const std::vector<StepCount> steps =
      count_steps(3, {"model.hidden_size=32", "model.num_heads=2", "data.seq_len=32", "train.batch_size=2",
                      "train.micro_batch_size=1", "train.grad_clip=1.0"});
  ASSERT_EQ(steps.size(), 3u);
  for (size_t s = 0; s < steps.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s + 1));
    const StepCount& c = steps[s];
    std::printf("step %zu, until its update is queued: %s\n", s + 1, describe(c.queued).c_str());
    EXPECT_EQ(c.queued.device_to_host, 0) << "the host read device memory in the middle of the step";
    EXPECT_EQ(c.queued.host_waits, 0) << "the host waited for the device in the middle of the step";
    // the optimizer: the norm's two passes, the last with the clip and skip decision, and one AdamW
    auto launches = [&](const char* k) { return c.kernels.count(k) ? c.kernels.at(k) : 0; };
    EXPECT_EQ(launches("adamw_kernel"), 1);
    EXPECT_EQ(launches("step_control_kernel"), 1);
    EXPECT_EQ(launches("sum_squares_partial_kernel"), 1);
    EXPECT_EQ(launches("step_loss_kernel"), 1);
    EXPECT_EQ(launches("sum_squares_final_kernel"), 0) << "a gradient norm for the host in the middle of the step";
  }
}

// The stream operations of one step at a shape given by LINATTN_STEP_SHAPE (settings separated by
// spaces, over configs/bench.yaml; default: the 85.5M model of docs/gpu-runs, which the emulation
// takes hours to run a step of). Run by hand, e.g. (one line) with the 85.5M model's layers and head
// size (64) at a width the emulation steps through in a minute (docs/gpu.md, "What a step launches"):
//   LINATTN_STEP_SHAPE='model.hidden_size=192 model.num_hidden_layers=12 model.num_heads=3 data.seq_len=64
//   train.precision=bf16' build-emulated/test_train --gtest_also_run_disabled_tests --gtest_filter='*LaunchesPerStep*'
TEST(CudaStepSync, DISABLED_LaunchesPerStepAtAShape) {
  const char* env = std::getenv("LINATTN_STEP_SHAPE");
  std::istringstream settings(env ? env : "model.hidden_size=768 model.num_hidden_layers=12 model.num_heads=12 "
                                          "data.seq_len=2048");
  std::vector<std::string> overrides;
  for (std::string s; settings >> s;) overrides.push_back(s);
  const std::vector<StepCount> steps = count_steps(2, overrides);
  ASSERT_EQ(steps.size(), 2u);
  std::printf("settings: %s\n", env ? env : "the 85.5M shape");
  std::printf("step 2, until its update is queued: %s\n", describe(steps[1].queued).c_str());
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [name, n] : steps[1].kernels) by_count.emplace_back(n, name);
  std::sort(by_count.rbegin(), by_count.rend());
  for (const auto& [n, name] : by_count) std::printf("  %6lld %s\n", (long long)n, name.c_str());
}

#else
TEST(CudaStepSync, NeedsTheEmulationBuild) { GTEST_SKIP() << "the counters are the CUDA emulation's"; }
#endif

}  // namespace
}  // namespace linattn
