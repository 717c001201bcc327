// The memory plan of --dry-run (train/memory_plan.h): the parameters, the bf16 copy and the
// activation peak it predicts from its small probes against those of the whole model, built and
// run, for every recompute mode: in float32 and with bf16 products on the CPU, with bf16 products on
// cuda (in the emulation where there is no GPU).
#include "train/memory_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cuda/runtime.h"
#include "kernels/backend.h"
#include "train/optimizer.h"
#include "train_testing.h"

namespace linattn {
namespace {

// A hybrid of three layer kinds (GLA, sliding-window and global attention), five layers, on
// sequences longer than the probes'.
Config hybrid(const std::string& device, const std::string& precision, const std::string& recompute) {
  return parse_config(R"(model:
  vocab_size: 300
  hidden_size: 64
  num_hidden_layers: 5
  num_heads: 2
  layers: [gla, {mixer: attention, window_size: 32}, gla, attention, gla]
data:
  path: unused
  seq_len: 320
train:
  batch_size: 4
  max_steps: 1
  out_dir: unused
)",
                      "hybrid.yaml",
                      {"train.device=" + device, "train.precision=" + precision, "train.recompute=" + recompute});
}

struct Measured {
  int64_t parameters = 0;
  double bf16_weights = 0, activations = 0;
};

// The whole model, built and run as the trainer does.
Measured measure(const Config& config) {
  const Device device = config.train.device == "cuda" ? Device::cuda : Device::cpu;
  const MatmulPrecision before = backend::matmul_precision();
  backend::set_matmul_precision(config.train.precision == "bf16" ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  Model model(config.model, DType::f32);
  model.params().initialize(config.train.seed);
  model.set_recompute(config.train.recompute);
  model.params().to(device);
  if (config.train.precision == "bf16") {
    model.params().keep_bf16_copy();
    refresh_bf16_weights(model.params());
  }
  Arena arena(device);
  Measured m;
  m.parameters = model.params().layout().total();
  m.bf16_weights = model.params().has_bf16_copy() ? double(model.params().bf16_values().all().nbytes()) : 0;
  m.activations = double(activation_peaks(model, arena, config.train.batch_size, config.data.seq_len).high_water);
  backend::set_matmul_precision(before);
  return m;
}

void expect_prediction_matches(const Config& config) {
  const MemoryPlan plan = plan_memory(config);
  const Measured m = measure(config);
  EXPECT_EQ(plan.parameters, m.parameters);
  EXPECT_EQ(plan.weights, 4.0 * double(m.parameters));
  EXPECT_EQ(plan.moments, 8.0 * double(m.parameters));
  EXPECT_EQ(plan.bf16_weights, m.bf16_weights);
  EXPECT_EQ(plan.micro_batch, config.train.batch_size);
  ASSERT_GT(m.activations, 0);
  const double error = plan.activations / m.activations - 1;
  EXPECT_LT(std::abs(error), 0.05) << "predicted " << plan.activations << " bytes, measured " << m.activations;
  std::printf("%s %s recompute %-9s activations: predicted %.0f, measured %.0f bytes (%+.2f%%)\n",
              config.train.device.c_str(), config.train.precision.c_str(),
              ops::recompute_name(config.train.recompute), plan.activations, m.activations, 100 * error);
}

void expect_prediction_matches(const std::string& device, const std::vector<std::string>& precisions) {
  for (const std::string& precision : precisions)
    for (const char* recompute : {"none", "selective", "full"}) {
      SCOPED_TRACE(precision + ", recompute " + recompute);
      expect_prediction_matches(hybrid(device, precision, recompute));
    }
}

TEST(MemoryPlan, PredictsTheWholeModelOnTheCpu) { expect_prediction_matches("cpu", {"fp32", "bf16"}); }

TEST(CudaMemoryPlan, PredictsTheWholeModelOnCuda) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU, and not the CUDA emulation build";
  expect_prediction_matches("cuda", {"bf16"});  // a GPU's precision (float32 is the CPU test's tape)
}

// A vocabulary so large that the loss makes its logits in chunks of 1,024 rows (ops::kLossChunkBytes)
// while the probes' 128 tokens are one chunk: the logits' bytes per row (their gradient is bf16 with
// bf16 products) are measured, not assumed, and capped at a chunk.
TEST(MemoryPlan, PredictsALossOfMoreRowsThanAChunk) {
  for (const char* precision : {"fp32", "bf16"})
    for (const char* recompute : {"none", "full"}) {
      SCOPED_TRACE(std::string(precision) + ", recompute " + recompute);
      expect_prediction_matches(parse_config(R"(model:
  vocab_size: 65536
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 1
  mixer: gla
data:
  path: unused
  seq_len: 1024
train:
  batch_size: 2
  max_steps: 1
  out_dir: unused
)",
                                             "large-vocabulary.yaml",
                                             {std::string("train.precision=") + precision,
                                              std::string("train.recompute=") + recompute}));
    }
}

// Each rank's micro-batch is its share of the global batch, or train.micro_batch_size.
TEST(MemoryPlan, MicroBatchPerRank) {
  Config config = hybrid("cpu", "fp32", "none");
  EXPECT_EQ(plan_memory(config, 2).micro_batch, 2);
  config = with_settings(config, {"train.micro_batch_size=1"});
  EXPECT_EQ(plan_memory(config, 2).micro_batch, 1);
}

// The report names every part, and on cuda whether the run fits.
TEST(MemoryPlan, ReportNamesThePartsAndTheFit) {
  const Config config = hybrid("cpu", "bf16", "selective");
  const std::string report = describe(plan_memory(config), config);
  for (const char* part : {"weights", "bf16 weight copy", "gradients", "AdamW moments", "activations at peak", "total",
                           "recompute selective", "micro-batch 4 x 320 tokens"})
    EXPECT_NE(report.find(part), std::string::npos) << part << " missing from:\n" << report;
  EXPECT_EQ(report.find("fit"), std::string::npos) << "a CPU run names no GPU:\n" << report;
  MemoryPlan huge = plan_memory(config);
  huge.activations = 1e14;  // 100 TB: more than any GPU, emulated or not
  const std::string cuda_report = describe(huge, with_settings(config, {"train.device=cuda"}));
  EXPECT_NE(cuda_report.find("does NOT fit"), std::string::npos) << cuda_report;
}

}  // namespace
}  // namespace linattn
