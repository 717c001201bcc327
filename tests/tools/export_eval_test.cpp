// linattn-export and linattn-eval on a checkpoint the trainer wrote: the exported weights are the
// checkpoint's (to the precision asked for), h5py reads them, and evaluation repeats the trainer's figure.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../train/train_testing.h"
#include "core/hdf5.h"
#include "testing.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::string bin(const std::string& name) {
  const char* dir = std::getenv("LINATTN_BUILD_DIR");
  return std::string(dir ? dir : "build") + "/" + name;
}

std::string run_and_capture(const std::string& command, int* status) {
  std::string out = (fs::temp_directory_path() / ("linattn-out-" + std::to_string(getpid()))).string();
  *status = WEXITSTATUS(std::system((command + " > " + out + " 2>&1").c_str()));
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(out);
  return ss.str();
}

class ExportEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("linattn-export-" + std::to_string(getpid()))).string();
    Config c = testing::tiny_config(dir_, {"train.max_steps=20", "data.val_tokens=8192"});
    Trainer trainer(c);
    summary_ = trainer.run();
    ckpt_ = latest_checkpoint(dir_);
    config_ = c;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string dir_, ckpt_;
  static TrainSummary summary_;
  static Config config_;
};
std::string ExportEval::dir_, ExportEval::ckpt_;
TrainSummary ExportEval::summary_;
Config ExportEval::config_;

TEST_F(ExportEval, EvaluationRepeatsTheTrainersFigure) {
  Model model(config_.model, DType::f32);
  load_checkpoint(ckpt_, config_, model, nullptr, nullptr);
  Arena arena;
  EvalResult r = evaluate(model, data::Dataset::open(config_.data.path, "val"), config_.data.seq_len,
                          config_.train.batch_size, /*max_tokens=*/0, arena);
  EXPECT_EQ(r.loss, summary_.last.loss);
  EXPECT_EQ(r.bits_per_byte, summary_.last.bits_per_byte);

  int status = 0;
  std::string out = run_and_capture(bin("linattn-eval") + " " + ckpt_, &status);
  EXPECT_EQ(status, 0) << out;
  char expected[64];
  std::snprintf(expected, sizeof expected, "val loss %.4f", summary_.last.loss);
  EXPECT_NE(out.find(expected), std::string::npos) << out << " (expected " << expected << ")";
}

TEST_F(ExportEval, ExportedWeightsAreTheCheckpoints) {
  Model model(config_.model, DType::f32);
  load_checkpoint(ckpt_, config_, model, nullptr, nullptr);
  const Parameters& p = model.params();
  for (std::string dtype : {"f32", "f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    std::string out = dir_ + "/export-" + dtype + ".h5";
    int status = 0;
    std::string text = run_and_capture(bin("linattn-export") + " " + ckpt_ + " " + out + " --dtype " + dtype, &status);
    ASSERT_EQ(status, 0) << text;
    H5File f(out, H5File::Mode::read);
    EXPECT_EQ(f.attr_string("format"), "linattn-weights");
    EXPECT_EQ(f.dataset_names().size(), p.size());  // weights only: no optimizer state
    for (size_t i = 0; i < p.size(); ++i) {
      const Tensor& w = p.values()[int(i)];
      Tensor got = f.read(p.name(int(i)), DType::f32, w.shape());
      if (dtype == "bf16") {  // uint16 patterns: the top half of a float32
        for (int64_t j = 0; j < got.numel(); ++j) {
          uint32_t bits = uint32_t(got.data<float>()[j]) << 16;
          std::memcpy(&got.data<float>()[j], &bits, 4);
        }
      }
      // float32 is exact; half keeps 11 significant bits (2^-11 relative), bfloat16 8 (2^-8).
      double tol = dtype == "f32" ? 0.0 : dtype == "f16" ? 1e-3 : 4e-3;
      EXPECT_CLOSE(got, w, tol);
    }
  }
}

TEST_F(ExportEval, H5pyReadsTheExport) {
  int status = 0;
  run_and_capture("/usr/bin/python3 -c 'import h5py'", &status);
  if (status != 0) GTEST_SKIP() << "Debian's python3-h5py is not installed (scripts/setup installs it)";
  std::string out = dir_ + "/export-py.h5";
  run_and_capture(bin("linattn-export") + " " + ckpt_ + " " + out, &status);
  ASSERT_EQ(status, 0);
  // The README's example.
  std::string script = dir_ + "/read.py";
  std::ofstream(script) << "import sys, h5py\n"
                           "with h5py.File(sys.argv[1], 'r') as f:\n"
                           "    for name, ds in f.items():\n"
                           "        print(name, ds.shape, ds.dtype)\n";
  std::string text = run_and_capture("/usr/bin/python3 " + script + " " + out, &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("lm_head.weight (257, 64) float32"), std::string::npos) << text;
  EXPECT_NE(text.find("model.layers.1.attn.k_proj.weight (64, 64) float32"), std::string::npos) << text;
}

TEST_F(ExportEval, ListShowsStepConfigAndShapes) {
  int status = 0;
  std::string text = run_and_capture(bin("linattn-export") + " --list " + ckpt_, &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("step 20"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden_size: 64"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer.m.lm_head.weight"), std::string::npos) << text;
  text = run_and_capture(bin("linattn-eval") + " " + dir_ + "/missing.h5", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(text.find("no such file"), std::string::npos) << text;
}

}  // namespace
}  // namespace linattn
