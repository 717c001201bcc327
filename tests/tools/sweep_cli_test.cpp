// linattn-sweep and linattn-plot as a user runs them: a sweep of tiny runs interrupted with Ctrl-C
// (SIGINT) after its first run and started again, finishing with the whole table and the plots; a
// failing run recorded while the sweep goes on; sweep-file errors before any run starts.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <thread>

#include "testing.h"
#include "train/checkpoint.h"
#include "train/train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Byte shards of the default corpus: a few speeches to train on, one short one to validate on (the
// final evaluation reads all of it).
const std::string& shards() {
  static const std::string dir = [] {
    std::string train;
    for (const char* f : {"2001_george_w_bush_r.txt", "2002_george_w_bush_r.txt"})
      train += read(fs::path("data/corpus/sotu") / f);
    EXPECT_GT(train.size(), 10000u) << "the default corpus is missing: run ./scripts/fetch-data";
    return testing::text_shards("sweep-cli", train, read("data/corpus/sotu/2003_george_w_bush_r.txt").substr(0, 6000));
  }();
  return dir;
}

class SweepCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linattn-sweep-command-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "tiny.yaml") << "model:\n  hidden_size: 16\n  num_hidden_layers: 2\n  num_heads: 2\n"
                                         "  layers: [gla, {mixer: attention, window_size: 8}]\n"
                                         "data:\n  path: " << shards() << "\n  seq_len: 32\n"
                                         "train:\n  batch_size: 2\n  max_steps: 4\n  warmup_steps: 2\n"
                                         "  eval_every: 2\n  log_every: 10\n  threads: 1\n"
                                         "checkpoint:\n  every: 20\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes sweep.yaml (base tiny.yaml, out_dir OUT) and returns its path.
  std::string sweep_file(const std::string& body) {
    std::ofstream(dir_ / "sweep.yaml") << "base: tiny.yaml\nout_dir: " << out().string() << "\n" << body;
    return (dir_ / "sweep.yaml").string();
  }
  testing::CommandResult sweep(const std::string& args) {
    return testing::run_command("OMP_WAIT_POLICY=PASSIVE " + testing::built_binary("linattn-sweep") + " " + args);
  }
  fs::path out() const { return dir_ / "out"; }
  fs::path dir_;
};

TEST_F(SweepCommand, InterruptedAfterItsFirstRunAndStartedAgainItFinishesTheTableAndThePlots) {
  const std::string file = sweep_file(
      "runs:\n"
      "  - {name: first, train.max_steps: 4}\n"
      "  - {name: second, train.max_steps: 2000, train.eval_every: 500}\n");
  // Started in the background; Ctrl-C (SIGINT to the sweep) once the second run has a checkpoint.
  const std::string log = (dir_ / "first-try.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + testing::built_binary("linattn-sweep") + " " + file + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  const fs::path second_checkpoints = out() / "second" / "checkpoints";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!(fs::exists(second_checkpoints) && !fs::is_empty(second_checkpoints)) &&
         std::chrono::steady_clock::now() < deadline && waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(second_checkpoints)) << read(log);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string first_try = read(log);
  ASSERT_TRUE(WIFEXITED(status)) << first_try;
  EXPECT_EQ(WEXITSTATUS(status), 130) << first_try;
  EXPECT_NE(first_try.find("[sweep] run 1/2 first: starting"), std::string::npos) << first_try;
  EXPECT_NE(first_try.find("[sweep] run 2/2 second: starting"), std::string::npos) << first_try;
  // The run took the Ctrl-C: it stopped after its step and wrote a checkpoint; then the sweep stopped.
  EXPECT_NE(first_try.find("interrupted after "), std::string::npos) << first_try;
  EXPECT_NE(first_try.find("; 1 run left. Continue with: linattn-sweep " + file), std::string::npos) << first_try;
  // The table so far: the first run done, the second interrupted.
  std::string csv = read(out() / "results.csv");
  EXPECT_NE(csv.find("\nfirst,4,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",done,1,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",interrupted,0,\n"), std::string::npos) << csv;

  // Again: the first run is skipped, the second resumes from its checkpoint and ends.
  const testing::CommandResult again = sweep(file);
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("run 1/2 first: finished before, skipped"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("run 2/2 second: resuming from its checkpoint"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("--resume " + (out() / "second").string()), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("[sweep] done in"), std::string::npos) << again.output;
  csv = read(out() / "results.csv");
  EXPECT_EQ(count(csv, ",done,"), 2u) << csv;
  EXPECT_EQ(count(csv, "\n"), 3u) << csv;  // the header and the two runs
  // The resumed run's metrics: steps from before the interrupt and after, then the done record.
  const std::string metrics = read(out() / "second" / "metrics.jsonl");
  EXPECT_NE(metrics.find("{\"step\": 10, \"loss\""), std::string::npos);
  EXPECT_NE(metrics.find("{\"step\": 2000, \"done\": 1, \"tokens\": 128000"), std::string::npos) << metrics;
  // The table and the plots: both runs' lines in the validation plot.
  const std::string md = read(out() / "results.md");
  EXPECT_EQ(count(md, "| done |"), 2u) << md;
  const std::string svg = read(out() / "val_loss.svg");
  EXPECT_EQ(count(svg, "<polyline"), 2u) << svg;
  EXPECT_NE(svg.find(">second</text>"), std::string::npos);
  // A third time there is nothing left to do.
  const testing::CommandResult third = sweep(file);
  EXPECT_EQ(third.status, 0) << third.output;
  EXPECT_EQ(count(third.output, "finished before, skipped"), 2u) << third.output;
}

TEST_F(SweepCommand, AFailingRunIsRecordedWithItsErrorAndTheSweepGoesOn) {
  const std::string file = sweep_file(
      "name: \"{model.vocab_size}-w{model.hidden_size}\"\n"
      "runs:\n"
      "  - {model.vocab_size: 257}\n"
      "  - {model.vocab_size: 100}\n"
      "grid:\n"
      "  model.hidden_size: [16, 32]\n");
  const testing::CommandResult r = sweep(file);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("run 3/4 100-w16: FAILED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("run 4/4 100-w32: starting"), std::string::npos) << r.output;  // it went on
  EXPECT_NE(r.output.find("2 trained, 2 failed"), std::string::npos) << r.output;
  const std::string csv = read(out() / "results.csv");
  EXPECT_EQ(count(csv, ",done,"), 2u) << csv;
  EXPECT_EQ(count(csv, ",failed,0,\"linattn-train: error:"), 2u) << csv;
  // The error names the sweep file's line of the override at fault.
  EXPECT_NE(csv.find("linattn-train: error: " + file + ":6:24 (model.vocab_size: 100): vocab_size 100 is smaller "
                     "than the data's vocabulary"),
            std::string::npos)
      << csv;
  // Compared within each width: the finished run is the best of its group.
  EXPECT_EQ(count(csv, ",done,1,"), 2u) << csv;
  // The final loss against the width, one line for the finished runs (the failed ones have none).
  const std::string svg = read(out() / "final_val_loss_vs_model.hidden_size.svg");
  EXPECT_EQ(count(svg, "<polyline"), 1u) << svg;
  EXPECT_EQ(count(svg, "<circle"), 2u) << svg;

  // linattn-plot draws any of these runs.
  const std::string plot = (dir_ / "p.svg").string();
  const testing::CommandResult p = testing::run_command(testing::built_binary("linattn-plot") + " " +
                                                        (out() / "257-w16").string() + " " +
                                                        (out() / "257-w32").string() + " --metric bpb --out " + plot);
  EXPECT_EQ(p.status, 0) << p.output;
  EXPECT_NE(p.output.find("wrote " + plot + ": bpb of 2 runs"), std::string::npos) << p.output;
  EXPECT_EQ(count(read(plot), "<polyline"), 2u);
  EXPECT_NE(read(plot).find(">257-w32</text>"), std::string::npos);
}

// A learning-rate search over seeds on the byte corpus, where the best value is known: in 30 steps
// lr 1e-5 leaves the loss near ln 257 = 5.55, lr 3 throws AdamW's weights far off (losses of 8 to
// 23 here), and lr 3e-3 learns the byte frequencies (about 4.6); lr 1e8 diverges (a non-finite
// loss), an outcome that is kept and not retried.
TEST_F(SweepCommand, ALearningRateSearchOverSeedsPicksTheKnownBestAndKeepsTheWholeGrid) {
  const std::string file = sweep_file(
      "set: {train.lr_min: 0, train.max_steps: 30, train.eval_every: 10}\n"
      "runs:\n"
      "  - {name: narrow, model.hidden_size: 16}\n"
      "  - {name: wide, model.hidden_size: 32}\n"
      "tune: {train.lr: [1.0e-5, 3.0e-3, 3.0, 1.0e+8]}\n"
      "seeds: [1, 2]\n");
  const testing::CommandResult r = sweep(file);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("12 trained, 0 failed, 4 diverged"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("run 4/16 narrow-lr=1.0e_8-seed=1: diverged (a non-finite loss), kept as its outcome"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("run 1/16 narrow-lr=1.0e-5-seed=1: starting"), std::string::npos) << r.output;

  // The whole grid in results.csv, the tuned value and the seed as columns; the val_loss column kept
  // for the check of the summary below.
  const std::string csv = read(out() / "results.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "name,model.hidden_size,train.lr,train.seed,params,state,tokens,"
                                           "tokens_per_s,val_loss,val_ppl,val_bpb,recall_accuracy,status,best,error");
  EXPECT_EQ(count(csv, ",done,"), 12u) << csv;
  EXPECT_EQ(count(csv, ",diverged,0,\"linattn-train: error: stopping: "), 4u) << csv;
  std::map<std::string, double> loss;  // by run name
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    std::vector<std::string> field;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) field.push_back(c);
    ASSERT_GE(field.size(), 9u) << line;
    if (!field[8].empty()) loss[field[0]] = std::stod(field[8]);
  }
  for (const char* config : {"narrow", "wide"})
    for (const char* lr : {"1.0e-5", "3.0e-3", "3.0"})
      for (const char* seed : {"1", "2"}) {
        const std::string name = std::string(config) + "-lr=" + lr + "-seed=" + seed;
        EXPECT_EQ(loss.count(name), 1u) << name << "\n" << csv;
        EXPECT_TRUE(fs::exists(out() / name / "metrics.jsonl")) << name;
      }

  // Each configuration at lr 3e-3, with the mean and sample standard deviation of its two seeds (to
  // the 4 decimals of the CSV's losses).
  const std::string md = read(out() / "results.md");
  for (const char* config : {"narrow", "wide"}) {
    const double a = loss[std::string(config) + "-lr=3.0e-3-seed=1"];
    const double b = loss[std::string(config) + "-lr=3.0e-3-seed=2"];
    const size_t at = md.find("| " + std::string(config));
    ASSERT_NE(at, std::string::npos) << md;
    const std::string row = md.substr(at, md.find('\n', at) - at);
    const size_t cells = row.find(" | 3.0e-3 | 2/2 | ");
    ASSERT_NE(cells, std::string::npos) << row;
    double mean = 0, sd = 0, lo = 0, hi = 0;
    ASSERT_EQ(std::sscanf(row.c_str() + cells + 18, "%lf ± %lf | %lf–%lf", &mean, &sd, &lo, &hi), 4) << row;
    EXPECT_NEAR(mean, (a + b) / 2, 1e-4) << row;
    EXPECT_NEAR(sd, std::fabs(a - b) / std::sqrt(2.0), 1e-4) << row;  // two values: |a - b| / sqrt(2)
    EXPECT_NEAR(lo, std::min(a, b), 1e-4) << row;
    EXPECT_NEAR(hi, std::max(a, b), 1e-4) << row;
  }
  EXPECT_NE(md.find("| configuration | 1.0e-5 | 3.0e-3 | 3.0 | 1.0e+8 |"), std::string::npos) << md;  // the search
  EXPECT_EQ(count(md, " | — (0/2, 2 diverged) |\n"), 2u) << md;
  EXPECT_NE(md.find("## Every run"), std::string::npos) << md;
  // The plots draw each configuration at lr 3e-3 with its band; the search against log10 lr.
  const std::string curves = read(out() / "val_loss.svg");
  EXPECT_EQ(count(curves, "<polygon"), 2u) << curves;
  EXPECT_NE(curves.find(">narrow (train.lr=3.0e-3)</text>"), std::string::npos) << curves;
  const std::string search = read(out() / "final_val_loss_vs_train.lr.svg");
  EXPECT_EQ(count(search, "<polygon"), 2u) << search;
  EXPECT_EQ(count(search, "<circle"), 6u) << search;  // 2 configurations x 3 values

  // Run again, nothing is left to train, and the results stay the same.
  const testing::CommandResult again = sweep(file);
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(count(again.output, "finished before, skipped"), 12u) << again.output;
  EXPECT_EQ(count(again.output, "diverged before, skipped"), 4u) << again.output;
  EXPECT_EQ(read(out() / "results.csv"), csv);
  EXPECT_EQ(read(out() / "results.md"), md);
}

TEST_F(SweepCommand, SweepFileErrorsComeBeforeAnyRunStarts) {
  // The first run is valid; the problem is in the last grid value.
  std::string file = sweep_file("grid:\n  model.hidden_size: [16, 32]\n  train.lr: [1.0e-3, fast]\n");
  testing::CommandResult r = sweep(file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("linattn-sweep: error: " + file +
                          ":5:22 (train.lr: fast): 'lr' has the wrong type: expected a number, got 'fast'"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out()));  // nothing ran
  file = sweep_file("grid:\n  model.hiden_size: [16]\n");
  r = sweep(file);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find(file + ":4:22 (model.hiden_size: 16): unknown key 'hiden_size' in 'model' (did you mean "
                                 "'hidden_size'?)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out()));
}

TEST_F(SweepCommand, DryRunHelpAndOptions) {
  const std::string file = sweep_file("runs:\n  - {name: a, model.hidden_size: 16}\n  - {name: b, model.hidden_size: 32}\n");
  testing::CommandResult r = sweep(file + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--set model.hidden_size=32 --out " + (out() / "b").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dry run: the sweep file and every run's config are valid"), std::string::npos);
  EXPECT_FALSE(fs::exists(out()));
  // --jobs takes a count of runs, said as the other tools say it (not CLI11's range of doubles).
  for (const std::string jobs : {"0", "-1", "abc", "1.5"}) {
    r = sweep(file + " --jobs " + jobs);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_EQ(r.output, "linattn-sweep: error: --jobs '" + jobs + "' is not a whole number in [1, 4096] (see "
                        "linattn-sweep --help)\n");
  }
  r = sweep(file + " --only c");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--only c: the sweep has no such run (its runs: a, b)"), std::string::npos) << r.output;
  r = sweep("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("Usage: linattn-sweep [OPTIONS] [SWEEP.yaml]"), std::string::npos);
  r = sweep("");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("linattn-sweep: error: no sweep file given"), std::string::npos) << r.output;
  r = testing::run_command(testing::built_binary("linattn-plot") + " " + dir_.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("linattn-plot: error: '" + dir_.string() + "' is no run folder"), std::string::npos)
      << r.output;
}

TEST_F(SweepCommand, ASecondSweepIntoTheSameFolderIsRefusedAndTheFirstFinishesWhole) {
  const std::string file = sweep_file(
      "runs:\n"
      "  - {name: first, train.max_steps: 4}\n"
      "  - {name: second, train.max_steps: 600, train.eval_every: 300}\n");
  const std::string log = (dir_ / "first.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + testing::built_binary("linattn-sweep") + " " + file + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  // The second starts while the first trains its first run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!fs::exists(out() / "first" / "metrics.jsonl") && std::chrono::steady_clock::now() < deadline &&
         waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const testing::CommandResult second = sweep(file);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string first = read(log);
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_NE(second.output.find("linattn-sweep: error: the sweep folder '" + out().string() +
                               "' is in use by another process (pid " + std::to_string(pid) + ", command: "),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("[sweep] run"), std::string::npos) << "the second ran something\n" << second.output;
  ASSERT_TRUE(WIFEXITED(status)) << first;
  EXPECT_EQ(WEXITSTATUS(status), 0) << first;
  const std::string csv = read(out() / "results.csv");
  EXPECT_EQ(count(csv, ",done,"), 2u) << csv;
  for (const char* run : {"first", "second"}) {
    EXPECT_TRUE(fs::exists(out() / run / "config.yaml")) << run;
    EXPECT_FALSE(fs::exists(out() / run / "sweep-error.txt")) << run;
  }
}

TEST_F(SweepCommand, ResultsThatCannotBeWrittenAreAnErrorAndTheLastCompleteOnesStay) {
  const std::string file = sweep_file("runs:\n  - {name: only, train.max_steps: 4}\n");
  ASSERT_EQ(sweep(file).status, 0);
  const std::string csv = read(out() / "results.csv"), md = read(out() / "results.md"),
                    svg = read(out() / "val_loss.svg");
  ASSERT_GT(md.size(), 600u);
  // Again, with nothing left to train, under a file size limit of 600 bytes (RLIMIT_FSIZE, which
  // needs no root): the table no longer fits, as on a full disk.
  const std::string log = (dir_ / "limited.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails instead of killing the process
    const rlimit limit{600, RLIM_INFINITY};
    setrlimit(RLIMIT_FSIZE, &limit);
    const std::string cmd = "exec " + testing::built_binary("linattn-sweep") + " " + file + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string output = read(log);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_NE(output.find("linattn-sweep: error: cannot write '" + out().string() + "/results."), std::string::npos)
      << output;
  EXPECT_NE(output.find("File too large"), std::string::npos) << output;
  EXPECT_EQ(output.find("results in"), std::string::npos) << output;
  EXPECT_EQ(read(out() / "results.csv"), csv);
  EXPECT_EQ(read(out() / "results.md"), md);
  EXPECT_EQ(read(out() / "val_loss.svg"), svg);
  for (const auto& e : fs::directory_iterator(out()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(SweepCommand, AnOutDirThatIsAFileIsNamedByTheDryRun) {
  std::ofstream(out()) << "a file";
  const std::string file = sweep_file("runs:\n  - {name: a}\n");
  const testing::CommandResult r = sweep(file + " --dry-run");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(file + ":2:10: out_dir '" + out().string() + "' is a file"), std::string::npos) << r.output;
  // A folder inside a file, from --out or from out_dir, cannot be created: each run would fail.
  const fs::path afile = dir_ / "afile";
  std::ofstream(afile) << "a file";
  const std::string inside = (afile / "sub").string();
  fs::remove(out());
  for (const char* args : {" --dry-run", ""}) {
    testing::CommandResult o = sweep(file + " --out " + inside + args);
    EXPECT_EQ(o.status, 1) << o.output;
    EXPECT_NE(o.output.find("linattn-sweep: error: --out '" + inside + "' cannot be written: '" + afile.string() +
                            "' is a file, not a folder; give another folder for the sweep's runs and results"),
              std::string::npos)
        << o.output;
    EXPECT_EQ(o.output.find("[sweep] run"), std::string::npos) << o.output;
  }
  std::ofstream(dir_ / "sweep.yaml") << "base: tiny.yaml\nout_dir: " << inside << "\nruns:\n  - {name: a}\n";
  const testing::CommandResult o = sweep(file + " --dry-run");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("linattn-sweep: error: " + file + ": out_dir '" + inside + "' cannot be written: '"),
            std::string::npos)
      << o.output;
}


// results.csv without its tokens/s column (a machine's speed, not a result), one string per line.
std::vector<std::string> csv_without_speed(const std::string& csv) {
  std::vector<std::string> lines;
  std::stringstream in(csv);
  size_t speed = std::string::npos;  // the column's index
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) fields.emplace_back();
      else fields.back() += c;
    }
    if (speed == std::string::npos)
      speed = size_t(std::find(fields.begin(), fields.end(), "tokens_per_s") - fields.begin());
    if (speed < fields.size()) fields.erase(fields.begin() + long(speed));
    std::string kept;
    for (const std::string& f : fields) kept += f + "|";
    lines.push_back(kept);
  }
  return lines;
}

TEST_F(SweepCommand, ThreeJobsAtOnceGiveTheResultsOfOneAtATime) {
  // 8 runs: two widths, each at two learning rates with two seeds.
  const std::string file = sweep_file(
      "runs:\n  - {name: a, model.hidden_size: 16}\n  - {name: b, model.hidden_size: 32}\n"
      "tune:\n  - {train.lr: 1.0e-3}\n  - {train.lr: 3.0e-3}\n"
      "seeds: [1, 2]\n");
  const std::string serial = (dir_ / "serial").string(), parallel = (dir_ / "parallel").string();
  const testing::CommandResult one = sweep(file + " --out " + serial);
  ASSERT_EQ(one.status, 0) << one.output;
  const testing::CommandResult three = sweep(file + " --jobs 3 --out " + parallel);
  ASSERT_EQ(three.status, 0) << three.output;
  EXPECT_FALSE(fs::exists(out()));  // --out took the place of the file's out_dir

  const std::vector<std::string> a = csv_without_speed(read(fs::path(serial) / "results.csv"));
  const std::vector<std::string> b = csv_without_speed(read(fs::path(parallel) / "results.csv"));
  ASSERT_EQ(a.size(), 9u) << read(fs::path(serial) / "results.csv");  // the header and 8 runs
  EXPECT_EQ(a, b) << read(fs::path(parallel) / "results.csv");
  EXPECT_EQ(count(read(fs::path(parallel) / "results.csv"), ",done,"), 8u);
  // The losses differ between runs (a table of equal rows would prove nothing).
  EXPECT_NE(a[1], a[2]);
  // With three jobs: a line per finished run, and each run's output in its own folder.
  EXPECT_EQ(count(three.output, ": done in "), 8u) << three.output;
  EXPECT_NE(three.output.find("run 8/8 b-lr=3.0e-3-seed=2: done in "), std::string::npos) << three.output;
  EXPECT_EQ(count(three.output, "step      1 | loss"), 0u) << "a run's output reached the terminal";
  const std::string log = read(fs::path(parallel) / "a-lr=1.0e-3-seed=1" / "train.log");
  EXPECT_NE(log.find("step      1 | loss"), std::string::npos) << log;
  EXPECT_NE(log.find("done after 4 steps"), std::string::npos) << log;
  // One job at a time leaves the run's output on the terminal, as before.
  EXPECT_NE(one.output.find("done after 4 steps"), std::string::npos);

  // --results-only writes the same results again from the run folders, and trains nothing.
  const std::string md = read(fs::path(parallel) / "results.md");
  fs::remove(fs::path(parallel) / "results.md");
  fs::remove(fs::path(parallel) / "results.csv");
  fs::remove_all(fs::path(parallel) / "a-lr=1.0e-3-seed=1");  // a run not there: pending, not trained
  const testing::CommandResult again = sweep(file + " --results-only --out " + parallel);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(again.output.find("[sweep]"), std::string::npos) << again.output;
  EXPECT_FALSE(fs::exists(fs::path(parallel) / "a-lr=1.0e-3-seed=1"));
  const std::vector<std::string> c = csv_without_speed(read(fs::path(parallel) / "results.csv"));
  ASSERT_EQ(c.size(), 9u);
  EXPECT_NE(c[1].find("|pending|"), std::string::npos) << c[1];
  for (size_t i = 2; i < c.size(); ++i) EXPECT_EQ(c[i], b[i]);
  EXPECT_NE(read(fs::path(parallel) / "results.md"), md);  // one run fewer
  EXPECT_NE(read(fs::path(parallel) / "results.md").find("## The search"), std::string::npos);
}

TEST_F(SweepCommand, CtrlCStopsEveryRunningJobAtACheckpointAndTheSameCommandFinishes) {
  const std::string file = sweep_file(
      "set: {train.max_steps: 2000, train.eval_every: 500}\n"
      "runs:\n  - {name: first, model.hidden_size: 16}\n  - {name: second, model.hidden_size: 32}\n");
  const std::string log = (dir_ / "first-try.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd =
        "exec " + testing::built_binary("linattn-sweep") + " " + file + " --jobs 2 > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  // Ctrl-C once both runs have a checkpoint.
  auto has_checkpoint = [&](const char* run) {
    const fs::path c = out() / run / "checkpoints";
    return fs::exists(c) && !fs::is_empty(c);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!(has_checkpoint("first") && has_checkpoint("second")) && std::chrono::steady_clock::now() < deadline &&
         waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(has_checkpoint("first") && has_checkpoint("second")) << read(log);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string first_try = read(log);
  ASSERT_TRUE(WIFEXITED(status)) << first_try;
  EXPECT_EQ(WEXITSTATUS(status), 130) << first_try;
  EXPECT_EQ(count(first_try, ": stopped by the Ctrl-C"), 2u) << first_try;
  EXPECT_NE(first_try.find("interrupted after "), std::string::npos) << first_try;
  EXPECT_NE(first_try.find("2 runs left. Continue with: linattn-sweep " + file), std::string::npos) << first_try;
  EXPECT_EQ(count(read(out() / "results.csv"), ",interrupted,"), 2u) << read(out() / "results.csv");
  // No training process is left behind: each run folder's lock is free again (a second sweep takes them).
  const testing::CommandResult again = sweep(file + " --jobs 2");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(count(again.output, "resuming from its checkpoint"), 2u) << again.output;
  EXPECT_EQ(count(read(out() / "results.csv"), ",done,"), 2u) << read(out() / "results.csv");
  for (const char* run : {"first", "second"})
    EXPECT_NE(read(out() / run / "metrics.jsonl").find("{\"step\": 2000, \"done\": 1"), std::string::npos) << run;
}

// Whether another process holds the lock of `dir` (train/folder_lock.h): a run still trains there.
bool folder_in_use(const fs::path& dir) {
  const int fd = open((dir / ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_EX | LOCK_NB) != 0;
  close(fd);
  return held;
}

// The PID in the lock file of `dir` ("pid 123, command: ..."), or -1.
pid_t lock_holder(const fs::path& dir) {
  const std::string text = read(dir / ".lock");
  return text.rfind("pid ", 0) == 0 ? pid_t(std::atol(text.c_str() + 4)) : -1;
}

// A sweep killed outright (SIGKILL, or its terminal closing) cannot forward a Ctrl-C. Its runs get
// SIGTERM as it dies, and the pipe that took their stderr closes: each must still stop at the end
// of its step with a checkpoint (with checkpoint.every: 0, the only one it writes), instead of
// dying of SIGPIPE at its next message.
TEST_F(SweepCommand, KilledOutrightItsRunningJobsStillStopAtACheckpoint) {
  const std::string file = sweep_file(
      "set: {train.max_steps: 1000000, train.eval_every: 0, checkpoint.every: 0}\n"
      "runs:\n  - {name: first, model.hidden_size: 16}\n  - {name: second, model.hidden_size: 32}\n");
  const std::string log = (dir_ / "sweep.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd =
        "exec " + testing::built_binary("linattn-sweep") + " " + file + " --jobs 2 > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  // SIGKILL once both runs train (each has logged a step).
  auto training = [&](const char* run) { return read(out() / run / "metrics.jsonl").find("\"loss\"") != std::string::npos; };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!(training("first") && training("second")) && std::chrono::steady_clock::now() < deadline &&
         waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const pid_t runs[2] = {lock_holder(out() / "first"), lock_holder(out() / "second")};
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(training("first") && training("second")) << read(log);
  // The runs, now orphans, end on their own (their last line, after the run folder is free, is the
  // command that continues them); should one train on, it is killed at the deadline.
  auto ended = [&](int r) {
    const fs::path run = out() / (r ? "second" : "first");
    return !folder_in_use(run) &&
           (read(run / "train.log").find("continue with: ") != std::string::npos || kill(runs[r], 0) != 0);
  };
  deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (!(ended(0) && ended(1)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int r = 0; r < 2; ++r)
    if (folder_in_use(out() / (r ? "second" : "first")) && runs[r] > 0) {
      ADD_FAILURE() << "run " << r << " (pid " << runs[r] << ") went on training after the sweep was killed";
      kill(runs[r], SIGKILL);
    }
  for (const char* run : {"first", "second"}) {
    const std::string train_log = read(out() / run / "train.log");
    const std::string checkpoint = latest_checkpoint((out() / run).string());
    ASSERT_FALSE(checkpoint.empty()) << run << " left no checkpoint\n" << train_log;
    EXPECT_EQ(checkpoint_problem(checkpoint), "") << checkpoint;
    EXPECT_NE(train_log.find("interrupted after "), std::string::npos) << train_log;
    EXPECT_NE(train_log.find("continue with: "), std::string::npos) << train_log;
  }
  // The same command continues both from their checkpoints.
  const testing::CommandResult listed = sweep(file + " --dry-run");
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_EQ(count(listed.output, " resumes "), 2u) << listed.output;
}

// Its terminal closing sends the sweep SIGHUP, and its runs (in process groups of their own) none:
// the sweep stops them as a Ctrl-C does, each at a checkpoint, and exits as interrupted.
TEST_F(SweepCommand, AHangupStopsTheRunsAtACheckpointAsACtrlCDoes) {
  const std::string file = sweep_file(
      "set: {train.max_steps: 1000000, train.eval_every: 0, checkpoint.every: 0}\nruns:\n  - {name: only}\n");
  const std::string log = (dir_ / "sweep.log").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = "exec " + testing::built_binary("linattn-sweep") + " " + file + " > " + log + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  auto training = [&] { return read(out() / "only" / "metrics.jsonl").find("\"loss\"") != std::string::npos; };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!training() && std::chrono::steady_clock::now() < deadline && waitpid(pid, nullptr, WNOHANG) == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(training()) << read(log);
  kill(pid, SIGHUP);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string output = read(log);
  ASSERT_TRUE(WIFEXITED(status)) << "the sweep died of signal " << WTERMSIG(status) << "\n" << output;
  EXPECT_EQ(WEXITSTATUS(status), 130) << output;
  EXPECT_NE(output.find("[sweep] run 1/1 only: stopped by SIGHUP (its terminal closed)"), std::string::npos) << output;
  EXPECT_NE(output.find("interrupted after"), std::string::npos) << output;
  EXPECT_FALSE(latest_checkpoint((out() / "only").string()).empty()) << output;
}

TEST_F(SweepCommand, ASweepLevelSetReachesEveryRunButNotAKeyTheRunsDifferIn) {
  const std::string file = sweep_file(
      "set: {train.max_steps: 4}\n"
      "runs:\n  - {name: a, model.hidden_size: 16}\n  - {name: b, model.hidden_size: 32}\n"
      "tune:\n  - {train.lr: 1.0e-3}\n  - {train.lr: 3.0e-3}\n");
  // After the sweep file's own `set:`: 3 steps, not 4, in every run.
  testing::CommandResult r = sweep(file + " --set train.max_steps=3 --set train.log_every=1");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* run : {"a-lr=1.0e-3", "b-lr=3.0e-3"}) {
    EXPECT_NE(read(out() / run / "config.yaml").find("max_steps: 3\n"), std::string::npos) << run;
    EXPECT_NE(read(out() / run / "metrics.jsonl").find("{\"step\": 3, \"done\": 1"), std::string::npos) << run;
  }
  EXPECT_EQ(count(r.output, "--set train.max_steps=4 --set model.hidden_size"), 4u) << r.output;
  EXPECT_EQ(count(r.output, "--set train.max_steps=3 --set train.log_every=1 --out"), 4u) << r.output;
  // A key the runs differ in (tuned, a runs entry's) would make them alike: refused before any run.
  for (const char* item : {"train.lr=1e-2", "model.hidden_size=64"}) {
    fs::remove_all(out());
    r = sweep(file + " --set " + item);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(std::string("--set ") + item + ": the runs of " + file + " differ in"), std::string::npos)
        << r.output;
    EXPECT_FALSE(fs::exists(out())) << item;
  }
  // A bad key or value is named as the command line gave it.
  r = sweep(file + " --set train.max_stpes=3");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("max_stpes"), std::string::npos) << r.output;
  r = sweep(file + " --set train.max_steps");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("--set train.max_steps: give KEY=VALUE"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace linattn
