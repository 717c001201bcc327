// End to end: a tiny hybrid trains on the default corpus, its validation loss falls well below the
// unigram entropy of the text, and the same seed gives bit-identical losses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "data/prepare.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class EndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::is_directory("data/corpus/sotu"))
        << "the default corpus is missing: run ./scripts/fetch-data (./scripts/test does it)";
    dir_ = (fs::temp_directory_path() / ("linattn-e2e-" + std::to_string(getpid()))).string();
    data::PrepareOptions o;
    o.inputs = {"data/corpus/sotu"};
    o.out_dir = dir_ + "/data";
    o.val_globs = {"201*", "202*"};
    data::prepare(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  Config tiny(uint64_t seed) const {
    return parse_config(R"(model:
  vocab_size: 257
  hidden_size: 64
  num_hidden_layers: 2
  num_heads: 2
  layers: [gla, {mixer: attention, window_size: 32}]
data:
  path: )" + dir_ + R"(/data
  seq_len: 64
  val_tokens: 20000
train:
  batch_size: 8
  lr: 3.0e-3
  lr_min: 3.0e-4
  warmup_steps: 20
  max_steps: 300
  eval_every: 0
  log_every: 100
  out_dir: )" + dir_ + "/run\n",
                        "e2e.yaml", {"train.seed=" + std::to_string(seed)});
  }

  // Entropy in nats of the training text's byte distribution.
  static double unigram_entropy(const data::Dataset& d) {
    uint64_t n = std::min<uint64_t>(d.num_tokens(), 2'000'000);
    std::vector<int32_t> tokens(n);
    d.read(0, n, tokens.data());
    std::map<int32_t, double> counts;
    for (int32_t t : tokens) counts[t] += 1;
    double h = 0;
    for (auto& [t, c] : counts) h -= c / double(n) * std::log(c / double(n));
    return h;
  }

  static std::string dir_;
};

std::string EndToEnd::dir_;

TEST_F(EndToEnd, TinyHybridLearnsAndIsReproducible) {
  TrainSummary first, second;
  {
    Trainer trainer(tiny(7));
    first = trainer.run();
  }
  {
    Trainer trainer(tiny(7));
    second = trainer.run();
  }
  ASSERT_EQ(first.losses.size(), 300u);
  ASSERT_EQ(second.losses.size(), 300u);
  for (size_t i = 0; i < first.losses.size(); ++i)
    ASSERT_EQ(first.losses[i], second.losses[i]) << "step " << i << ": the same seed gave different losses";
  EXPECT_EQ(first.last.loss, second.last.loss);

  double h = unigram_entropy(*data::Dataset::open(dir_ + "/data", "train"));
  std::printf("unigram entropy %.4f nats/byte, validation loss after 300 steps %.4f\n", h, first.last.loss);
  EXPECT_GT(h, 2.5);  // English bytes: about 4.4 bits
  EXPECT_LT(first.last.loss, 0.8 * h) << "the model did not learn much beyond byte frequencies";
  EXPECT_TRUE(std::isfinite(first.last.bits_per_byte));

  // A different seed gives a different run.
  Trainer other(tiny(8));
  TrainSummary third = other.run();
  EXPECT_NE(third.losses[10], first.losses[10]);
}

}  // namespace
}  // namespace linattn
