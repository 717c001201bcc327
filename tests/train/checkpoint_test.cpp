// Checkpoints: exact resume, damaged and foreign files, model mismatches, interruption and kills.
#include "train/checkpoint.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/hdf5.h"
#include "small_disk.h"
#include "testing.h"
#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

using testing::error_of;

namespace fs = std::filesystem;

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-ckpt-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(Checkpoints, ResumeContinuesBitExactly) {
  // Train 40 steps with a checkpoint at 20; then resume from step 20 in a new trainer and train to
  // 40: every loss of the resumed half equals the uninterrupted run's.
  Config c = testing::tiny_config(dir_, {"train.max_steps=40", "checkpoint.every=20", "checkpoint.keep_last=5"});
  TrainSummary full = Trainer(c).run();
  ASSERT_EQ(full.losses.size(), 40u);
  std::string mid = checkpoint_path(dir_, 20);
  ASSERT_TRUE(fs::exists(mid));
  EXPECT_EQ(latest_checkpoint(dir_), checkpoint_path(dir_, 40));

  Trainer resumed(c, mid);
  TrainSummary rest = resumed.run();
  ASSERT_EQ(rest.losses.size(), 20u);
  for (size_t i = 0; i < 20; ++i) ASSERT_EQ(rest.losses[i], full.losses[20 + i]) << "step " << 20 + i;
  EXPECT_EQ(rest.last.loss, full.last.loss);
  EXPECT_EQ(rest.tokens, full.tokens);
}

// The tools take a run folder for its newest intact checkpoint; a damaged newer one is passed over,
// and a folder with none is an error naming the folder. Any other path is left as given.
TEST_F(Checkpoints, ARunFolderStandsForItsNewestIntactCheckpoint) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=4", "checkpoint.every=2", "checkpoint.keep_last=5"});
  Trainer(c).run();
  EXPECT_EQ(checkpoint_argument(dir_, "test"), checkpoint_path(dir_, 4));
  EXPECT_EQ(checkpoint_argument(checkpoint_path(dir_, 2), "test"), checkpoint_path(dir_, 2));
  EXPECT_EQ(checkpoint_argument(dir_ + "/no-such.h5", "test"), dir_ + "/no-such.h5");
  std::ofstream(checkpoint_path(dir_, 6)) << "not a checkpoint";
  EXPECT_EQ(checkpoint_argument(dir_, "test"), checkpoint_path(dir_, 4));
  for (int step : {2, 4}) fs::remove(checkpoint_path(dir_, step));
  const std::string error = error_of([&] { checkpoint_argument(dir_, "test"); });
  EXPECT_NE(error.find(dir_ + ": a run folder with no intact checkpoint"), std::string::npos) << error;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The "loss" of each log record in a metrics.jsonl text, by step.
std::map<int64_t, std::string> logged_losses(const std::string& metrics) {
  std::map<int64_t, std::string> out;
  const std::regex record("\\{\"step\": (\\d+), \"loss\": ([^,]+),");
  for (std::sregex_iterator it(metrics.begin(), metrics.end(), record), end; it != end; ++it)
    out[std::stoll((*it)[1])] = (*it)[2];
  return out;
}

// A log line's loss is the mean over the steps since the last one (train.log_every). Resumed from a
// checkpoint between two log lines, the run must log what the uninterrupted run logged: the steps
// before the checkpoint count too.
TEST_F(Checkpoints, AResumedRunLogsTheLossesOfTheUninterruptedRun) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=40", "train.log_every=10", "checkpoint.every=15",
                                         "checkpoint.keep_last=5"});
  Trainer(c).run();
  const std::string full = file_text(fs::path(dir_) / "metrics.jsonl");
  const std::map<int64_t, std::string> logged = logged_losses(full);
  ASSERT_EQ(logged.size(), 5u) << full;  // steps 1, 10, 20, 30, 40

  Trainer resumed(c, checkpoint_path(dir_, 15));
  resumed.run();
  const std::string again = file_text(fs::path(dir_) / "metrics.jsonl");
  EXPECT_EQ(logged_losses(again), logged) << "uninterrupted:\n" << full << "resumed at step 15:\n" << again;
}

// A checkpoint from before data.document_boundaries (every window one sequence then) resumes as
// cross when the config does not set the key, whatever today's default; a config that sets it wins.
TEST_F(Checkpoints, ACheckpointFromBeforeDocumentBoundariesResumesAcrossDocuments) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=1"});
  ASSERT_EQ(c.data.document_boundaries, DocumentBoundaries::reset);
  Trainer(c).run();
  Model model(c.model, DType::f32);
  load_checkpoint(latest_checkpoint(dir_), c, model, nullptr, nullptr);
  Config before = c;
  const std::string line = "  document_boundaries: reset\n";
  ASSERT_NE(before.text.find(line), std::string::npos) << before.text;
  before.text.erase(before.text.find(line), line.size());
  const std::string legacy = dir_ + "/legacy.h5";
  save_checkpoint(legacy, before, model, nullptr, TrainState{});
  EXPECT_EQ(parse_config(checkpoint_config_text(legacy), legacy).data.document_boundaries, DocumentBoundaries::cross);

  Config resumed = c;
  keep_checkpoint_defaults(resumed, legacy);
  EXPECT_EQ(resumed.data.document_boundaries, DocumentBoundaries::cross);
  EXPECT_NE(resumed.text.find("document_boundaries: cross"), std::string::npos) << resumed.text;
  Config asked = testing::tiny_config(dir_, {"train.max_steps=1", "data.document_boundaries=reset"});
  keep_checkpoint_defaults(asked, legacy);
  EXPECT_EQ(asked.data.document_boundaries, DocumentBoundaries::reset);
}

TEST_F(Checkpoints, FlippedByteInAWeightFailsNamingTheDataset) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=2"});
  Trainer(c).run();
  std::string path = latest_checkpoint(dir_);
  // Find the bytes of lm_head.weight's first row in the file and flip one.
  Model m(c.model, DType::f32);
  load_checkpoint(path, c, m, nullptr, nullptr);
  const Tensor& w = m.params().values()[m.params().layout().find("lm_head.weight")];
  std::string pattern(static_cast<const char*>(w.raw()), 64);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] ^= 0x04;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  std::string msg = error_of([&] { load_checkpoint(path, c, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("'lm_head.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}

TEST_F(Checkpoints, TruncatedForeignAndNewerFilesAreClearErrors) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=1"});
  Trainer(c).run();
  std::string path = latest_checkpoint(dir_);
  Model m(c.model, DType::f32);

  std::string truncated = dir_ + "/truncated.h5";
  fs::copy_file(path, truncated);
  fs::resize_file(truncated, fs::file_size(path) / 2);
  std::string msg = error_of([&] { load_checkpoint(truncated, c, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("truncated.h5"), std::string::npos) << msg;

  std::string foreign = dir_ + "/foreign.h5";
  {
    H5File f(foreign, H5File::Mode::create);
    f.set_attr("something", 1.0);
  }
  msg = error_of([&] { load_checkpoint(foreign, c, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("not a linattn checkpoint"), std::string::npos) << msg;

  std::string newer = dir_ + "/newer.h5";
  {
    H5File f(newer, H5File::Mode::create);
    f.set_attr("format", std::string("linattn-checkpoint"));
    f.set_attr("format_version", int64_t(kCheckpointFormatVersion + 1));
  }
  msg = error_of([&] { load_checkpoint(newer, c, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("newer linattn"), std::string::npos) << msg;

  msg = error_of([&] { load_checkpoint(dir_ + "/absent.h5", c, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST_F(Checkpoints, AnotherModelIsRefusedNamingTheFields) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=1"});
  Trainer(c).run();
  Config other = testing::tiny_config(dir_, {"train.max_steps=1", "model.hidden_size=32", "train.lr=1e-3"});
  Model m(other.model, DType::f32);
  std::string msg = error_of([&] { load_checkpoint(latest_checkpoint(dir_), other, m, nullptr, nullptr); });
  EXPECT_NE(msg.find("model.hidden_size: 64 -> 32"), std::string::npos) << msg;

  Config relr = testing::tiny_config(dir_, {"train.max_steps=1", "train.lr=1e-3"});
  Model same(relr.model, DType::f32);
  std::vector<std::string> warnings;
  load_checkpoint(latest_checkpoint(dir_), relr, same, nullptr, nullptr, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "train.lr: 0.003 -> 0.001");
}

TEST_F(Checkpoints, ResumeLatestSkipsADamagedNewestCheckpoint) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=4", "checkpoint.every=2", "checkpoint.keep_last=5"});
  Trainer(c).run();
  const std::string newest = checkpoint_path(dir_, 4);
  fs::resize_file(newest, fs::file_size(newest) / 2);
  std::vector<std::string> skipped;
  EXPECT_EQ(latest_verified_checkpoint(dir_, &skipped), checkpoint_path(dir_, 2));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind(newest + ": ", 0), 0u) << skipped[0];

  Config more = testing::tiny_config(dir_, {"train.max_steps=6", "checkpoint.every=2", "checkpoint.keep_last=5"});
  ::testing::internal::CaptureStdout();
  TrainSummary rest = Trainer(more, "latest").run();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rest.losses.size(), 4u) << out;
  EXPECT_NE(out.find("skipping the damaged checkpoint " + newest), std::string::npos) << out;
  EXPECT_NE(out.find("resumed from " + checkpoint_path(dir_, 2)), std::string::npos) << out;
}

TEST_F(Checkpoints, AFreshRunIntoAFolderWithARunIsRefused) {
  Config c = testing::tiny_config(dir_, {"train.max_steps=2"});
  Trainer(c).run();
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string config = read(fs::path(dir_) / "config.yaml"), metrics = read(fs::path(dir_) / "metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  Config other = testing::tiny_config(dir_, {"train.max_steps=3"});
  for (bool with_checkpoints : {true, false}) {
    SCOPED_TRACE(with_checkpoints ? "checkpoints and metrics" : "metrics only");
    if (!with_checkpoints) fs::remove_all(fs::path(dir_) / "checkpoints");
    std::string msg = error_of([&] { Trainer(other).run(); });
    EXPECT_NE(msg.find("already holds a run"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--resume " + dir_), std::string::npos) << msg;
    EXPECT_NE(msg.find("--out"), std::string::npos) << msg;
    EXPECT_EQ(read(fs::path(dir_) / "config.yaml"), config);
    EXPECT_EQ(read(fs::path(dir_) / "metrics.jsonl"), metrics);
  }
}

// The binary under a real signal: Ctrl-C finishes the step, writes a checkpoint and says how to
// resume; SIGKILL at random moments never leaves the newest checkpoint unreadable.
class CheckpointsProcess : public Checkpoints {
 protected:
  // Starts linattn-train with `extra` arguments, its output in DIR/LOG_NAME; with a `gate` pipe, only
  // once its write end is closed (so that two processes start at the same moment); with a
  // `file_size_limit`, under that RLIMIT_FSIZE (a write past it fails, as on a full disk).
  pid_t start(const std::vector<std::string>& extra, const std::string& log_name = "log.txt",
              const int* gate = nullptr, rlim_t file_size_limit = 0) {
    std::string cfg = dir_ + "/tiny.yaml";
    fs::create_directories(dir_);
    std::ofstream(cfg) << testing::tiny_config(dir_ + "/run").text;
    const char* build = std::getenv("LINATTN_BUILD_DIR");
    std::string bin = std::string(build ? build : "build") + "/linattn-train";
    std::vector<std::string> args{bin, cfg, "--set", "train.max_steps=100000", "--set", "train.log_every=1000"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_t pid = fork();
    if (pid == 0) {
      char c;
      if (gate) close(gate[1]);
      if (gate && read(gate[0], &c, 1) < 0) _exit(126);
      if (file_size_limit) {  // SIGXFSZ left to its default action, which linattn-train must override
        const rlimit limit{file_size_limit, RLIM_INFINITY};
        setrlimit(RLIMIT_FSIZE, &limit);
      }
      std::string log = dir_ + "/" + log_name;
      freopen(log.c_str(), "a", stdout);
      freopen(log.c_str(), "a", stderr);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    return pid;
  }
  std::string log(const std::string& name = "log.txt") {
    std::ifstream in(dir_ + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Waits until the run in `run_dir` has written a checkpoint (or exited, or ten minutes passed: a
  // bound for a hung run, not a measure of speed).
  void wait_for_checkpoint(pid_t pid, const std::string& run_dir) {
    for (int i = 0; i < 6000 && latest_checkpoint(run_dir).empty() && waitpid(pid, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
};

TEST_F(CheckpointsProcess, InterruptWritesACheckpointAndPrintsTheCommandThatContinues) {
  // The run folder's name needs quoting in the printed command.
  const std::string run = dir_ + "/my run";
  pid_t pid = start({"--out", run, "--set", "checkpoint.every=3"});
  // After the first checkpoint the run has taken steps and its handlers are in place.
  wait_for_checkpoint(pid, run);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string out = log();
  EXPECT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  // Nothing was evaluated: no validation figures (they were zeros and inf).
  EXPECT_EQ(out.find("validation:"), std::string::npos) << out;
  const char* build = std::getenv("LINATTN_BUILD_DIR");
  const std::string bin = std::string(build ? build : "build") + "/linattn-train";
  const std::string quoted = "'" + run + "'";
  const std::string command = bin + " " + dir_ + "/tiny.yaml --set train.max_steps=100000 --set train.log_every=1000 "
                              "--out " + quoted + " --set checkpoint.every=3 --resume " + quoted;
  EXPECT_NE(out.find("continue with: " + command + "\n"), std::string::npos) << out;
  std::string ckpt = latest_checkpoint(run);
  ASSERT_FALSE(ckpt.empty()) << out;
  Config c = testing::tiny_config(run, {"train.max_steps=100000", "train.log_every=1000", "checkpoint.every=3"});
  Model m(c.model, DType::f32);
  TrainState s;
  load_checkpoint(ckpt, c, m, nullptr, &s);
  EXPECT_GT(s.step, 0);

  // The printed command continues the run (here bounded by one more --set), and so does --resume
  // RUN_DIR alone, with the run's own config.yaml.
  for (const std::string& cmd : {command, bin + " --resume " + quoted}) {
    SCOPED_TRACE(cmd);
    fs::remove(dir_ + "/log.txt");
    const std::string more = " --set train.max_steps=" + std::to_string(s.step + 2);
    EXPECT_EQ(std::system((cmd + more + " >> '" + dir_ + "/log.txt' 2>&1").c_str()), 0) << log();
    EXPECT_NE(log().find("resumed from " + ckpt + " at step " + std::to_string(s.step)), std::string::npos) << log();
    ckpt = latest_checkpoint(run);
    load_checkpoint(ckpt, c, m, nullptr, &s);
  }
}

TEST_F(CheckpointsProcess, KilledMidWriteLeavesALoadableLatestCheckpoint) {
  Config c = testing::tiny_config(dir_ + "/run", {"train.max_steps=100000", "train.log_every=1000", "checkpoint.every=1"});
  Rng rng(5);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> args{"--set", "checkpoint.every=1", "--set", "checkpoint.keep_last=2"};
    // Later rounds continue the killed run (a fresh run into its folder is refused).
    if (round > 0) args.push_back("--resume");
    pid_t pid = start(args);
    wait_for_checkpoint(pid, dir_ + "/run");
    // A checkpoint is written after every step, so a random moment often lands inside a write.
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng.below(1500)));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::string ckpt = latest_checkpoint(dir_ + "/run");
    ASSERT_FALSE(ckpt.empty()) << log();
    Model m(c.model, DType::f32);
    AdamW opt(m.params(), c.train);
    TrainState s;
    EXPECT_NO_THROW(load_checkpoint(ckpt, c, m, &opt, &s)) << ckpt;
  }
}

TEST_F(CheckpointsProcess, AFullDiskStopsTheRunKeepingTheLastCheckpoint) {
  // Disks with room for the first checkpoint but not the second (which needs room beside the
  // first until it replaces it): the run must stop with exit code 1 saying the disk is full, announce
  // no checkpoint it did not write, and keep the first intact. Different sizes make the write fail
  // at different points (a dataset, a cached chunk, the final flush).
  Config probe = testing::tiny_config(dir_ + "/probe", {"train.max_steps=1"});
  Trainer(probe).run();
  const size_t size = fs::file_size(latest_checkpoint(dir_ + "/probe"));
  for (double room : {1.15, 1.5, 1.9}) {
    SCOPED_TRACE("a disk of " + std::to_string(room) + " checkpoints");
    testing::SmallDisk disk(dir_ + "/disk", size_t(room * double(size)));
    if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
    fs::remove(dir_ + "/log.txt");
    pid_t pid = start({"--out", disk.dir() + "/run", "--set", "train.max_steps=3", "--set", "checkpoint.every=1",
                       "--set", "checkpoint.keep_last=1"});
    int status = 0;
    waitpid(pid, &status, 0);
    std::string out = log();
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << out;
    EXPECT_EQ(WEXITSTATUS(status), 1) << out;
    const std::string run = disk.dir() + "/run";
    EXPECT_NE(out.find("the checkpoint of step 2 was not written to " + checkpoint_path(run, 2) + ": "),
              std::string::npos) << out;
    EXPECT_NE(out.find("no space left on the device"), std::string::npos) << out;
    // How much it needed, how much is free once the partial file is gone, and what to do.
    EXPECT_TRUE(std::regex_search(out, std::regex("\nthe checkpoint needs about [0-9.]+ MiB and [0-9.]+ MiB are free "
                                                  "in '" + run + "/checkpoints': free at least [0-9.]+ MiB there")))
        << out;
    EXPECT_NE(out.find("is intact; continue from it with --resume " + run + "\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("step-00000002.h5 ("), std::string::npos) << "a checkpoint was announced but not written\n"
                                                                   << out;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(disk.dir() + "/run/checkpoints"))
      names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"step-00000001.h5"});
    EXPECT_EQ(checkpoint_problem(disk.dir() + "/run/checkpoints/step-00000001.h5"), "");
  }
}

TEST_F(CheckpointsProcess, AFileSizeLimitBelowTheCheckpointSaysSo) {
  // A process limited to files of half a checkpoint (RLIMIT_FSIZE, `ulimit -f`: writes past it fail
  // with EFBIG while the disk has room, unless SIGXFSZ kills the process first): the first
  // checkpoint fails, and the message says that the limit, not the disk, is in the way.
  Config probe = testing::tiny_config(dir_ + "/probe", {"train.max_steps=1"});
  Trainer(probe).run();
  const size_t size = fs::file_size(latest_checkpoint(dir_ + "/probe"));
  const pid_t pid = start({"--out", dir_ + "/run", "--set", "train.max_steps=3", "--set", "checkpoint.every=1"},
                          "log.txt", nullptr, size / 2);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = log();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("the checkpoint of step 1 was not written to " + checkpoint_path(dir_ + "/run", 1) + ": "),
            std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nthe checkpoint needs about [0-9.]+ MiB, over this process's file "
                                                "size limit of [0-9.]+ MiB \\(ulimit -f\\): raise the limit\n")))
      << out;
  EXPECT_NE(out.find("there is no earlier checkpoint"), std::string::npos) << out;
  EXPECT_TRUE(latest_checkpoint(dir_ + "/run").empty()) << out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The "step" of each record of `kind` ("loss", "val_loss", "done") in a metrics.jsonl text.
std::vector<int64_t> steps_of(const std::string& metrics, const std::string& kind) {
  std::vector<int64_t> steps;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"" + kind + "\": ") != std::string::npos) steps.push_back(std::stoll(line.substr(9)));
  return steps;
}

bool strictly_increasing(const std::vector<int64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), [](int64_t a, int64_t b) { return a >= b; }) == v.end();
}

TEST_F(CheckpointsProcess, TwoTrainersStartedTogetherIntoOneFolderOneIsRefused) {
  // Released at the same moment, both pass the "already holds a run" check; the folder's lock lets one
  // train and refuses the other, naming the first's PID. The folder then holds one run's records.
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  const std::vector<std::string> common{"--out", dir_ + "/run", "--set", "train.max_steps=30", "--set",
                                        "train.log_every=1", "--set", "checkpoint.every=10"};
  auto with_seed = [&](const char* seed) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--set", std::string("train.seed=") + seed});
    return args;
  };
  const pid_t a = start(with_seed("11"), "a.txt", gate), b = start(with_seed("22"), "b.txt", gate);
  close(gate[0]);
  close(gate[1]);
  int status_a = 0, status_b = 0;
  waitpid(a, &status_a, 0);
  waitpid(b, &status_b, 0);
  ASSERT_TRUE(WIFEXITED(status_a) && WIFEXITED(status_b)) << log("a.txt") << log("b.txt");
  ASSERT_EQ(WEXITSTATUS(status_a) + WEXITSTATUS(status_b), 1) << log("a.txt") << log("b.txt");
  const bool a_won = WEXITSTATUS(status_a) == 0;
  const std::string loser = log(a_won ? "b.txt" : "a.txt");
  // Refused by the lock (or, if the winner was through before the loser looked, by the check).
  const std::string holder = "is in use by another process (pid " + std::to_string(a_won ? a : b) + ", command: ";
  EXPECT_TRUE(loser.find(holder) != std::string::npos || loser.find("already holds a run") != std::string::npos)
      << loser;
  const std::string metrics = read_text(dir_ + "/run/metrics.jsonl");
  const std::vector<int64_t> losses = steps_of(metrics, "loss");
  EXPECT_EQ(losses.size(), 30u) << metrics;
  EXPECT_TRUE(strictly_increasing(losses)) << metrics;
  EXPECT_EQ(steps_of(metrics, "done"), std::vector<int64_t>{30}) << metrics;
  EXPECT_NE(read_text(dir_ + "/run/config.yaml").find(a_won ? "seed: 11" : "seed: 22"), std::string::npos);
  EXPECT_EQ(checkpoint_problem(latest_checkpoint(dir_ + "/run")), "");
}

TEST_F(CheckpointsProcess, ResumingARunThatIsStillTrainingIsRefusedWithItsPid) {
  const pid_t pid = start({"--out", dir_ + "/run", "--set", "checkpoint.every=1"});
  wait_for_checkpoint(pid, dir_ + "/run");
  const testing::CommandResult second = testing::run_command(
      testing::built_binary("linattn-train") + " --resume " + dir_ + "/run --set train.max_steps=1");
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_NE(second.output.find("the run folder '" + dir_ + "/run' is in use by another process (pid " +
                               std::to_string(pid) + ", command: "),
            std::string::npos)
      << second.output;
  EXPECT_EQ(steps_of(read_text(dir_ + "/run/metrics.jsonl"), "done"), std::vector<int64_t>{}) << "the second wrote";
  // Once the first is gone, the run continues.
  const testing::CommandResult third = testing::run_command(
      testing::built_binary("linattn-train") + " --resume " + dir_ + "/run --set train.max_steps=1");
  EXPECT_EQ(third.status, 0) << third.output;
}

TEST_F(CheckpointsProcess, AnInterruptRightAfterACheckpointPrintsItOnce) {
  // With a checkpoint after every step, Ctrl-C always lands right after one: the run stops with that
  // checkpoint, announced once.
  const pid_t pid = start({"--out", dir_ + "/run", "--set", "checkpoint.every=1"});
  wait_for_checkpoint(pid, dir_ + "/run");
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = log();
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  std::istringstream lines(out);
  std::vector<std::string> announced;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("checkpoint: ", 0) == 0) announced.push_back(line.substr(0, line.find(" (")));
  ASSERT_FALSE(announced.empty()) << out;
  EXPECT_EQ(std::set<std::string>(announced.begin(), announced.end()).size(), announced.size()) << out;
}

TEST_F(CheckpointsProcess, AMetricsRecordThatCannotBeWrittenStopsTheRunCleanlyWithoutRoot) {
  // A file size limit of 6000 bytes: metrics.jsonl reaches it after some 40 records, and the
  // checkpoint (about 0.5 MB) cannot be written either. The run stops with exit code 1, saying both,
  // and leaves only whole records and no temporary file.
  const pid_t pid = start({"--out", dir_ + "/run", "--set", "train.max_steps=400", "--set", "train.log_every=1"},
                          "log.txt", nullptr, 6000);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = log();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("to '" + dir_ + "/run/metrics.jsonl': File too large"), std::string::npos) << out;
  EXPECT_NE(out.find("was not written"), std::string::npos) << out;
  EXPECT_NE(out.find("there is no earlier checkpoint"), std::string::npos) << out;
  const std::string metrics = read_text(dir_ + "/run/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back(), '\n') << "a partial record was left";
  EXPECT_GT(steps_of(metrics, "loss").size(), 10u);
  EXPECT_TRUE(!fs::exists(dir_ + "/run/checkpoints") || fs::is_empty(dir_ + "/run/checkpoints"));
}

TEST_F(CheckpointsProcess, AFullDiskUnderTheMetricsStopsTheRunWithACheckpointAndAResumeContinuesTheLog) {
  // metrics.jsonl on a small disk of its own (a link into it), the checkpoints beside it with room:
  // the record that does not fit stops the run with exit code 1, a checkpoint of the step it reached,
  // and no partial line. Resumed once there is space, the log goes on from that checkpoint.
  testing::SmallDisk disk(dir_ + "/disk", 8192);
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  fs::create_directories(dir_ + "/run");
  fs::create_symlink(disk.dir() + "/metrics.jsonl", dir_ + "/run/metrics.jsonl");
  const pid_t pid = start({"--out", dir_ + "/run", "--set", "train.max_steps=400", "--set", "train.log_every=1",
                           "--set", "checkpoint.every=100"});
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = log();
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  EXPECT_NE(out.find("to '" + dir_ + "/run/metrics.jsonl': No space left on device"), std::string::npos) << out;
  const std::string stopped_at = "the run stopped with the checkpoint of step ";
  const size_t at = out.find(stopped_at);
  ASSERT_NE(at, std::string::npos) << out;
  const int64_t stopped = std::stoll(out.substr(at + stopped_at.size()));
  EXPECT_NE(out.find("continue with --resume " + dir_ + "/run"), std::string::npos) << out;
  const std::string ckpt = checkpoint_path(dir_ + "/run", stopped);
  EXPECT_EQ(checkpoint_problem(ckpt), "") << out;
  std::string metrics = read_text(dir_ + "/run/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back(), '\n') << "a partial record was left";
  std::vector<int64_t> losses = steps_of(metrics, "loss");
  ASSERT_FALSE(losses.empty());
  EXPECT_EQ(losses.back(), stopped - 1) << "the records before the one that failed are all there";

  // Space again: the log moves off the small disk; the resume appends after the last whole record.
  fs::remove(dir_ + "/run/metrics.jsonl");
  std::ofstream(dir_ + "/run/metrics.jsonl") << metrics;
  fs::remove(dir_ + "/log.txt");
  const pid_t again = start({"--resume", dir_ + "/run", "--set", "train.max_steps=" + std::to_string(stopped + 20),
                             "--set", "train.log_every=1", "--set", "checkpoint.every=100"});
  waitpid(again, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << log();
  metrics = read_text(dir_ + "/run/metrics.jsonl");
  losses = steps_of(metrics, "loss");
  EXPECT_TRUE(strictly_increasing(losses)) << metrics;
  EXPECT_EQ(losses.back(), stopped + 20);
  EXPECT_EQ(steps_of(metrics, "done"), std::vector<int64_t>{stopped + 20}) << metrics;
}

}  // namespace
}  // namespace linattn
