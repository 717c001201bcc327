// End to end: a tiny hybrid trains on the default corpus, its validation loss falls well below the
// unigram entropy of the text, and the same seed gives bit-identical losses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

// Entropy in nats of the training text's byte distribution.
double unigram_entropy(const data::Dataset& d) {
  uint64_t n = std::min<uint64_t>(d.num_tokens(), 2'000'000);
  std::vector<int32_t> tokens(n);
  d.read(0, n, tokens.data());
  std::map<int32_t, double> counts;
  for (int32_t t : tokens) counts[t] += 1;
  double h = 0;
  for (auto& [t, c] : counts) h -= c / double(n) * std::log(c / double(n));
  return h;
}

Config tiny(uint64_t seed, int64_t steps = 400) {
  return testing::tiny_config((fs::temp_directory_path() / ("linattn-e2e-" + std::to_string(getpid()))).string(),
                              {"train.seed=" + std::to_string(seed), "train.batch_size=16",
                               "train.max_steps=" + std::to_string(steps)});
}


TEST(EndToEnd, TinyHybridLearnsAndIsReproducible) {
  TrainSummary first, second;
  {
    Trainer trainer(tiny(7));
    first = trainer.run();
  }
  fs::remove_all(tiny(7).train.out_dir);  // a fresh run into the first one's folder would be refused
  {
    Trainer trainer(tiny(7));
    second = trainer.run();
  }
  ASSERT_EQ(first.losses.size(), 400u);
  ASSERT_EQ(second.losses.size(), 400u);
  for (size_t i = 0; i < first.losses.size(); ++i)
    ASSERT_EQ(first.losses[i], second.losses[i]) << "step " << i << ": the same seed gave different losses";
  EXPECT_EQ(first.last.loss, second.last.loss);

  double h = unigram_entropy(*data::Dataset::open(testing::corpus_shards(), "train"));
  std::printf("unigram entropy %.4f nats/byte, validation loss after 400 steps %.4f\n", h, first.last.loss);
  EXPECT_GT(h, 2.5);  // English bytes: about 4.4 bits
  EXPECT_LT(first.last.loss, 0.8 * h) << "the model did not learn much beyond byte frequencies";
  EXPECT_TRUE(std::isfinite(first.last.bits_per_byte));

  // A different seed gives a different run.
  fs::remove_all(tiny(7).train.out_dir);
  Trainer other(tiny(8, 20));
  TrainSummary third = other.run();
  EXPECT_NE(third.losses[10], first.losses[10]);
  fs::remove_all(tiny(7).train.out_dir);
}

}  // namespace
}  // namespace linattn
