// A run on data prepared with Llama 2's tokenizer.json (scripts/fetch-data): linattn-generate decodes
// the model's tokens back to text with the tokenizer kept beside the shards, the export folder holds
// tokenizer.json, and generate and eval refuse a tokenizer or data made with another one.
#include <unistd.h>

#include <filesystem>

#include "../data/data_testing.h"
#include "../train/train_testing.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/sha256.h"
#include "testing.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class TokenizerJson : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path tokenizer = data::testing::hf_dir("llama2") / "tokenizer.json";
    if (data::testing::data_declared_unavailable() || !fs::exists(tokenizer)) return;
    dir_ = (fs::temp_directory_path() / ("linattn-tokenizer-json-" + std::to_string(getpid()))).string();
    data::PrepareOptions o;
    o.inputs = {data::testing::corpus_dir().string()};
    o.tokenizer = tokenizer.string();
    o.val_globs = {"201*", "202*"};
    o.out_dir = dir_ + "/data";
    data::prepare(o);
    Trainer trainer(testing::tiny_config_on(dir_ + "/data", dir_ + "/run",
                                            {"train.max_steps=20", "model.vocab_size=32000", "data.val_tokens=4096"}));
    trainer.run();
    ckpt_ = latest_checkpoint(dir_ + "/run");
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    LINATTN_REQUIRE_DATA(data::testing::corpus_dir(), data::testing::hf_dir("llama2") / "tokenizer.json");
    ASSERT_FALSE(ckpt_.empty());
  }
  static testing::CommandResult tool(const std::string& name, const std::string& args) {
    return testing::run_command(testing::built_binary(name) + " " + args);
  }
  static std::string dir_, ckpt_;
};
std::string TokenizerJson::dir_, TokenizerJson::ckpt_;

TEST_F(TokenizerJson, GenerateDecodesWithTheDataFoldersTokenizer) {
  // Greedy, so the text is the model's most likely tokens; the prompt's "▁" must come back as spaces.
  const testing::CommandResult r =
      tool("linattn-generate", ckpt_ + " --prompt 'The Congress of the' --max-new-tokens 30 --temperature 0 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("The Congress of the", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find("\xE2\x96\x81"), std::string::npos) << "a \"▁\" was printed, not decoded: " << r.output;
  EXPECT_EQ(r.output.find("<0x"), std::string::npos) << "a byte token was printed, not decoded: " << r.output;
  EXPECT_GT(r.output.size(), std::string("The Congress of the").size() + 20) << r.output;
  // The same with the tokenizer named by the flag.
  const testing::CommandResult same = tool("linattn-generate", ckpt_ + " --prompt 'The Congress of the' --max-new-tokens 30 "
                                           "--temperature 0 --tokenizer " + (data::testing::hf_dir("llama2") / "tokenizer.json").string() +
                                           " 2>/dev/null");
  EXPECT_EQ(same.output, r.output);
}

TEST_F(TokenizerJson, AnotherTokenizerIsRefusedByGenerateAndEval) {
  const std::string llama3 = (data::testing::hf_dir("llama3") / "tokenizer.json").string();
  LINATTN_REQUIRE_DATA(llama3);
  for (const auto& [name, args] : {std::pair{"linattn-generate", ckpt_ + " --tokenizer " + llama3},
                                   {"linattn-eval", ckpt_ + " --text " + (data::testing::corpus_dir() / "2020_donald_j_trump_r.txt").string() +
                                                        " --tokenizer " + llama3}}) {
    const testing::CommandResult r = tool(name, args);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("--tokenizer " + llama3 + " is not the tokenizer that made the run's data"), std::string::npos)
        << r.output;
  }
  // Data prepared with bytes, given to a run on Llama 2's tokens.
  const testing::CommandResult r = tool("linattn-eval", ckpt_ + " --data " + testing::corpus_shards());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--data " + testing::corpus_shards() + " was prepared with bytes (vocabulary 257), the run's "
                          "data"), std::string::npos) << r.output;
  // The run's own tokenizer evaluates text.
  const testing::CommandResult ok =
      tool("linattn-eval", ckpt_ + " --text " + (data::testing::corpus_dir() / "2020_donald_j_trump_r.txt").string() + " --seq-len 32");
  EXPECT_EQ(ok.status, 0) << ok.output;
  EXPECT_NE(ok.output.find("bpb"), std::string::npos) << ok.output;
}

TEST_F(TokenizerJson, TheExportFolderHoldsTheTokenizer) {
  const std::string out = dir_ + "/export";
  const testing::CommandResult r = tool("linattn-export", ckpt_ + " " + out + " --format safetensors");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(out + "/tokenizer.json (the run's tokenizer)"), std::string::npos) << r.output;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    EXPECT_EQ(data::testing::read_file(out + "/" + f), data::testing::read_file((data::testing::hf_dir("llama2") / f).string())) << f;
  EXPECT_TRUE(fs::exists(out + "/config.json"));
}

}  // namespace
}  // namespace linattn
