// train.precision: bf16 on the CPU: a run tracks the float32 run within bf16's tolerance, converts
// the weights once per step (the optimizer's bf16 copy), resumes from its checkpoints bit for bit,
// and runs on a CPU without bfloat16 products too (widened to float32, with a note at start-up).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/backend.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The bars are the CUDA run's (CudaTraining.Bf16LossesTrackTheFloat32CpuRun in device_run_test.cpp),
// for the same reason: every GEMM input is rounded to bf16 (relative 2^-9 each, ~2^-8 = 3.9e-3 for a
// product) and the sums stay float32. At step 1 the weights are equal and the loss moves by those
// roundings averaged over the tokens: bar 1e-3, a quarter of one product's rounding. Later steps
// also carry the weights' drift from rounded gradients: bar 2e-2. The measured figures are printed
// (and quoted in README: Training on a GPU, Mixed precision). On the CPU only the GEMMs are bf16
// (attention and the mixers stay float32), so the run is, if anything, closer.
constexpr double kFirstStepTolerance = 1e-3;
constexpr double kLossTolerance = 2e-2;

class CpuBf16Training : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-cpu-bf16-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The tiny GLA + sliding-window hybrid on three State of the Union addresses (a 1 KiB validation
  // split keeps the final evaluation short), 20 steps.
  std::vector<double> train(const std::string& precision, std::vector<std::string> overrides = {},
                            const std::string& resume = "", const std::string& name = "") {
    for (const char* o : {"train.max_steps=20", "train.warmup_steps=5", "train.log_every=10"}) overrides.insert(overrides.begin(), o);
    overrides.push_back("train.precision=" + precision);
    Config c = testing::tiny_config_on(shards(), dir_ + "/" + (name.empty() ? precision : name), overrides);
    Trainer trainer(c, resume);
    std::vector<double> losses = trainer.run().losses;
    backend::set_matmul_precision(MatmulPrecision::f32);  // the trainer's setting is process-wide
    return losses;
  }

  static const std::string& shards() {
    static const std::string data = [] {
      std::string text;
      for (const char* year : {"1790_george_washington_n", "1791_george_washington_n", "1792_george_washington_n"})
        text += read_text(std::string("data/corpus/sotu/") + year + ".txt");
      EXPECT_GT(text.size(), 30000u) << "the default corpus is missing: run ./scripts/fetch-data";
      return testing::text_shards("cpu-bf16-shards", text, text.substr(0, 1024));
    }();
    return data;
  }

  std::string dir_;
};

TEST_F(CpuBf16Training, LossesTrackTheFloat32Run) {
  const std::vector<double> f32 = train("fp32"), bf16 = train("bf16");
  ASSERT_EQ(f32.size(), 20u);
  ASSERT_EQ(bf16.size(), 20u);
  double worst = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    const double relative = std::abs(bf16[i] - f32[i]) / f32[i];
    worst = std::max(worst, relative);
    EXPECT_LE(relative, i == 0 ? kFirstStepTolerance : kLossTolerance)
        << "step " << i + 1 << ": bf16 " << bf16[i] << " against " << f32[i];
  }
  const double first = std::abs(bf16[0] - f32[0]) / f32[0];
  std::printf("bf16 on the cpu against float32: relative loss difference %.2e at step 1 (tolerance %.0e), at most "
              "%.2e in 20 steps (tolerance %.0e)\n", first, kFirstStepTolerance, worst, kLossTolerance);
  // Not float32 in disguise: the bf16 products move the first loss by more than float32's roundings
  // (~1e-7); measured 5.5e-6 here.
  EXPECT_GT(first, 1e-6) << "the bf16 run's first loss equals the float32 one: were the products rounded?";
}

// The weights reach the products through their bf16 copy, written from the float32 masters: by one
// conversion of the whole flat buffer before the first step (after initialization or a checkpoint),
// then by AdamW's own pass in each step; no other conversion reads the masters, and after the run
// the copy is the masters rounded.
TEST_F(CpuBf16Training, TheWeightsAreConvertedOncePerStep) {
  Config c = testing::tiny_config_on(shards(), dir_ + "/count",
                                     {"train.max_steps=3", "train.precision=bf16", "train.log_every=10"});
  Trainer trainer(c);
  const Parameters& p = trainer.model().params();
  ASSERT_TRUE(p.has_bf16_copy());
  const char* masters = static_cast<const char*>(p.values().all().raw());
  const size_t bytes = p.values().all().nbytes();
  backend::ConversionLog log;
  trainer.run();
  backend::set_matmul_precision(MatmulPrecision::f32);  // the trainer's setting is process-wide
  int64_t whole = 0, partial = 0, others = 0;
  for (const backend::ConversionLog::Entry& e : log.entries()) {
    const char* from = static_cast<const char*>(e.from);
    if (from >= masters && from < masters + bytes) (e.n == p.layout().total() ? whole : partial) += 1;
    else others += 1;
  }
  EXPECT_EQ(whole, 1) << "whole-buffer conversions of the masters: one at start (AdamW writes the copy itself)";
  EXPECT_EQ(partial, 0) << "conversions of single weights";
  EXPECT_GT(others, 0) << "no activation was converted: did the products run in bf16?";
  const Tensor& copy = p.bf16_values().all();
  const Tensor rounded = p.values().all().to(DType::bf16);
  ASSERT_EQ(copy.nbytes(), rounded.nbytes());
  EXPECT_EQ(std::memcmp(copy.raw(), rounded.raw(), copy.nbytes()), 0)
      << "the bf16 copy after 3 steps is not the updated masters rounded";
  std::printf("3 bf16 steps: %lld conversions of the weight buffer, %lld of activations and gradients\n",
              (long long)whole, (long long)others);
}

// A checkpoint keeps the float32 masters and moments: a bf16 run resumed from its step 3 continues
// bit for bit as the uninterrupted run (the bf16 copy is rewritten from the loaded masters), and the
// same checkpoint resumes in float32 with exactly those masters.
TEST_F(CpuBf16Training, ResumesFromItsCheckpointsBitForBit) {
  const std::vector<std::string> ckpt{"train.max_steps=6", "checkpoint.every=3", "checkpoint.keep_last=5"};
  const std::vector<double> full = train("bf16", ckpt, "", "full");
  const std::string at3 = checkpoint_path(dir_ + "/full", 3);
  const std::vector<double> resumed = train("bf16", ckpt, at3, "resumed");
  ASSERT_EQ(full.size(), 6u);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed[i], full[3 + i]) << "step " << 4 + i;
  Config bf16 = testing::tiny_config_on(shards(), dir_ + "/a", {"train.precision=bf16"});
  Config fp32 = testing::tiny_config_on(shards(), dir_ + "/b", {"train.precision=fp32"});
  Trainer a(bf16, at3), b(fp32, at3);
  const Tensor& wa = a.model().params().values().all();
  const Tensor& wb = b.model().params().values().all();
  ASSERT_EQ(wa.dtype(), DType::f32);
  EXPECT_EQ(std::memcmp(wa.raw(), wb.raw(), wa.nbytes()), 0) << "the masters differ between the precisions";
  backend::set_matmul_precision(MatmulPrecision::f32);
}

// Where oneDNN finds no bf16 products the run still trains: the products widen their bf16 operands
// to float32 (the same sums, slower), and start-up says so, naming train.precision's line.
// DNNL_MAX_CPU_ISA=AVX2 makes any CPU such a CPU.
TEST_F(CpuBf16Training, WithoutBf16ProductsTheRunTrainsWidenedWithANote) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/bf16.yaml") << "model: {vocab_size: 257, hidden_size: 32, num_heads: 2, num_hidden_layers: 1}\n"
                                        "data: {path: " << shards() << ", seq_len: 32, val_tokens: 512}\n"
                                        "train:\n  max_steps: 2\n  batch_size: 2\n  precision: bf16\n";
  const testing::CommandResult r = testing::run_command("DNNL_MAX_CPU_ISA=AVX2 " +
                                                        testing::built_binary("linattn-train") + " " + dir_ +
                                                        "/bf16.yaml --out " + dir_ + "/run");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: " + dir_ + "/bf16.yaml:6:14: train.precision is bf16, but this CPU has no bfloat16 "
                          "products: oneDNN finds "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the bf16 products widen their operands to float32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("products bf16"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace linattn
