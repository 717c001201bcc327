// The training loop's control flow through the real Trainer on a tiny model and a crafted dataset:
// a batch that makes the loss non-finite is skipped and training goes on; max_bad_steps bad steps in
// a row stop the run with advice; max_steps, max_tokens and max_time stop it where README says, with
// the schedule's learning rates; clipping scales the gradients and the reported norm is the one
// before clipping.
//
// Bad steps come from the data, not from a hook: the training text is random letters with a single
// '#', and the test sets the embedding row of '#' to NaN, so exactly the batches that read that
// byte produce a NaN loss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kPoison = '#';

// n random lowercase letters and spaces from a fixed seed (no '#').
std::string random_text(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, ' ');
  for (char& c : s) c = " abcdefghijklmnopqrstuvwxyz"[gen() % 27];
  return s;
}

// 6000 training bytes (about 93 windows of 64 tokens: 11 batches of 8 an epoch) with one '#' in the
// middle, where every epoch's windows cover it.
const std::string& shards() {
  static std::string dir = [] {
    std::string train = random_text(6000, 1);
    train[3000] = char(kPoison);
    return testing::text_shards("control", train, random_text(700, 2));
  }();
  return dir;
}

// A run folder of its own, removed at the end of the test.
struct RunDir {
  std::string path;
  explicit RunDir(const std::string& name)
      : path((fs::temp_directory_path() / ("linattn-control-" + name + "-" + std::to_string(getpid()))).string()) {
    fs::remove_all(path);
  }
  ~RunDir() { fs::remove_all(path); }
};

Config tiny(const RunDir& dir, std::vector<std::string> overrides) {
  overrides.push_back("train.log_every=1");
  return testing::tiny_config_on(shards(), dir.path, overrides);
}

// One metrics.jsonl progress line.
struct Logged {
  int64_t step;
  double lr, grad_norm;
  std::string grad_norm_text;
};

std::string field(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\": ");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 4;
  return line.substr(from, line.find_first_of(",}", from) - from);
}

// The progress lines of the run's metrics.jsonl (wherever in the run folder it is).
std::vector<Logged> metrics(const RunDir& dir) {
  std::vector<Logged> out;
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) {
    if (e.path().filename() != "metrics.jsonl") continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      if (field(line, "loss").empty()) continue;
      out.push_back({std::stoll(field(line, "step")), std::stod(field(line, "lr")),
                     std::stod(field(line, "grad_norm")), field(line, "grad_norm")});
    }
  }
  return out;
}

// Sets the embedding rows of `tokens` to NaN.
void poison(Model& model, const std::vector<int32_t>& tokens) {
  Parameters& p = model.params();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.name(int(i)) != "model.embeddings.weight") continue;
    const Tensor& e = p[int(i)].value();
    const int64_t rows = e.shape()[0], width = e.shape()[1];
    dispatch_float(e.dtype(), [&](auto zero) {
      using T = decltype(zero);
      for (int64_t r = 0; r < rows; ++r)
        if (std::find(tokens.begin(), tokens.end(), int32_t(r)) != tokens.end())
          for (int64_t j = 0; j < width; ++j) e.data<T>()[r * width + j] = T(NAN);
    });
    return;
  }
  FAIL() << "no model.embeddings.weight";
}

// The steps among the first n whose batch reads '#', from a loader set up as the trainer sets up its
// own (one rank, the whole batch per step, seed train.seed + 1).
std::vector<int64_t> poisoned_steps(const Config& c, int64_t n) {
  data::LoaderOptions lo;
  lo.batch_size = c.train.batch_size;
  lo.seq_len = c.data.seq_len;
  lo.seed = c.train.seed + 1;
  data::TrainLoader loader(data::Dataset::open(c.data.path, "train"), lo);
  std::vector<int64_t> steps;
  for (int64_t s = 0; s < n; ++s) {
    data::Batch b = loader.next();
    const int32_t* ids = b.inputs.data<int32_t>();
    if (std::find(ids, ids + b.inputs.numel(), kPoison) != ids + b.inputs.numel()) steps.push_back(s);
  }
  return steps;
}

// Runs the trainer with its standard output captured: the summary, what it printed, and the message
// of the error that stopped it ("" when none did).
struct Captured {
  TrainSummary summary;
  std::string out, error;
};
Captured run_captured(Trainer& trainer) {
  Captured c;
  ::testing::internal::CaptureStdout();
  try {
    c.summary = trainer.run();
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  std::fflush(stdout);
  c.out = ::testing::internal::GetCapturedStdout();
  return c;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Control, PoisonedBatchesAreSkippedAndTrainingContinues) {
  RunDir dir("skip");
  // A seed whose first two batches that read '#' are not consecutive; the run goes two steps past
  // the second, with max_bad_steps 2: the count of bad steps in a row must start again after a good one.
  Config probe;
  std::vector<int64_t> bad;
  for (uint64_t seed = 1; seed < 20 && (bad.size() < 2 || bad[1] == bad[0] + 1); ++seed) {
    probe = tiny(dir, {"train.seed=" + std::to_string(seed)});
    bad = poisoned_steps(probe, 60);
  }
  ASSERT_GE(bad.size(), 2u) << "no seed puts '#' in two separate batches: the crafted data no longer does its job";
  ASSERT_GT(bad[1], bad[0] + 1);
  const int64_t max_steps = bad[1] + 3;
  bad = poisoned_steps(probe, max_steps);
  ASSERT_EQ(bad.size(), 2u);

  Config config = tiny(dir, {"train.seed=" + std::to_string(probe.train.seed),
                             "train.max_steps=" + std::to_string(max_steps), "train.max_bad_steps=2"});
  Trainer trainer(config);
  poison(trainer.model(), {kPoison});
  const Captured run = run_captured(trainer);
  const TrainSummary& s = run.summary;
  const std::string& out = run.out;
  ASSERT_EQ(run.error, "") << out;

  EXPECT_EQ(s.steps, max_steps);
  EXPECT_FALSE(s.interrupted);
  ASSERT_EQ(s.losses.size(), size_t(max_steps - 2)) << out;
  for (double l : s.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(std::isfinite(s.last.loss));
  EXPECT_EQ(count(out, "warning: step"), 2) << out;
  EXPECT_NE(out.find("skipping"), std::string::npos) << out;
  // Every step but the poisoned ones logged its progress (steps count from 1 in the log).
  std::set<int64_t> logged, expected;
  for (const Logged& m : metrics(dir)) logged.insert(m.step);
  for (int64_t step = 0; step < max_steps; ++step)
    if (step != bad[0] && step != bad[1]) expected.insert(step + 1);
  EXPECT_EQ(logged, expected);
  // The skipped steps did not reach the optimizer: the final checkpoint's AdamW took only the good ones.
  Model model(config.model, DType::f32);
  AdamW optimizer(model.params(), config.train);
  TrainState state;
  load_checkpoint(latest_checkpoint(dir.path), config, model, &optimizer, &state, nullptr);
  EXPECT_EQ(state.step, max_steps);
  EXPECT_EQ(optimizer.steps(), max_steps - 2) << "a skipped step updated the weights";
}

TEST(Control, MaxBadStepsInARowStopTheRunWithAdvice) {
  {
    RunDir dir("bad-all");
    // Every batch is bad (every byte of the text poisoned; not 0, which the trainer's first forward
    // reads to measure the activation memory): the third bad step in a row stops the run.
    Trainer trainer(tiny(dir, {"train.max_steps=20", "train.max_bad_steps=3"}));
    std::vector<int32_t> bytes;
    for (int32_t b = 1; b < 256; ++b) bytes.push_back(b);
    poison(trainer.model(), bytes);
    const Captured run = run_captured(trainer);
    const std::string &message = run.error, &out = run.out;
    ASSERT_FALSE(message.empty()) << "the run did not stop\n" << out;
    EXPECT_NE(message.find("3 steps in a row"), std::string::npos) << message;
    EXPECT_NE(message.find("lower train.lr (now 0.003, from tiny.yaml:"), std::string::npos) << message;
    EXPECT_NE(message.find("warmup_steps"), std::string::npos) << message;
    EXPECT_EQ(count(out, "warning: step"), 3) << out;
  }
  {
    // max_bad_steps 1: the one poisoned step stops the run.
    RunDir dir("bad-one");
    Config c = tiny(dir, {"train.max_steps=40", "train.max_bad_steps=1"});
    std::vector<int64_t> bad = poisoned_steps(c, 40);
    ASSERT_FALSE(bad.empty());
    Trainer trainer(c);
    poison(trainer.model(), {kPoison});
    const Captured run = run_captured(trainer);
    const std::string& message = run.error;
    EXPECT_NE(message.find("stopping: a step had a non-finite loss"), std::string::npos) << message;
    // The warning numbers the step as the log lines do (from 1).
    EXPECT_NE(run.out.find("warning: step " + std::to_string(bad[0] + 1) + ":"), std::string::npos) << run.out;
    // The steps before it trained and logged.
    std::vector<Logged> m = metrics(dir);
    EXPECT_EQ(int64_t(m.size()), bad[0]);
    for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i].step, int64_t(i) + 1);
  }
}

TEST(Control, StepAndTokenBoundsStopWhereDocumentedWithTheScheduledRates) {
  const double lr = 3e-3, lr_min = 3e-4;  // tiny_config's
  {
    // 4 steps, 2 of warm-up: lr / 2, lr, then the decay from lr to lr_min over the last two.
    RunDir dir("steps");
    Trainer trainer(tiny(dir, {"train.max_steps=4", "train.warmup_steps=2"}));
    TrainSummary s = trainer.run();
    EXPECT_EQ(s.steps, 4);
    EXPECT_EQ(s.losses.size(), 4u);
    EXPECT_EQ(s.tokens, 4 * 8 * 64);
    std::vector<Logged> m = metrics(dir);
    ASSERT_EQ(m.size(), 4u);
    const double want[4] = {lr / 2, lr, lr, lr_min};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(m[size_t(i)].lr, want[i], 1e-8 * lr) << "step " << i + 1;
  }
  {
    // 512 tokens a step: 1200 tokens take three steps (the third crosses the bound), the last at lr_min.
    RunDir dir("tokens");
    Trainer trainer(tiny(dir, {"train.max_steps=0", "train.max_tokens=1200", "train.warmup_steps=1"}));
    TrainSummary s = trainer.run();
    EXPECT_EQ(s.steps, 3);
    EXPECT_EQ(s.tokens, 3 * 512);
    std::vector<Logged> m = metrics(dir);
    ASSERT_EQ(m.size(), 3u);
    const double want[3] = {lr, lr, lr_min};
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(m[size_t(i)].lr, want[i], 1e-8 * lr) << "step " << i + 1;
  }
  {
    // A bound of a whole number of steps stops exactly there.
    RunDir dir("tokens-exact");
    Trainer trainer(tiny(dir, {"train.max_steps=0", "train.max_tokens=1024"}));
    TrainSummary s = trainer.run();
    EXPECT_EQ(s.steps, 2);
    EXPECT_EQ(s.tokens, 1024);
  }
}

TEST(Control, TimeBoundStopsTheRun) {
  // max_time is the run's only bound (max_steps 0, no max_tokens), so the run can end only by the
  // clock: it ends, not interrupted, with at least its 0.3 s of training time used. Nothing depends
  // on how many steps this machine fits in that time.
  RunDir dir("time");
  Trainer trainer(tiny(dir, {"train.max_steps=0", "train.max_time=0.3", "train.warmup_steps=0"}));
  TrainSummary s = trainer.run();
  EXPECT_FALSE(s.interrupted);
  EXPECT_GE(s.seconds, 0.3);
  EXPECT_EQ(s.losses.size(), size_t(s.steps));
}

// The weights after one step, in float64.
std::vector<double> one_step(const std::vector<std::string>& overrides, std::vector<double>* before,
                             Logged* logged) {
  RunDir dir("clip");
  std::vector<std::string> o = {"train.max_steps=1", "train.warmup_steps=0", "train.schedule=constant",
                                "train.dtype=f64", "train.weight_decay=0", "train.adam_eps=1", "train.lr=0.01"};
  o.insert(o.end(), overrides.begin(), overrides.end());
  Trainer trainer(tiny(dir, o));
  auto values = [&] {
    const Tensor& w = trainer.model().params().values().all();
    return std::vector<double>(w.data<double>(), w.data<double>() + w.numel());
  };
  if (before) *before = values();
  trainer.run();
  std::vector<Logged> m = metrics(dir);
  EXPECT_EQ(m.size(), 1u);
  if (logged && !m.empty()) *logged = m[0];
  return values();
}

TEST(Control, ClippingScalesTheGradientsAndReportsTheNormBeforeIt) {
  // One AdamW step from zero moments moves each weight by -lr g / (|g| + eps) (bias correction makes
  // m_hat = g, v_hat = g^2; no decay). With eps = 1 the step depends on the gradient's scale, so a
  // clipped step differs from an unclipped one, and from the unclipped step the gradient can be read
  // back: |g| = eps |dw| / (lr - |dw|).
  const double lr = 0.01, eps = 1;
  std::vector<double> w0;
  Logged off{}, above{}, below{};
  std::vector<double> w_off = one_step({"train.grad_clip=0"}, &w0, &off);
  const double norm = off.grad_norm;
  ASSERT_GT(norm, 0);
  // Above the norm: no clipping, the same step bit for bit.
  std::vector<double> w_above = one_step({"train.grad_clip=" + std::to_string(10 * norm)}, nullptr, &above);
  EXPECT_EQ(w_above, w_off) << "a clip threshold above the gradient norm changed the step";
  // Below the norm: every gradient scaled by c = grad_clip / norm; the reported norm is the one before.
  const double clip = norm / 4;
  char clip_text[32];
  std::snprintf(clip_text, sizeof clip_text, "%.17g", clip);
  std::vector<double> w_below = one_step({std::string("train.grad_clip=") + clip_text}, nullptr, &below);
  EXPECT_EQ(below.grad_norm_text, off.grad_norm_text) << "the reported norm is not the norm before clipping";
  EXPECT_GT(below.grad_norm, clip);
  ASSERT_EQ(w_below.size(), w0.size());
  const double c = clip / norm;  // norm has the log's 9 digits: the prediction is good to about 1e-9
  double max_err = 0, max_step = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    const double dw = w_off[i] - w0[i];
    const double g_abs = eps * std::abs(dw) / (lr - std::abs(dw));
    const double g = dw > 0 ? -g_abs : g_abs;
    const double want = w0[i] - lr * c * g / (c * g_abs + eps);
    max_err = std::max(max_err, std::abs(w_below[i] - want));
    max_step = std::max(max_step, std::abs(want - w0[i]));
  }
  ASSERT_GT(max_step, 0);
  EXPECT_LT(max_err, 1e-7 * max_step) << "max abs error " << max_err << " against a largest step of " << max_step;
}

}  // namespace
}  // namespace linattn
