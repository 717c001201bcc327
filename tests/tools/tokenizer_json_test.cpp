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
#include "train/sample.h"
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

// The trainer's sample decodes with the data folder's tokenizer.json.
TEST_F(TokenizerJson, TheTrainersSampleDecodesWithTheDataFoldersTokenizer) {
  Config c = testing::tiny_config_on(dir_ + "/data", dir_ + "/unused", {"model.vocab_size=32000"});
  Model model(c.model, DType::f32);
  model.params().initialize(1);
  TrainConfig t;
  t.sample_prompt = "The Congress";
  t.sample_tokens = 40;
  const std::string line = training_sample_line(model, *data::Dataset::open(dir_ + "/data", "val"), t, 5);
  EXPECT_EQ(line.rfind("sample step 5 | The Congress", 0), 0u) << line;
  EXPECT_EQ(line.find("\xE2\x96\x81"), std::string::npos) << line;
}

// Training and validation shards made with different tokenizers are refused when the run starts.
// (Disabled for a while on main, whose build held a trainer.cpp.o compiled before the check: its
// `strings` lacked the message. A fresh compile of train/trainer.cpp passes it.)
TEST(TokenizerJsonData, TrainingRefusesSplitsOfDifferentTokenizers) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-split-tokenizers-" + std::to_string(getpid()))).string();
  fs::create_directories(dir + "/data");
  std::vector<uint32_t> ids(4096);
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = uint32_t(k % 200);
  const std::string sha(64, 'a');
  for (const auto& [split, sha256] : {std::pair{"train", sha}, {"val", std::string(64, 'b')}}) {
    data::ShardWriter w(dir + "/data/" + split + ".bin", "hf", 300, 1, 0, sha256);
    w.add_document(ids.data(), ids.size(), ids.size());
    w.finish();
  }
  const std::string msg = testing::error_of([&] { Trainer(testing::tiny_config_on(dir + "/data", dir + "/run", {"model.vocab_size=300"})); });
  EXPECT_NE(msg.find(dir + "/data: the validation shards were prepared with tokenizer.json sha256 " + std::string(64, 'b') +
                     " (vocabulary 300), the training shards with tokenizer.json sha256 " + sha),
            std::string::npos) << msg;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace linattn
