// Sweep files: the runs a grid and a runs list expand to, their names and groups, and every
// problem reported at the sweep file's LINE:COL before anything runs.
#include "sweep/sweep_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

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
  EXPECT_EQ(error(head), p + ": nothing to run: give runs, grid, tune or seeds");
  // Empty lists and mappings say so, rather than that something is missing or of the wrong type.
  EXPECT_EQ(error(head + "tune: {}\n"),
            p + ":3:7: tune is empty: give each key its list of values, e.g. tune: {train.lr: [3.0e-4, 1.0e-3, "
                "3.0e-3]}, or leave tune out");
  EXPECT_EQ(error(head + "grid: {}\n"),
            p + ":3:7: grid is empty: give each key its list of values, e.g. grid: {model.hidden_size: [64, 128]}, "
                "or leave grid out");
  EXPECT_EQ(error(head + "tune: {train.lr: []}\n"),
            p + ":3:18: tune 'train.lr' is an empty list: give its values, e.g. [3.0e-4, 1.0e-3, 3.0e-3]");
  EXPECT_EQ(error(head + "tune: []\n").rfind(p + ":3:7: tune is an empty list: give the tuned points", 0), 0u);
  EXPECT_EQ(error(head + "runs: []\n").rfind(p + ":3:7: runs is an empty list: give its override maps", 0), 0u);
  EXPECT_EQ(error(head + "seeds: []\n").rfind(p + ":3:8: seeds is an empty list: give at least one seed", 0), 0u);
  e = error(head + "grid: [\n");
  EXPECT_EQ(e.rfind(p + ":4:1: not valid YAML", 0), 0u) << e;
  e = error(head + "grid:\n\tmodel.hidden_size: [32]\n");
  EXPECT_NE(e.find("line 4 is indented with a tab: YAML indents with spaces only"), std::string::npos) << e;
}

TEST_F(SweepFile, TuneAndSeedsTrainEachConfigurationAtEveryValueWithEverySeedSeedsOutermost) {
  const Sweep s = load(
      "base: configs/base.yaml\n"
      "out_dir: o\n"
      "name: \"{name}-w{model.hidden_size}\"\n"
      "runs:\n"
      "  - {name: gla, model.layers: [gla, gla]}\n"
      "  - {name: delta, model.layers: [deltanet, deltanet]}\n"
      "grid:\n"
      "  model.hidden_size: [32, 64]\n"
      "tune: {train.lr: [1.0e-3, 3.0e-3]}\n"
      "seeds: [1, 2, 3]\n");
  ASSERT_EQ(s.runs.size(), 2u * 2u * 2u * 3u);
  EXPECT_EQ(s.tune_keys, (std::vector<std::string>{"train.lr"}));
  EXPECT_EQ(s.seeds, (std::vector<std::string>{"1", "2", "3"}));
  // Seed 1 for every configuration and value first, then seed 2, ...; the tuned value fastest.
  EXPECT_EQ(s.runs[0].name, "gla-w32-lr=1.0e-3-seed=1");
  EXPECT_EQ(s.runs[1].name, "gla-w32-lr=3.0e-3-seed=1");
  EXPECT_EQ(s.runs[2].name, "gla-w64-lr=1.0e-3-seed=1");
  EXPECT_EQ(s.runs[4].name, "delta-w32-lr=1.0e-3-seed=1");
  EXPECT_EQ(s.runs[8].name, "gla-w32-lr=1.0e-3-seed=2");
  EXPECT_EQ(s.runs[23].name, "delta-w64-lr=3.0e-3-seed=3");
  EXPECT_EQ(s.runs[9].config, "gla-w32");
  EXPECT_EQ(s.runs[9].tuned, "train.lr=3.0e-3");
  EXPECT_EQ(s.runs[9].seed, "2");
  EXPECT_EQ(s.set_items(9), (std::vector<std::string>{"model.layers=[gla, gla]", "model.hidden_size=32",
                                                      "train.lr=3.0e-3", "train.seed=2"}));
  // The tuned value and the seed are columns of the table, but not what tells configurations apart.
  EXPECT_EQ(s.keys, (std::vector<std::string>{"model.layers", "model.hidden_size", "train.lr", "train.seed"}));
  EXPECT_EQ(s.runs[9].group, "model.hidden_size=32");
  EXPECT_EQ(s.runs[13].group, s.runs[9].group);  // delta-w32, at another value and seed
  // Every (configuration, value, seed) once.
  std::set<std::string> combos;
  for (const SweepRun& r : s.runs) combos.insert(r.config + "|" + r.tuned + "|" + r.seed);
  EXPECT_EQ(combos.size(), s.runs.size());
}

TEST_F(SweepFile, TuneAsAListOfOverrideMapsKeepsKeysTogetherAndAloneSearchesTheBaseConfig) {
  const Sweep s = load(
      "base: configs/base.yaml\n"
      "out_dir: o\n"
      "tune:\n"
      "  - {train.lr: 1.0e-3, train.lr_min: 1.0e-4}\n"
      "  - {train.lr: 1.0e-2, train.lr_min: 1.0e-3}\n");
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.tune_keys, (std::vector<std::string>{"train.lr", "train.lr_min"}));
  EXPECT_EQ(s.runs[1].config, "base");
  EXPECT_EQ(s.runs[1].name, "base-lr=1.0e-2");  // lr alone tells the two apart
  EXPECT_EQ(load("base: configs/base.yaml\nout_dir: o\ntune:\n  - {train.lr: 1.0e-3, train.lr_min: 1.0e-4}\n"
                 "  - {train.lr: 1.0e-3, train.lr_min: 0}\n")
                .runs[1]
                .name,
            "base-lr=1.0e-3-lr_min=0");
  EXPECT_EQ(s.runs[1].tuned, "train.lr=1.0e-2, train.lr_min=1.0e-3");
  EXPECT_EQ(s.runs[1].seed, "");
  EXPECT_EQ(s.compare, "runs");
  const Sweep seeds_only = load("base: configs/base.yaml\nout_dir: o\nseeds: [7, 8]\n");
  ASSERT_EQ(seeds_only.runs.size(), 2u);
  EXPECT_EQ(seeds_only.runs[1].name, "base-seed=8");
  EXPECT_EQ(seeds_only.set_items(1), (std::vector<std::string>{"train.seed=8"}));
}

TEST_F(SweepFile, BadTuneAndSeedsAreNamedAtTheirLine) {
  const std::string p = path();
  const std::string head = "base: configs/base.yaml\nout_dir: o\n";
  EXPECT_EQ(error(head + "tune: {train.lr: 1.0e-3}\n"),
            p + ":3:18: tune 'train.lr' must be a list of values, e.g. [3.0e-4, 1.0e-3, 3.0e-3]");
  EXPECT_EQ(error(head + "tune: {train.lr: [1.0e-3, 3.0e-3, 1.0e-3]}\n"),
            p + ":3:35: tune 'train.lr' lists 1.0e-3 twice; remove one");
  EXPECT_EQ(error(head + "tune: {lr: [1.0e-3]}\n"),
            p + ":3:8: 'lr' is not a config key: give section.key, e.g. model.hidden_size");
  std::string e = error(head + "tune: {train.lr: [1.0e-3, fast]}\n");
  EXPECT_EQ(e.rfind(p + ":3:27 (train.lr: fast): 'lr' has the wrong type: expected a number, got 'fast'", 0), 0u) << e;
  e = error(head + "tune: {train.lrr: [1.0e-3]}\n");
  EXPECT_EQ(e.rfind(p + ":3:20 (train.lrr: 1.0e-3): unknown key 'lrr' in 'train' (did you mean 'lr'?)", 0), 0u) << e;
  EXPECT_EQ(error(head + "tune: 3.0e-3\n").rfind(p + ":3:7: tune must map keys to lists of values", 0), 0u);
  EXPECT_EQ(error(head + "tune:\n  - {train.lr: 1.0e-3}\n  - {train.warmup_steps: 10}\n"),
            p + ":5:5: tune entry 2 sets train.warmup_steps but entry 1 sets train.lr (in that order): give every "
                "entry the same keys");
  EXPECT_EQ(error(head + "seeds: 3\n"),
            p + ":3:8: seeds must be a list of whole numbers; seeds are train.seed values (initialization and data "
                "order), e.g. seeds: [1, 2, 3]");
  for (const char* bad : {"1.5", "-1", "x"})
    EXPECT_EQ(error(head + "seeds: [1, " + bad + "]\n"),
              p + ":3:12: seed '" + bad + "' is not a whole number from 0 to 2^53 = 9007199254740992; seeds are "
                  "train.seed values "
                  "(initialization and data order), e.g. seeds: [1, 2, 3]");
  EXPECT_EQ(error(head + "seeds: [1, 2, 1]\n"), p + ":3:15: seed 1 is listed twice; remove one");
  // Values, not texts, are compared: the runs would be the same run twice.
  EXPECT_EQ(error(head + "seeds: [1, 01]\n"), p + ":3:12: seed 01 is seed 1 again; remove one");
  EXPECT_EQ(error(head + "tune: {train.lr: [1.0e-3, 0.001]}\n"),
            p + ":3:27: tune 'train.lr' lists 0.001, the same value as 1.0e-3; remove one");
  EXPECT_EQ(error(head + "grid: {model.hidden_size: [64, 64.0]}\n"),
            p + ":3:32: grid 'model.hidden_size' lists 64.0, the same value as 64; remove one");
  EXPECT_EQ(error(head + "tune:\n  - {train.lr: 1.0e-3}\n  - {train.lr: 0.001}\n"),
            p + ":5:5: tune entry 2 repeats an earlier one; remove one");
  // A seed is a train.seed, at most 2^53: beyond, two seeds would round to one.
  EXPECT_EQ(error(head + "seeds: [9007199254740992, 9007199254740993]\n"),
            p + ":3:27: seed '9007199254740993' is not a whole number from 0 to 2^53 = 9007199254740992; seeds are "
                "train.seed values (initialization and data order), e.g. seeds: [1, 2, 3]");
  // Values that differ stay apart, also as text that reads as one number's neighbour.
  EXPECT_EQ(load(head + "seeds: [9007199254740991, 9007199254740992]\n").runs.size(), 2u);
  EXPECT_EQ(error(head + "tune: {train.lr: [1.0e-3, \"0.001\"]}\n"),
            p + ":3:27: tune 'train.lr' lists 0.001, the same value as 1.0e-3; remove one");
  // What the search sets, nothing else sets.
  EXPECT_EQ(error(head + "set: {train.lr: 1.0e-3}\ntune: {train.lr: [1.0e-3, 3.0e-3]}\n"),
            p + ":4:19: 'train.lr' is tuned, and set (" + p + ":3:17) sets it too: remove one of them");
  EXPECT_EQ(error(head + "grid: {train.lr: [1.0e-3]}\ntune: {train.lr: [3.0e-3]}\n"),
            p + ":4:19: 'train.lr' is tuned, and grid (" + p + ":3:8) sets it too: remove one of them");
  EXPECT_EQ(error(head + "runs:\n  - {train.seed: 5}\nseeds: [1, 2]\n"),
            p + ":5:9: seeds sets train.seed, and a runs entry (" + p + ":4:18) sets it too: remove one of them");
  EXPECT_EQ(error(head + "tune: {train.seed: [1, 2]}\nseeds: [1, 2]\n"),
            p + ":3:21: 'train.seed' is tuned, and seeds (" + p + ":4:9) sets it too: remove one of them");
  EXPECT_EQ(error(head + "name: \"x{train.lr}\"\ntune: {train.lr: [1.0e-3]}\n"),
            p + ":3:7: name: {train.lr} is set by the search (tune or seeds): leave it out, the sweep adds it to "
                "every run's name (\"-lr=VALUE\")");
  // A base-config rule that a tuned value breaks names the base's line and the run's overrides.
  e = error(head + "tune: {train.lr: [1.0e-5]}\nseeds: [4]\n");
  EXPECT_NE(e.find("'lr_min' must be in [0, lr] (in the run of the sweep with train.lr: 1.0e-5 at " + p +
                   ":3:19, train.seed: 4 at " + p + ":4:9)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace linattn
