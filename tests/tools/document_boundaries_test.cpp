// data.document_boundaries on a corpus of short documents: training with reset is not training with
// cross, its evaluations say so (eval line, metrics.jsonl), and linattn-eval evaluates a checkpoint
// either way, stating which, with the figure evaluate() gives in that mode.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../train/train_testing.h"
#include "testing.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class DocumentBoundaries_ : public ::testing::Test {
 protected:
  // 300 training and 40 validation documents of 30 to 90 bytes: every 64-token window holds several.
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("linattn-documents-" + std::to_string(getpid()))).string();
    fs::create_directories(dir_ + "/text");
    Rng rng(5);
    const char* words[] = {"the ", "union ", "is ", "strong ", "and ", "we ", "shall ", "go ", "on. "};
    for (int i = 0; i < 340; ++i) {
      std::ofstream out(dir_ + "/text/" + (i < 300 ? "doc" : "val") + std::to_string(i) + ".txt");
      for (int w = 0, n = 5 + int(rng.below(10)); w < n; ++w) out << words[rng.below(9)];
    }
    data::PrepareOptions o;
    o.inputs = {dir_ + "/text"};
    o.out_dir = dir_ + "/shards";
    o.val_globs = {"val*"};
    data::prepare(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static Config config(const std::string& run, const std::string& boundaries) {
    return testing::tiny_config_on(dir_ + "/shards", dir_ + "/" + run,
                                   {"train.max_steps=3", "data.document_boundaries=" + boundaries});
  }
  static std::string dir_;
};
std::string DocumentBoundaries_::dir_;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(DocumentBoundaries_, ResetTrainsOtherwiseAndSaysSo) {
  TrainSummary cross = Trainer(config("cross", "cross")).run();
  TrainSummary reset = Trainer(config("reset", "reset")).run();
  // Same weights and batch at step 1: only the cuts at end-of-text differ.
  ASSERT_FALSE(cross.losses.empty());
  ASSERT_FALSE(reset.losses.empty());
  EXPECT_NE(cross.losses[0], reset.losses[0]);
  EXPECT_NE(read_text(dir_ + "/reset/metrics.jsonl").find("\"val_document_reset\": 1"), std::string::npos);
  EXPECT_NE(read_text(dir_ + "/cross/metrics.jsonl").find("\"val_document_reset\": 0"), std::string::npos);
}

TEST_F(DocumentBoundaries_, EvalStatesTheModeAndEvaluatesEitherWay) {
  const Config c = config("for-eval", "reset");
  Trainer(c).run();
  const std::string ckpt = latest_checkpoint(c.train.out_dir);
  Model model(c.model, DType::f32);
  load_checkpoint(ckpt, c, model, nullptr, nullptr);
  Arena arena;
  auto val = data::Dataset::open(c.data.path, "val");
  const EvalResult cross = evaluate(model, val, c.data.seq_len, c.train.batch_size, 0, arena, nullptr,
                                    DocumentBoundaries::cross);
  const EvalResult reset = evaluate(model, val, c.data.seq_len, c.train.batch_size, 0, arena, nullptr,
                                    DocumentBoundaries::reset);
  EXPECT_NE(cross.loss, reset.loss);

  const std::string eval = testing::built_binary("linattn-eval") + " " + ckpt;
  for (auto [flag, r, mode] : {std::tuple{"", reset, "reset"},  // the run's mode by default
                               {" --document-boundaries cross", cross, "cross"},
                               {" --document-boundaries reset", reset, "reset"}}) {
    SCOPED_TRACE(flag);
    testing::CommandResult out = testing::run_command(eval + flag);
    EXPECT_EQ(out.status, 0) << out.output;
    char expected[160];
    std::snprintf(expected, sizeof expected, "val loss %.6f | ppl %.4f | bpb %.6f | %lld tokens, seq_len %lld, "
                  "document boundaries %s\n", r.loss, r.perplexity, r.bits_per_byte, (long long)r.tokens,
                  (long long)c.data.seq_len, mode);
    EXPECT_NE(out.output.find(expected), std::string::npos) << out.output << "(expected " << expected << ")";
  }
  testing::CommandResult out = testing::run_command(eval + " --document-boundaries split");
  EXPECT_EQ(out.status, 1);
  EXPECT_EQ(out.output, "linattn-eval: error: --document-boundaries 'split' is not one of cross, reset (see linattn-eval --help)\n");
}

}  // namespace
}  // namespace linattn
