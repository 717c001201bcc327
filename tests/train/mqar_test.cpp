// MQAR runs: a tiny training logs recall accuracy beside the loss and resumes exactly; evaluation
// takes the loss and the argmax at the queries only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "data/mqar.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class MqarRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-mqar-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A 2-layer DeltaNet + attention model, 32 wide, on 4 pairs in 32 tokens of a 16-token vocabulary.
  Config config(const std::vector<std::string>& overrides = {}) const {
    return parse_config(R"(model:
  vocab_size: 16
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 2
  layers: [deltanet, attention]
data:
  source: mqar
  seq_len: 32
  mqar: {vocab_size: 16, num_kv_pairs: 4, num_train_examples: 200, num_val_examples: 40, seed: 3}
train:
  batch_size: 8
  warmup_steps: 2
  max_steps: 8
  eval_every: 4
  log_every: 2
  out_dir: )" + dir_ + "\n",
                        "mqar.yaml", overrides);
  }
  std::string dir_;
};

TEST_F(MqarRun, MetricsHaveRecallAccuracyAndResumeContinuesExactly) {
  const Config c = config({"checkpoint.every=4", "checkpoint.keep_last=5"});
  TrainSummary full = Trainer(c).run();
  ASSERT_EQ(full.losses.size(), 8u);
  ASSERT_TRUE(std::isfinite(full.last.recall_accuracy));
  EXPECT_EQ(full.last.tokens, 40 * 4) << "the final evaluation scores every query of the validation split";
  EXPECT_TRUE(std::isnan(full.last.bits_per_byte));

  // Evaluation lines (steps 4 and 8) carry recall_accuracy; training lines do not.
  std::ifstream in(dir_ + "/metrics.jsonl");
  const std::regex recall(R"("recall_accuracy": ([0-9.e+-]+))");
  int evals = 0;
  double last = -1;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    const bool has = std::regex_search(line, m, recall);
    EXPECT_EQ(has, line.find("val_loss") != std::string::npos) << line;
    if (has) ++evals, last = std::stod(m[1]);
  }
  EXPECT_EQ(evals, 2);
  EXPECT_NEAR(last, full.last.recall_accuracy, 1e-8);
  EXPECT_GE(last, 0.0);
  EXPECT_LE(last, 1.0);

  // The data position comes back with the checkpoint: the resumed half draws the same examples.
  Trainer resumed(c, checkpoint_path(dir_, 4));
  TrainSummary rest = resumed.run();
  ASSERT_EQ(rest.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(rest.losses[i], full.losses[4 + i]) << "step " << 4 + i;
  EXPECT_EQ(rest.last.recall_accuracy, full.last.recall_accuracy);
}

// The loss is the mean of -log softmax at the queries, and recall accuracy the fraction of queries
// whose argmax is the value, both recomputed here by hand from the logits. A 6-token vocabulary makes
// chance hits frequent, so the count is not trivially zero.
TEST_F(MqarRun, EvaluationScoresTheQueriesOnly) {
  const Config c = config({"model.vocab_size=6", "data.mqar.vocab_size=6", "data.mqar.num_kv_pairs=2",
                           "data.seq_len=12", "data.mqar.num_val_examples=50"});
  Model model(c.model, DType::f64);
  model.params().initialize(11);
  data::LoaderOptions lo;
  lo.batch_size = 8;
  lo.seq_len = c.data.seq_len;
  data::MqarValLoader val(c.data.mqar, lo);
  Arena arena;
  const EvalResult r = evaluate(model, val, arena);

  double loss = 0;
  int64_t queries = 0, hits = 0;
  NoGrad no_grad;
  val.reset();
  data::Batch b;
  while (val.next(b)) {
    ArenaScope scope(arena);
    const Tensor logits = model.logits(b.inputs).value();
    const int64_t V = logits.shape().last();
    for (int64_t i = 0; i < b.targets.numel(); ++i) {
      const int32_t y = b.targets.data<int32_t>()[i];
      if (y == data::kIgnoreTarget) continue;
      const double* row = logits.data<double>() + i * V;
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(row[v]);
      loss += std::log(z) - row[y];
      ++queries;
      hits += std::max_element(row, row + V) - row == y;
    }
  }
  ASSERT_EQ(queries, 50 * 2);
  EXPECT_EQ(r.tokens, queries);
  EXPECT_NEAR(r.loss, loss / double(queries), 1e-12);
  EXPECT_GT(hits, 0);
  EXPECT_EQ(r.recall_accuracy, double(hits) / double(queries));
}

}  // namespace
}  // namespace linattn
