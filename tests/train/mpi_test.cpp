// Data parallelism under a real mpirun: two ranks give the same losses and final weights as one
// process training on the same global batch, with one gradient bucket or many; checkpoints move
// between world sizes; bad starts (configs that differ, a batch the ranks cannot split, a rank that
// dies) end the job with a message instead of a wrong result or a hang.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "core/hdf5.h"
#include "netns_hosts.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<double> logged_losses(const std::string& metrics) {
  std::string text = read_file(metrics);
  std::vector<double> losses;
  std::regex re("\"loss\": ([-0-9.e+]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

// got[i] equals want[first + i] to relative 1e-5: the ranks sum their gradients in another order
// than one process does, which moves float32 losses by ~1e-7 relative per step.
void expect_losses_close(const std::vector<double>& got, const std::vector<double>& want, size_t first) {
  ASSERT_EQ(got.size() + first, want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[first + i], 1e-5 * std::abs(want[first + i])) << "step " << first + i + 1;
}

// Every parameter of two checkpoints equal to relative 1e-5 (for the same reason) or `tolerance`.
void expect_weights_close(const std::string& got_path, const std::string& want_path, double tolerance = 1e-5) {
  H5File got(got_path, H5File::Mode::read), want(want_path, H5File::Mode::read);
  int compared = 0;
  for (const std::string& name : want.dataset_names()) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    SCOPED_TRACE(name);
    EXPECT_CLOSE(got.read(name, DType::f64), want.read(name, DType::f64), tolerance);
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

// A folder per test with a tiny config: 20 steps of a global batch of 8 sequences (4 per rank with
// two ranks), a loss logged every step, checkpoints at steps 10 and 20.
class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef LINATTN_MPI
    GTEST_SKIP() << "built without MPI";
#endif
    ASSERT_EQ(std::system("command -v mpirun > /dev/null"), 0) << "mpirun is missing: install openmpi-bin";
    dir_ = (fs::temp_directory_path() /
            ("linattn-mpi-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
             std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    config_ = dir_ + "/tiny.yaml";
    std::ofstream(config_) << testing::tiny_config(dir_ + "/run", {"train.max_steps=20", "train.log_every=1",
                                                                   "data.val_tokens=4096", "train.threads=1",
                                                                   "checkpoint.every=10", "checkpoint.keep_last=5"})
                                  .text;
    const char* build = std::getenv("LINATTN_BUILD_DIR");
    bin_ = std::string(build ? build : "build") + "/linattn-train";
    // CI runs as root, which mpirun refuses unless told.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // --oversubscribe: two ranks on a machine that MPI may count as fewer slots.
  static std::string mpirun() { return "mpirun --oversubscribe "; }
  // linattn-train on the config with `args`, on one process or under mpirun; its run folder is
  // dir_/NAME, its output dir_/NAME.log. Returns the exit code.
  int train(int ranks, const std::string& name, const std::string& args = "") {
    std::string cmd = (ranks > 1 ? mpirun() + "-np " + std::to_string(ranks) + " " : "") + bin_ + " " + config_ +
                      " --out " + dir_ + "/" + name + " " + args + " > " + dir_ + "/" + name + ".log 2>&1";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string log(const std::string& name) { return read_file(dir_ + "/" + name + ".log"); }
  std::vector<double> losses(const std::string& name) { return logged_losses(dir_ + "/" + name + "/metrics.jsonl"); }
  std::string checkpoint(const std::string& name, int64_t step) { return checkpoint_path(dir_ + "/" + name, step); }

  std::string dir_, config_, bin_;
};

TEST_F(DataParallel, TwoRanksEqualOneProcess) {
  ASSERT_EQ(train(1, "one"), 0) << log("one");
  ASSERT_EQ(train(2, "two"), 0) << log("two");
  // The tiny model's gradients fit one bucket of the default size: it starts when backward ends.
  EXPECT_NE(log("two").find("data parallel: 1 gradient buckets"), std::string::npos) << log("two");
  EXPECT_TRUE(std::regex_search(log("two"), std::regex("data parallel: 2 ranks on 1 host: [^ ]+ \\(ranks 0-1\\)\n")))
      << log("two");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 20u);
  expect_losses_close(losses("two"), one, 0);
  expect_weights_close(checkpoint("two", 20), checkpoint("one", 20));
}

// MQAR under two ranks: each reads its half of every batch of generated examples (the loss a mean
// over the queries, which every example has the same number of), so losses, weights and the final
// recall accuracy are those of one process.
TEST_F(DataParallel, MqarTwoRanksEqualOneProcess) {
  std::ofstream(config_) << parse_config(R"(model: {vocab_size: 16, hidden_size: 32, num_hidden_layers: 2, num_heads: 2, mixer: deltanet}
data:
  source: mqar
  seq_len: 32
  mqar: {vocab_size: 16, num_kv_pairs: 4, num_train_examples: 60, num_val_examples: 30}
train: {batch_size: 8, warmup_steps: 2, max_steps: 12, log_every: 1, threads: 1, out_dir: unused}
)", "mqar.yaml").text;
  ASSERT_EQ(train(1, "one"), 0) << log("one");
  ASSERT_EQ(train(2, "two"), 0) << log("two");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 12u);
  expect_losses_close(losses("two"), one, 0);
  // Only 4 of the 32 positions of an example take a loss, so many gradient entries are sums of few
  // terms that nearly cancel; AdamW divides each by its own RMS, which keeps their float32 rounding
  // (summed in another order by two ranks) at full size: up to 3.4e-5 relative after 12 steps here.
  expect_weights_close(checkpoint("two", 12), checkpoint("one", 12), 2e-4);
  std::smatch a, b;
  const std::regex recall("\"recall_accuracy\": ([0-9.e+-]+)");
  const std::string m1 = read_file(dir_ + "/one/metrics.jsonl"), m2 = read_file(dir_ + "/two/metrics.jsonl");
  ASSERT_TRUE(std::regex_search(m1, a, recall)) << m1;
  ASSERT_TRUE(std::regex_search(m2, b, recall)) << m2;
  EXPECT_NEAR(std::stod(b[1]), std::stod(a[1]), 1.5 / 120) << "at most one of the 120 queries may flip";
}

TEST_F(DataParallel, ManySmallBucketsEqualOneProcess) {
  // 1 KiB buckets: most parameters get their own bucket, whose sum starts while backward is still
  // working on earlier layers. With the embedding tied to the LM head, its bucket must wait for
  // the embedding's own backward, the last node; with two micro-batches per rank the buckets start
  // in the second one's backward only.
  const std::string tied = "--set model.tie_word_embeddings=true";
  ASSERT_EQ(train(1, "one", tied), 0) << log("one");
  ASSERT_EQ(train(2, "two", tied + " --set distributed.bucket_mb=0.001 --set train.micro_batch_size=2"), 0)
      << log("two");
  std::smatch m;
  std::string out = log("two");
  ASSERT_TRUE(std::regex_search(out, m, std::regex("data parallel: (\\d+) gradient buckets"))) << out;
  EXPECT_GE(std::stoi(m[1]), 10) << out;
  EXPECT_NE(out.find("x micro-batch 2 x 2 accumulation steps"), std::string::npos) << out;
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 20u);
  expect_losses_close(losses("two"), one, 0);
  expect_weights_close(checkpoint("two", 20), checkpoint("one", 20));
}

TEST_F(DataParallel, CheckpointsResumeOnAnotherNumberOfRanks) {
  // The data position in a checkpoint is global, so step 10 of a two-rank run continues on one
  // process (and step 10 of a one-process run on two ranks) as the uninterrupted run did.
  ASSERT_EQ(train(1, "one"), 0) << log("one");
  ASSERT_EQ(train(2, "two"), 0) << log("two");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 20u);
  for (auto [ranks, from, name] : {std::tuple{1, "two", "two-then-one"}, std::tuple{2, "one", "one-then-two"}}) {
    SCOPED_TRACE(name);
    ASSERT_EQ(train(ranks, name, "--resume " + checkpoint(from, 10)), 0) << log(name);
    EXPECT_NE(log(name).find("resumed from " + checkpoint(from, 10) + " at step 10"), std::string::npos) << log(name);
    expect_losses_close(losses(name), one, 10);
    expect_weights_close(checkpoint(name, 20), checkpoint("one", 20));
  }
}

TEST_F(DataParallel, ConfigsThatDifferBetweenRanksAreAClearError) {
  // One mpirun, two programs: rank 1 overrides the learning rate.
  std::string cmd = mpirun() + "-np 1 " + bin_ + " " + config_ + " : -np 1 " + bin_ + " " + config_ +
                    " --set train.lr=1e-3 > " + dir_ + "/log 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  std::string out = read_file(dir_ + "/log");
  EXPECT_NE(out.find("rank 1 has a different config than rank 0: every rank must be started with the same config"),
            std::string::npos)
      << out;
}

TEST_F(DataParallel, GlobalBatchNotDivisibleByRanksIsAClearError) {
  EXPECT_NE(train(2, "run", "--set train.batch_size=3"), 0);
  EXPECT_NE(log("run").find("must be divisible by the number of ranks, 2"), std::string::npos) << log("run");
}

TEST_F(DataParallel, ARankThatDiesEndsTheJobInsteadOfHanging) {
  // Rank 1 is killed (SIGKILL: no chance to say anything) 5 s after it starts, while rank 0 trains
  // with no step bound and would wait for rank 1 forever in the next collective. mpirun must end
  // the job and name the rank; `timeout 300` turns a hang into exit code 124.
  std::string endless = " " + config_ + " --set train.max_steps=1000000 --out " + dir_ + "/run";
  std::string cmd = "timeout 300 " + mpirun() + "-np 1 " + bin_ + endless + " : -np 1 timeout -s KILL 5 " + bin_ +
                    endless + " > " + dir_ + "/log 2>&1";
  int status = std::system(cmd.c_str());
  std::string out = read_file(dir_ + "/log");
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_NE(WEXITSTATUS(status), 124) << "the job hung after rank 1 died\n" << out;
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("process rank 1"), std::string::npos) << out;
  EXPECT_NE(out.find("signal 9"), std::string::npos) << out;
}

// An error raised on one rank only (LINATTN_INJECT_FAULT, train/fault_injection.h): rank 1 fails as it
// starts step 15 while rank 0 waits for it in that step's gradient sum. Every rank must end, the
// message must name rank 1, and nothing may be lost: the checkpoint of step 10 intact, no partial
// file or metrics record, and a resume there that continues as the uninterrupted run did.
TEST_F(DataParallel, AnErrorOnOneRankEndsEveryRankNamingItAndLosesNothing) {
  ASSERT_EQ(train(1, "one"), 0) << log("one");
  const auto t0 = std::chrono::steady_clock::now();
  std::string cmd = "LINATTN_INJECT_FAULT=error:1:15 timeout 300 " + mpirun() + "-np 2 " + bin_ + " " + config_ +
                    " --out " + dir_ + "/run > " + dir_ + "/run.log 2>&1";
  int status = std::system(cmd.c_str());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string out = log("run");
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_NE(WEXITSTATUS(status), 124) << "the job hung after rank 1 failed\n" << out;
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  std::printf("the job ended %.1f s after it started (14 steps of training included)\n", seconds);
  EXPECT_NE(out.find("linattn-train: error on rank 1: LINATTN_INJECT_FAULT: the injected error of step 15\n"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("checkpoint: " + checkpoint("run", 20)), std::string::npos) << out;
  // mpirun's SIGTERM to rank 0 is no Ctrl-C: rank 0 says that the job is ending, not "interrupt
  // received"; and no ORTE_ERROR_LOG of a help message that mpirun read cut short.
  EXPECT_EQ(out.find("interrupt received"), std::string::npos) << out;
  EXPECT_EQ(out.find("ORTE_ERROR_LOG"), std::string::npos) << out;

  const std::string ckpts = dir_ + "/run/checkpoints";
  for (const auto& e : fs::directory_iterator(ckpts))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "a partial file: " << e.path();
  EXPECT_EQ(latest_checkpoint(dir_ + "/run"), checkpoint("run", 10));
  EXPECT_EQ(checkpoint_problem(checkpoint("run", 10)), "");
  const std::string metrics = read_file(dir_ + "/run/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(metrics.back(), '\n') << "a partial record was left";
  EXPECT_LE(losses("run").size(), 14u) << metrics;

  // The resume cuts the metrics back to step 10 and goes on as the run without a fault did.
  ASSERT_EQ(train(2, "run", "--resume " + dir_ + "/run"), 0) << log("run");
  EXPECT_NE(log("run").find("resumed from " + checkpoint("run", 10) + " at step 10"), std::string::npos) << log("run");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 20u);
  expect_losses_close(losses("run"), one, 0);
  expect_weights_close(checkpoint("run", 20), checkpoint("one", 20));
}

// NaN gradients on one rank only: the gradient sum carries them to every rank, which all skip the
// step together (their weights stay the same), as one process skips it. Losses and weights equal
// those of one process given the NaN at the same step.
TEST_F(DataParallel, NanGradientsOnOneRankSkipTheStepOnEveryRank) {
  setenv("LINATTN_INJECT_FAULT", "nan:0:5", 1);
  const int one_rc = train(1, "one");
  setenv("LINATTN_INJECT_FAULT", "nan:1:5", 1);
  const int two_rc = train(2, "two");
  unsetenv("LINATTN_INJECT_FAULT");
  ASSERT_EQ(one_rc, 0) << log("one");
  ASSERT_EQ(two_rc, 0) << log("two");
  EXPECT_NE(log("two").find("warning: LINATTN_INJECT_FAULT: NaN gradients on rank 1 at step 5, as asked"),
            std::string::npos) << log("two");
  EXPECT_NE(log("two").find("warning: step 5: the gradient norm is nan; skipping the step"), std::string::npos)
      << log("two");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 19u) << "step 5 is skipped";
  expect_losses_close(losses("two"), one, 0);
  expect_weights_close(checkpoint("two", 20), checkpoint("one", 20));
}

TEST_F(DataParallel, AFaultForARankTheRunDoesNotHaveIsAnError) {
  setenv("LINATTN_INJECT_FAULT", "error:2:3", 1);
  const int rc = train(2, "run");
  unsetenv("LINATTN_INJECT_FAULT");
  EXPECT_NE(rc, 0);
  EXPECT_NE(log("run").find("LINATTN_INJECT_FAULT names rank 2, but the run has 2 ranks"), std::string::npos)
      << log("run");
}

// Several hosts on this machine (tests/train/netns_hosts.h: network namespaces joined by a bridge,
// ranks started through `ip netns exec` as OpenMPI's rsh agent, TCP between them). Needs root; CI
// runs it as root. One rank per host.
class MultiHost : public DataParallel {
 protected:
  void SetUp() override {
    DataParallel::SetUp();
    if (IsSkipped()) return;
    hosts_ = std::make_unique<testing::NetnsHosts>(2, dir_);
    if (!hosts_->ready()) GTEST_SKIP() << hosts_->why_not();
  }
  void TearDown() override {
    hosts_.reset();
    DataParallel::TearDown();
  }
  // linattn-train on the config with `args`, one rank on each of `hosts` hosts (in the background
  // with `background`); the run folder dir_/NAME, its output dir_/NAME.log; `exported` environment
  // variables passed to the ranks. Returns the exit code (0 when started in the background).
  int train_on_hosts(int hosts, const std::string& name, const std::string& args = "",
                     const std::string& exported = "", bool background = false) {
    std::string cmd = "timeout 300 " + hosts_->mpirun(hosts, exported) + bin_ + " " + config_ + " --out " + dir_ +
                      "/" + name + " " + args + " > " + dir_ + "/" + name + ".log 2>&1" + (background ? " &" : "");
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // Waits until the run NAME has a checkpoint (or ten minutes passed: a bound for a hung start).
  void wait_for_checkpoint(const std::string& name) {
    for (int i = 0; i < 6000 && latest_checkpoint(dir_ + "/" + name).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Waits until no linattn-train runs on any host; returns the seconds it took (bounded by 300).
  double wait_for_every_rank_to_end() {
    const auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    while (seconds() < 300 && !(hosts_->pids(1, "linattn-train").empty() && hosts_->pids(2, "linattn-train").empty() &&
                                hosts_->pids(1, "mpirun").empty()))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return seconds();
  }
  // Every checkpoint of the run NAME loads and verifies.
  void expect_checkpoints_intact(const std::string& name) {
    for (const auto& e : fs::directory_iterator(dir_ + "/" + name + "/checkpoints")) {
      if (e.path().extension() == ".h5") {
        EXPECT_EQ(checkpoint_problem(e.path().string()), "") << e.path();
      }
    }
    const std::string metrics = read_file(dir_ + "/" + name + "/metrics.jsonl");
    ASSERT_FALSE(metrics.empty());
    EXPECT_EQ(metrics.back(), '\n') << "a partial record was left";
  }

  std::unique_ptr<testing::NetnsHosts> hosts_;
};

TEST_F(MultiHost, TwoHostsEqualOneProcess) {
  // The ranks run on two hosts: each names its own.
  ASSERT_EQ(std::system(("timeout 300 " + hosts_->mpirun(2) + "hostname > " + dir_ + "/hostnames 2>&1").c_str()), 0)
      << read_file(dir_ + "/hostnames");
  const std::string names = read_file(dir_ + "/hostnames");
  EXPECT_EQ(names.size(), 12u) << names;
  EXPECT_NE(names.find("host1\n"), std::string::npos) << names;
  EXPECT_NE(names.find("host2\n"), std::string::npos) << names;

  ASSERT_EQ(train(1, "one"), 0) << log("one");
  ASSERT_EQ(train_on_hosts(2, "two"), 0) << log("two");
  EXPECT_NE(log("two").find("data parallel: 2 ranks on 2 hosts: host1 (rank 0), host2 (rank 1)\n"), std::string::npos)
      << log("two");
  std::vector<double> one = losses("one");
  ASSERT_EQ(one.size(), 20u);
  expect_losses_close(losses("two"), one, 0);
  expect_weights_close(checkpoint("two", 20), checkpoint("one", 20));
}

TEST_F(MultiHost, AnErrorOnTheOtherHostsRankEndsEveryRankNamingIt) {
  setenv("LINATTN_INJECT_FAULT", "error:1:3", 1);
  const int rc = train_on_hosts(2, "run", "", "LINATTN_INJECT_FAULT");
  unsetenv("LINATTN_INJECT_FAULT");
  EXPECT_NE(rc, 124) << "the job hung\n" << log("run");
  EXPECT_NE(rc, 0) << log("run");
  EXPECT_NE(log("run").find("linattn-train: error on rank 1: LINATTN_INJECT_FAULT: the injected error of step 3\n"),
            std::string::npos) << log("run");
}

TEST_F(MultiHost, ARankKilledOnOneHostEndsEveryRankAndTheRunResumesOnEitherLayout) {
  // Rank 1 (host2) is SIGKILLed once the run has a checkpoint, mid-step or mid-collective.
  const std::string endless = "--set train.max_steps=1000000 --set train.eval_every=0";
  ASSERT_EQ(train_on_hosts(2, "run", endless, "", true), 0);
  wait_for_checkpoint("run");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string pid = hosts_->pids(2, "linattn-train");
  ASSERT_FALSE(pid.empty()) << log("run");
  ASSERT_EQ(std::system(("kill -KILL " + pid).c_str()), 0);
  const double seconds = wait_for_every_rank_to_end();
  std::printf("every rank ended %.1f s after rank 1 was killed\n", seconds);
  EXPECT_LT(seconds, 30) << log("run");
  const std::string out = log("run");
  EXPECT_NE(out.find("process rank 1"), std::string::npos) << out;
  EXPECT_NE(out.find("on node host2 exited on signal 9"), std::string::npos) << out;
  expect_checkpoints_intact("run");

  // From its last checkpoint, 10 more steps: on both hosts into the run's own folder, on host1 alone
  // into another, and (the reference) as one process without mpirun. All three agree.
  const std::string ckpt = latest_checkpoint(dir_ + "/run");
  const int64_t step = std::stoll(fs::path(ckpt).stem().string().substr(5));  // step-00000010
  const std::string more = endless + " --set train.max_steps=" + std::to_string(step + 10);
  ASSERT_EQ(train(1, "reference", more + " --resume " + ckpt), 0) << log("reference");
  ASSERT_EQ(train_on_hosts(2, "run", more + " --resume " + dir_ + "/run"), 0) << log("run");
  ASSERT_EQ(train_on_hosts(1, "host1", more + " --resume " + ckpt), 0) << log("host1");
  const std::vector<double> reference = losses("reference");
  ASSERT_EQ(reference.size(), 10u);
  for (const std::string name : {"run", "host1"}) {
    SCOPED_TRACE(name);
    EXPECT_NE(log(name).find("resumed from " + ckpt + " at step " + std::to_string(step)), std::string::npos)
        << log(name);
    std::vector<double> got = losses(name);
    ASSERT_GE(got.size(), 10u);
    expect_losses_close(std::vector<double>(got.end() - 10, got.end()), reference, 0);
    expect_weights_close(checkpoint(name, step + 10), checkpoint("reference", step + 10));
  }
  expect_checkpoints_intact("run");
  for (const auto& e : fs::directory_iterator(dir_ + "/run/checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "a partial file stayed: " << e.path();
}

TEST_F(MultiHost, ACutLinkEndsEveryRankNamingTheLostHostAndItsRank) {
  // host2's link goes down once the run has a checkpoint: no process dies and no connection is
  // closed, packets just stop. OpenMPI's keepalive probes find the silent daemon and end the job.
  ASSERT_EQ(train_on_hosts(2, "run", "--set train.max_steps=1000000 --set train.eval_every=0", "", true), 0);
  wait_for_checkpoint("run");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(hosts_->cut_link(2));
  const double seconds = wait_for_every_rank_to_end();
  std::printf("every rank ended %.1f s after host2's link was cut\n", seconds);
  EXPECT_LT(seconds, 60) << log("run");
  // OpenMPI names the host it lost; the start-up line names the ranks on it.
  const std::string out = log("run");
  EXPECT_NE(out.find("data parallel: 2 ranks on 2 hosts: host1 (rank 0), host2 (rank 1)\n"), std::string::npos)
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("lost communication with a remote daemon[^]*Remote daemon: .* on node "
                                                "host2\n")))
      << out;
  expect_checkpoints_intact("run");
}

}  // namespace
}  // namespace linattn
