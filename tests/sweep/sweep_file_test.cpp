// Sweep files: the runs a grid and a runs list expand to, their names and groups, and every
// problem reported at the sweep file's LINE:COL before anything runs.
#include "sweep/sweep_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class SweepFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linattn-sweepfile-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "configs");
    std::ofstream(dir_ / "configs" / "base.yaml") << "model:\n  hidden_size: 64\n  num_hidden_layers: 2\n  num_heads: 2\ntrain:\n  max_steps: 5\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes the sweep file and loads it.
  Sweep load(const std::string& text) {
    std::ofstream(path()) << text;
    return load_sweep(path());
  }
  std::string error(const std::string& text) {
    return testing::error_of([&] { load(text); });
  }
  std::string path() const { return (dir_ / "sweep.yaml").string(); }
  fs::path dir_;
};

TEST_F(SweepFile, RunsTimesGridLastKeyFastest) {
  const Sweep s = load(
      "base: configs/base.yaml\n"
      "out_dir: runs/x\n"
      "set: {train.max_steps: 7}\n"
      "runs:\n"
      "  - {name: gla, model.layers: [gla, gla]}\n"
      "  - {name: hybrid, model.layers: [gla, {mixer: attention, window_size: 8}]}\n"
      "grid:\n"
      "  model.hidden_size: [32, 64]\n"
      "  train.lr: [1.0e-3, 3.0e-3]\n");
  EXPECT_EQ(s.base, (dir_ / "configs" / "base.yaml").string());  // relative to the sweep file
  ASSERT_EQ(s.runs.size(), 8u);
  EXPECT_EQ(s.runs[0].name, "gla-hidden_size=32-lr=1.0e-3");
  EXPECT_EQ(s.runs[1].name, "gla-hidden_size=32-lr=3.0e-3");
  EXPECT_EQ(s.runs[2].name, "gla-hidden_size=64-lr=1.0e-3");
  EXPECT_EQ(s.runs[4].name, "hybrid-hidden_size=32-lr=1.0e-3");
  EXPECT_EQ(s.run_dir(4), "runs/x/hybrid-hidden_size=32-lr=1.0e-3");
  EXPECT_EQ(s.set_items(5), (std::vector<std::string>{"train.max_steps=7",
                                                      "model.layers=[gla, {mixer: attention, window_size: 8}]",
                                                      "model.hidden_size=32", "train.lr=3.0e-3"}));
  EXPECT_EQ(s.keys, (std::vector<std::string>{"model.layers", "model.hidden_size", "train.lr"}));
  EXPECT_EQ(s.grid_keys, (std::vector<std::string>{"model.hidden_size", "train.lr"}));
  // With a runs list, the runs entries are compared at each grid point.
  EXPECT_EQ(s.compare, "runs");
  EXPECT_EQ(s.runs[1].group, "model.hidden_size=32, train.lr=3.0e-3");
  EXPECT_EQ(s.runs[5].group, s.runs[1].group);
  EXPECT_NE(s.runs[2].group, s.runs[1].group);
  EXPECT_EQ(s.runs[5].entry, "hybrid");
}

TEST_F(SweepFile, NameTemplateFilledFromTheOverridesAndTheBaseAndMadeAFolderName) {
  const Sweep s = load(
      "base: configs/base.yaml\n"
      "out_dir: runs/x\n"
      "name: \"{model.layers}-w{model.hidden_size}-h{model.num_heads}\"\n"
      "runs:\n"
      "  - {model.layers: [gla, {mixer: attention, window_size: 8}]}\n"
      "  - {model.layers: [deltanet, attention], model.hidden_size: 32}\n");
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].name, "gla_mixer_attention_window_size_8-w64-h2");  // hidden_size and heads: the base's
  EXPECT_EQ(s.runs[1].name, "deltanet_attention-w32-h2");
  EXPECT_EQ(s.runs[1].entry, "[deltanet, attention] 32");  // no name: its values
  EXPECT_EQ(s.runs[0].group, s.runs[1].group);             // one group: all runs compared
}

TEST_F(SweepFile, AGridAloneComparesItsLastKey) {
  const Sweep s = load("base: configs/base.yaml\nout_dir: o\ngrid:\n  model.mixer: [gla, deltanet]\n"
                       "  model.hidden_size: [32, 64]\n");
  ASSERT_EQ(s.runs.size(), 4u);
  EXPECT_EQ(s.compare, "model.hidden_size");
  EXPECT_EQ(s.runs[0].group, "model.mixer=gla");
  EXPECT_EQ(s.runs[1].group, "model.mixer=gla");
  EXPECT_EQ(s.runs[2].group, "model.mixer=deltanet");
  const Sweep c = load("base: configs/base.yaml\nout_dir: o\ncompare: model.mixer\ngrid:\n  model.mixer: [gla, deltanet]\n"
                       "  model.hidden_size: [32, 64]\n");
  EXPECT_EQ(c.runs[0].group, "model.hidden_size=32");
  EXPECT_EQ(c.runs[2].group, "model.hidden_size=32");
}

TEST_F(SweepFile, ProblemsAtTheSweepFilesLine) {
  const std::string p = path();
  const std::string head = "base: configs/base.yaml\nout_dir: o\n";
  EXPECT_EQ(error(head + "gird:\n  model.hidden_size: [32]\n"),
            p + ":3:1: unknown key 'gird' in the sweep file (known keys: base, out_dir, name, launcher, set, grid, "
                "runs, compare, tune, seeds)");
  // An unknown config key, a value of the wrong type, an unknown mixer: each at its value.
  std::string e = error(head + "grid:\n  model.hiden_size: [32, 64]\n");
  EXPECT_EQ(e.rfind(p + ":4:22 (model.hiden_size: 32): unknown key 'hiden_size' in 'model' (did you mean 'hidden_size'?)", 0), 0u) << e;
  e = error(head + "grid:\n  train.lr: [1.0e-3, fast]\n");
  EXPECT_EQ(e.rfind(p + ":4:22 (train.lr: fast): 'lr' has the wrong type: expected a number, got 'fast'", 0), 0u) << e;
  e = error(head + "runs:\n  - {model.layers: [gla, glaa]}\n");
  EXPECT_NE(e.find(p + ":4:20 (model.layers: [gla, glaa])"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown mixer 'glaa'"), std::string::npos) << e;
  // Problems of the sweep file itself.
  EXPECT_EQ(error("base: nope.yaml\nout_dir: o\ngrid: {model.hidden_size: [32]}\n"),
            p + ":1:7: no config '" + (dir_ / "nope.yaml").string() + "' (base is relative to the sweep file's folder)");
  EXPECT_EQ(error("base: configs/base.yaml\ngrid: {model.hidden_size: [32]}\n"),
            p + ": no 'out_dir': give out_dir: FOLDER (the sweep's runs and results go there)");
  EXPECT_EQ(error(head + "grid:\n  model.hidden_size: 32\n"),
            p + ":4:22: grid 'model.hidden_size' must be a list of values, e.g. [64, 128]");
  EXPECT_EQ(error(head + "grid:\n  hidden_size: [32]\n"),
            p + ":4:3: 'hidden_size' is not a config key: give section.key, e.g. model.hidden_size");
  EXPECT_EQ(error(head + "grid:\n  model.hidden_size: [32]\n  model.hidden_size: [64]\n"),
            p + ":5:3: duplicate key 'model.hidden_size' in grid; remove one");
  EXPECT_EQ(error(head + "name: x\ngrid:\n  model.hidden_size: [32, 64]\n"),
            p + ":3:7: two runs are both named 'x': put the keys that tell them apart into the name template, e.g. "
                "name: \"{model.hidden_size}\"");
  EXPECT_EQ(error(head + "name: \"{model.width}\"\ngrid:\n  model.hidden_size: [32]\n"),
            p + ":3:7: name: {model.width} is no config key and no runs entry's name (known: {name}, {section.key})");
  EXPECT_EQ(error(head), p + ": neither grid nor runs: give at least one of them");
  e = error(head + "grid: [\n");
  EXPECT_EQ(e.rfind(p + ":4:1: not valid YAML", 0), 0u) << e;
}

}  // namespace
}  // namespace linattn
