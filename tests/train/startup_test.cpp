// What the trainer checks before it takes a step: data that cannot fill one sequence.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/prepare.h"
#include "testing.h"
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

}  // namespace
}  // namespace linattn
