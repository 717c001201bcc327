// A run folder read back (a resumed run's repeated evaluation, the final record) and the results
// table made from it: its CSV text, its markdown and the best run of each group.
#include "sweep/results.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "layers/model.h"
#include "sweep/plots.h"
#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

const char* kConfig = R"(model:
  vocab_size: 257
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 2
  layers: [gla, {mixer: attention, window_size: 16}]
data:
  seq_len: 64
train:
  batch_size: 4
  max_steps: 6
)";

// A run that evaluated at steps 2 and 4, was interrupted after 4 and evaluated 4 again when it was
// resumed, then finished at step 6 (recall accuracy as MQAR runs log it).
const char* kMetrics = R"({"step": 1, "loss": 5.5, "lr": 0.001, "grad_norm": 1, "tokens_per_s": 100, "ms_per_step": 1, "mfu": 0.1}
{"step": 2, "val_loss": 5.0, "val_ppl": 148.4, "val_bpb": 7.2}
{"step": 4, "val_loss": 4.9, "val_ppl": 134.3, "val_bpb": 7.1}
{"step": 4, "val_loss": 4.5, "val_ppl": 90.0, "val_bpb": 6.5}
{"step": 6, "val_loss": 4.0, "val_ppl": 54.6, "val_bpb": 5.77, "recall_accuracy": 0.25}
{"step": 6, "done": 1, "tokens": 1536, "seconds": 3}
)";

class RunFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-results-" + std::to_string(getpid()))).string();
    fs::create_directories(dir_);
    std::ofstream(fs::path(dir_) / "config.yaml") << kConfig;
    std::ofstream(fs::path(dir_) / "metrics.jsonl") << kMetrics;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RunFolder, EvaluationsByStepTheLaterOfARepeatedOneAndTheFinalRecord) {
  const RunRecord run = read_run(dir_);
  ASSERT_EQ(run.evals.size(), 3u);
  EXPECT_EQ(run.evals[1].step, 4);
  EXPECT_DOUBLE_EQ(run.evals[1].val_loss, 4.5);          // the resumed run's evaluation
  EXPECT_DOUBLE_EQ(run.evals[1].tokens, 4.0 * 4 * 64);  // step x batch_size x seq_len
  EXPECT_TRUE(std::isnan(run.evals[0].recall_accuracy));
  EXPECT_DOUBLE_EQ(run.evals[2].recall_accuracy, 0.25);
  EXPECT_TRUE(run.done);
  EXPECT_DOUBLE_EQ(run.tokens_per_s, 512);
}

TEST_F(RunFolder, TheFinalEvaluationOfTheWholeSplitStaysOffTheCurveOfPrefixEvaluations) {
  // data.val_tokens unset (0): every evaluation reads the whole split, and the curve has them all.
  RunRecord run = read_run(dir_);
  for (const EvalPoint& e : run.evals) EXPECT_TRUE(e.whole_split);
  EXPECT_EQ(curve_plot({run}, {"run"}, "val_loss").series.at(0).points.size(), 3u);

  // Evaluations during training on 256 tokens: only the final one (the "done" step) is whole.
  std::string config = kConfig;
  config.replace(config.find("  seq_len: 64\n"), 14, "  seq_len: 64\n  val_tokens: 256\n");
  std::ofstream(fs::path(dir_) / "config.yaml") << config;
  run = read_run(dir_);
  ASSERT_EQ(run.evals.size(), 3u);
  EXPECT_FALSE(run.evals[0].whole_split);
  EXPECT_FALSE(run.evals[1].whole_split);
  EXPECT_TRUE(run.evals[2].whole_split);
  const Series curve = curve_plot({run}, {"run"}, "val_loss").series.at(0);
  ASSERT_EQ(curve.points.size(), 2u);
  EXPECT_DOUBLE_EQ(curve.points[1].second, 4.5);
  ResultRow row;
  fill_row(row, run);
  EXPECT_DOUBLE_EQ(row.val_loss, 4.0);  // the table keeps the final, whole-split figure

  // A run that only evaluated at its end keeps that point.
  run.evals.erase(run.evals.begin(), run.evals.begin() + 2);
  EXPECT_EQ(curve_plot({run}, {"run"}, "val_loss").series.at(0).points.size(), 1u);
}

TEST_F(RunFolder, AnUnfinishedRunHasNoFinalNumbers) {
  std::ofstream(fs::path(dir_) / "metrics.jsonl") << R"({"step": 2, "val_loss": 5.0, "val_ppl": 148.4, "val_bpb": 7.2})"
                                                  << "\n";
  const RunRecord run = read_run(dir_);
  EXPECT_FALSE(run.done);
  ResultRow row;
  fill_row(row, run);
  EXPECT_TRUE(std::isnan(row.val_loss));  // an evaluation on data.val_tokens is not the final one
  EXPECT_DOUBLE_EQ(row.tokens, 2.0 * 4 * 64);
  // Its tokens are those trained, to the last step logged, not to the last evaluation.
  std::ofstream(fs::path(dir_) / "metrics.jsonl", std::ios::app) << R"({"step": 3, "loss": 4.8})" << "\n";
  fill_row(row, read_run(dir_));
  EXPECT_DOUBLE_EQ(row.tokens, 3.0 * 4 * 64);
}

TEST_F(RunFolder, AHalfWrittenLastLineIsLeftOutAndDamagedOnesAreNamedAndTheRestRead) {
  std::ofstream(fs::path(dir_) / "metrics.jsonl", std::ios::app) << R"({"step": 7, "val_lo)";
  RunRecord run = read_run(dir_);
  EXPECT_EQ(run.evals.size(), 3u);
  EXPECT_TRUE(run.damaged.empty());
  // A record cut by a full disk with the next appended to it (the cut line then ends), and a line
  // that is no record: each named, and the records around them read.
  std::ofstream(fs::path(dir_) / "metrics.jsonl", std::ios::app)
      << "{\"step\": 8, \"val_loss\": 3.9}\n{}\n{\"step\": 9, \"val_loss\": 3.8}\n";
  run = read_run(dir_);
  ASSERT_EQ(run.damaged.size(), 2u);
  EXPECT_TRUE(std::regex_search(run.damaged[0],
                                std::regex("^" + dir_ + "/metrics.jsonl:7:[0-9]+ \\(byte [0-9]+\\): ")))
      << run.damaged[0];
  EXPECT_EQ(run.damaged[1], dir_ + "/metrics.jsonl:8: not a record (no \"step\" number)");
  ASSERT_EQ(run.evals.size(), 4u);
  EXPECT_EQ(run.evals.back().step, 9);
  EXPECT_TRUE(run.done);
}

TEST_F(RunFolder, RowFromTheRun) {
  ResultRow row;
  fill_row(row, read_run(dir_));
  EXPECT_DOUBLE_EQ(row.val_loss, 4.0);
  EXPECT_DOUBLE_EQ(row.val_bpb, 5.77);
  EXPECT_DOUBLE_EQ(row.recall, 0.25);
  EXPECT_DOUBLE_EQ(row.tokens, 1536);
  // GLA: 2 heads of 8 x 16; the window of 16 keeps 2 x 16 tokens x 2 heads x 16.
  EXPECT_EQ(row.state, 2 * 8 * 16 + 2 * 16 * 2 * 16);
  EXPECT_EQ(row.params, Model(read_run(dir_).config.model, DType::f32).params().count());
}

ResultRow row(const std::string& name, const std::string& group, double loss, double recall,
              const std::string& status = "done") {
  ResultRow r;
  r.name = name;
  r.values = {name, group};
  r.group = group;
  r.val_loss = loss;
  r.recall = recall;
  r.status = status;
  return r;
}

TEST(Results, BestOfEachGroupByRecallWhenMeasuredElseByLoss) {
  std::vector<ResultRow> rows = {row("a", "g1", 3.0, NAN), row("b", "g1", 2.5, NAN),
                                 row("c", "g1", 2.0, NAN, "failed"),  // not finished: never best
                                 row("d", "g2", 1.0, 0.5), row("e", "g2", 2.0, 0.9)};
  mark_best(rows);
  EXPECT_FALSE(rows[0].best);
  EXPECT_TRUE(rows[1].best);
  EXPECT_FALSE(rows[2].best);
  EXPECT_FALSE(rows[3].best);
  EXPECT_TRUE(rows[4].best);  // higher recall despite the higher loss
}

TEST(Results, CsvAndMarkdown) {
  ResultRow done = row("gla, w=64", "g", 4.0, NAN);
  done.values = {"[gla, \"x\"]", "64"};
  done.params = 1000;
  done.state = 256;
  done.tokens = 1536;
  done.tokens_per_s = 512.4;
  done.val_ppl = 54.598;
  done.val_bpb = 5.7712;
  done.best = true;
  ResultRow failed = row("bad", "g", NAN, NAN, "failed");
  failed.values = {"gla", ""};
  failed.error = "line one\nvocab | too small";
  const std::vector<std::string> keys = {"model.layers", "model.hidden_size"};
  EXPECT_EQ(results_csv(keys, {done, failed}),
            "name,model.layers,model.hidden_size,params,state,tokens,tokens_per_s,val_loss,val_ppl,val_bpb,"
            "recall_accuracy,status,best,error\n"
            "\"gla, w=64\",\"[gla, \"\"x\"\"]\",64,1000,256,1536,512,4.0000,54.598,5.7712,,done,1,\n"
            "bad,gla,,0,0,,,,,,,failed,0,\"line one\nvocab | too small\"\n");
  const std::string md = results_markdown(keys, {done, failed});
  EXPECT_NE(md.find("| gla, w=64 **(best)** | [gla, \"x\"] | 64 | 1000 | 256 | 1536 | 512 | 4.0000 | 54.598 | 5.7712 |  "
                    "| done |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| failed: line one / vocab \\| too small |"), std::string::npos) << md;
}

}  // namespace
}  // namespace linattn
