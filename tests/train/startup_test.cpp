// What the trainer checks before it takes a step: data that cannot fill one sequence.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "autograd/mixer_ops.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "testing.h"
#include "train/device.h"
#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

TEST(TrainerStartup, AValidationSplitShorterThanOneSequenceIsRefusedAtStartUp) {
  // 40 validation bytes and an end-of-text token, fewer than data.seq_len + 1 = 65: the run used to train every step and
  // fail at its final evaluation, without a checkpoint. The check is in the constructor, which
  // --dry-run runs too.
  const std::string dir = (fs::temp_directory_path() / ("linattn-startup-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir + "/text");
  {
    std::ofstream train(dir + "/text/train.txt");
    for (int i = 0; i < 200; ++i) train << "a line of training text, long enough for many sequences\n";
    std::ofstream(dir + "/text/val.txt") << "a short validation text of forty bytes.\n";
  }
  data::PrepareOptions o;
  o.inputs = {dir + "/text"};
  o.out_dir = dir + "/shards";
  o.val_globs = {"val.txt"};
  data::prepare(o);
  Config c = testing::tiny_config(dir + "/run", {"data.path=" + dir + "/shards"});
  std::string msg = testing::error_of([&] { Trainer trainer(c); });
  EXPECT_NE(msg.find("data.seq_len"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the validation split (" + dir + "/shards/"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has only 41 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lower data.seq_len to at most 40"), std::string::npos) << msg;
  fs::remove_all(dir);
}

// Shards that record no end-of-text token (written by another tool) have no documents to cut at:
// the default document_boundaries (reset) becomes cross, and the run's config.yaml says so; reset
// asked for by the config is refused, naming its line.
TEST(TrainerStartup, ShardsWithoutEndOfTextTrainAcrossDocumentsUnlessResetIsAskedFor) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-no-eot-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir + "/shards");
  for (const char* split : {"train", "val"}) {
    data::ShardWriter w(dir + "/shards/" + split + ".bin", "bytes", 257, data::no_eot);
    std::vector<uint32_t> ids(4000);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = uint32_t('a' + i % 26);
    w.add_tokens(ids.data(), ids.size(), ids.size());
    w.finish();
  }
  Config c = testing::tiny_config(dir + "/run", {"data.path=" + dir + "/shards", "train.max_steps=1"});
  ASSERT_EQ(c.data.document_boundaries, DocumentBoundaries::reset);
  Trainer(c).run();
  std::ifstream saved(dir + "/run/config.yaml");
  std::string text((std::istreambuf_iterator<char>(saved)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("document_boundaries: cross"), std::string::npos) << text;

  Config reset = testing::tiny_config(dir + "/run2", {"data.path=" + dir + "/shards", "train.max_steps=1",
                                                      "data.document_boundaries=reset"});
  std::string msg = testing::error_of([&] { Trainer trainer(reset); });
  EXPECT_NE(msg.find("--set data.document_boundaries=reset: reset needs the end-of-text token"), std::string::npos)
      << msg;
  fs::remove_all(dir);
}

// Without a GPU (or in a build without CUDA) train.device: cuda stops at start-up, before the data
// is opened, naming the config line and the way out.
TEST(TrainerStartup, CudaWithoutAGpuNamesTheConfigLine) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is here: train.device: cuda is allowed";
  Config c = parse_config("model: {hidden_size: 16, num_heads: 2, num_hidden_layers: 1, mixer: attention}\n"
                          "data: {path: /nonexistent}\n"
                          "train:\n  max_steps: 1\n  device: cuda\n",
                          "gpu.yaml");
  std::string msg = testing::error_of([&] { Trainer trainer(c); });
  EXPECT_NE(msg.find("gpu.yaml:5:11: train.device is cuda, but "), std::string::npos) << msg;
  EXPECT_NE(msg.find("set train.device: cpu (or pass --set train.device=cpu)"), std::string::npos) << msg;
  c = parse_config("train: {max_steps: 1}\n", "cpu.yaml", {"train.device=cuda"});
  msg = testing::error_of([&] { Trainer trainer(c); });
  EXPECT_NE(msg.find("--set train.device=cuda: train.device is cuda, but "), std::string::npos) << msg;
}

// A model with a layer whose mixer has no CUDA kernel is refused for train.device: cuda, naming the
// layer and the config line (checked before anything moves to the GPU, so no GPU is needed here).
#ifndef LINATTN_CUDA  // with the CUDA backend (nvcc or emulated) every mixer has CUDA kernels
TEST(TrainerStartup, AMixerWithoutCudaKernelsNamesTheLayer) {
  const std::string mixer = "gla";
  Config c = parse_config("model: {hidden_size: 16, num_heads: 2, num_hidden_layers: 2, layers: [" + mixer +
                              ", attention]}\ntrain:\n  max_steps: 1\n  device: cuda\n",
                          "hybrid.yaml");
  Model model(c.model, DType::f32);
  std::string msg = testing::error_of([&] { check_model_on_device(c, model, Device::cuda); });
  EXPECT_EQ(msg, "hybrid.yaml:4:11: model.layers.0 (" + mixer + "): no CUDA kernel yet for " +
                     ops::missing_kernels(mixer, Device::cuda) + "; use train.device: cpu or an attention-only model");
  EXPECT_EQ(testing::error_of([&] { check_model_on_device(c, model, Device::cpu); }), "");
}
#endif

}  // namespace
}  // namespace linattn
