// train.precision: bf16 on the CPU: where the CPU has bfloat16 products (AVX-512 BF16 or AMX) a run
// tracks the float32 run within bf16's tolerance; where it has none, start-up stops naming the line.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernels/backend.h"
#include "testing.h"
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
  std::vector<double> train(const std::string& precision) {
    static const std::string data = [] {
      std::string text;
      for (const char* year : {"1790_george_washington_n", "1791_george_washington_n", "1792_george_washington_n"})
        text += read_text(std::string("data/corpus/sotu/") + year + ".txt");
      EXPECT_GT(text.size(), 30000u) << "the default corpus is missing: run ./scripts/fetch-data";
      return testing::text_shards("cpu-bf16-shards", text, text.substr(0, 1024));
    }();
    Config c = testing::tiny_config_on(data, dir_ + "/" + precision,
                                       {"train.precision=" + precision, "train.max_steps=20",
                                        "train.warmup_steps=5", "train.log_every=10"});
    Trainer trainer(c);
    std::vector<double> losses = trainer.run().losses;
    backend::set_matmul_precision(MatmulPrecision::f32);  // the trainer's setting is process-wide
    return losses;
  }

  std::string dir_;
};

TEST_F(CpuBf16Training, LossesTrackTheFloat32Run) {
  const std::string why = backend::cpu_bf16_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
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

// Where oneDNN finds no bf16 products, linattn-train stops at start-up naming train.precision's line,
// the instruction set found and the ways out. DNNL_MAX_CPU_ISA=AVX2 makes any CPU such a CPU.
TEST(CpuBf16Startup, WithoutBf16ProductsTheErrorNamesTheLineAndTheIsa) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-no-bf16-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/bf16.yaml") << "model: {hidden_size: 16, num_heads: 2, num_hidden_layers: 1}\n"
                                       "data: {path: /nonexistent}\n"
                                       "train:\n  max_steps: 1\n  precision: bf16\n";
  const testing::CommandResult r = testing::run_command("DNNL_MAX_CPU_ISA=AVX2 " +
                                                        testing::built_binary("linattn-train") + " " + dir +
                                                        "/bf16.yaml --out " + dir + "/run");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(dir + "/bf16.yaml:5:14: train.precision is bf16 on the CPU, but this CPU has no bfloat16 "
                                "products: oneDNN finds "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bf16 needs AVX-512 BF16 or AMX"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("set train.precision: fp32 (or pass --set train.precision=fp32), or train on a GPU "
                          "(train.device: cuda)"),
            std::string::npos)
      << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace linattn
