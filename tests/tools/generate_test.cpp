// linattn-generate on a checkpoint the trainer wrote: seeded and greedy text is reproducible, an
// export gives the checkpoint's text, --stop ends a sample, and bad input names the flag or file.
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include "../train/train_testing.h"
#include "testing.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class Generate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("linattn-generate-" + std::to_string(getpid()))).string();
    // A global attention layer, whose key/value cache grows with the text.
    Trainer trainer(testing::tiny_config(dir_, {"train.max_steps=20", "model.layers=[gla, attention]"}));
    trainer.run();
    ckpt_ = latest_checkpoint(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // stdout only (the timing line goes to stderr), and the exit status.
  static testing::CommandResult generate(const std::string& args) {
    return testing::run_command(testing::built_binary("linattn-generate") + " " + args + " 2>/dev/null");
  }
  static testing::CommandResult generate_all(const std::string& args) {  // stdout and stderr
    return testing::run_command(testing::built_binary("linattn-generate") + " " + args);
  }
  static std::string dir_, ckpt_;
};
std::string Generate::dir_, Generate::ckpt_;

TEST_F(Generate, HelpListsTheFlags) {
  testing::CommandResult r = generate("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--prompt", "--prompt-file", "--max-new-tokens", "--temperature", "--top-k", "--top-p",
                           "--seed", "--num-samples", "--stop", "--gpt2-dir"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST_F(Generate, TheSameSeedGivesTheSameText) {
  const std::string args = ckpt_ + " --prompt 'The Congress' --max-new-tokens 40 --top-k 20 --top-p 0.9";
  testing::CommandResult a = generate(args + " --seed 7"), b = generate(args + " --seed 7");
  testing::CommandResult c = generate(args + " --seed 8");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_EQ(a.output.rfind("The Congress", 0), 0u) << a.output;  // the prompt comes first
  EXPECT_GT(a.output.size(), std::string("The Congress").size() + 10);
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);
}

TEST_F(Generate, GreedyIsDeterministicAndTheExportGivesTheCheckpointsText) {
  const std::string args = " --prompt 'We' --max-new-tokens 30 --temperature 0";
  testing::CommandResult a = generate(ckpt_ + args + " --seed 1"), b = generate(ckpt_ + args + " --seed 2");
  ASSERT_EQ(a.status, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  const std::string exported = dir_ + "/weights.h5";
  ASSERT_EQ(testing::run_command(testing::built_binary("linattn-export") + " " + ckpt_ + " " + exported).status, 0);
  EXPECT_EQ(generate(exported + args).output, a.output);
}

TEST_F(Generate, StopEndsASampleBeforeTheStopText) {
  const std::string args = ckpt_ + " --prompt 'A' --max-new-tokens 60 --temperature 0";
  testing::CommandResult full = generate(args);
  ASSERT_EQ(full.status, 0);
  // Three letters from the middle of the continuation (safe in the shell's quotes): the sample must
  // end just before their first appearance after the prompt.
  size_t at = 20;
  while (at + 3 < full.output.size() && !(std::isalpha(full.output[at]) && std::isalpha(full.output[at + 1]) &&
                                          std::isalpha(full.output[at + 2])))
    ++at;
  ASSERT_LT(at + 3, full.output.size()) << full.output;
  const std::string stop = full.output.substr(at, 3);
  testing::CommandResult cut = generate(args + " --stop '" + stop + "'");
  ASSERT_EQ(cut.status, 0) << cut.output;
  EXPECT_EQ(cut.output, full.output.substr(0, full.output.find(stop, 1)) + "\n");
}

// One rule for every byte printed: the prompt's bytes that are no UTF-8 become U+FFFD as the
// generated ones do (a byte-level model reads any bytes).
TEST_F(Generate, APromptThatIsNotUtf8IsPrintedByTheRuleOfTheNewText) {
  const std::string prompt = dir_ + "/prompt.bin";
  std::ofstream(prompt, std::ios::binary) << "ab\xff\xfe cd";
  const testing::CommandResult r = generate(ckpt_ + " --prompt-file " + prompt + " --max-new-tokens 5 --seed 1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.rfind("ab\xEF\xBF\xBD\xEF\xBF\xBD cd", 0), 0u) << r.output;
  EXPECT_EQ(r.output.find('\xff'), std::string::npos) << "a raw byte reached the terminal";
}

TEST_F(Generate, SamplesAreNumberedAndTimed) {
  testing::CommandResult r = generate_all(ckpt_ + " --num-samples 2 --max-new-tokens 5 --prompt-file /dev/null");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--- sample 2 ---"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("10 new tokens in"), std::string::npos) << r.output;
}

TEST_F(Generate, BadInputNamesTheFlagOrFile) {
  const std::string garbage = dir_ + "/garbage.h5";
  std::ofstream(garbage) << "not an hdf5 file";
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"/nonexistent/ckpt.h5", "/nonexistent/ckpt.h5: cannot read the checkpoint"},
           {garbage, garbage},
           {ckpt_ + " --top-p 1.5", "--top-p 1.5 must be in (0, 1]"},
           {ckpt_ + " --top-p 0", "--top-p 0 must be in (0, 1]"},
           {ckpt_ + " --temperature -0.5", "--temperature -0.5 must be >= 0"},
           {ckpt_ + " --max-new-tokens 0", "--max-new-tokens '0' is not a whole number"},
           {ckpt_ + " --prompt-file /nonexistent/prompt.txt", "--prompt-file /nonexistent/prompt.txt: cannot read"},
           // The run's data (bytes) is at hand: another tokenizer is refused by name.
           {ckpt_ + " --tokenizer gpt2", "--tokenizer gpt2 is not the tokenizer that made the run's data"},
           {ckpt_ + " --bogus", "unknown option '--bogus'"},
           // The tokenizer error advises --gpt2-dir: linattn-generate has it, and reads the folder given.
           {ckpt_ + " --tokenizer gpt2 --gpt2-dir " + dir_, "gpt2 tokenizer: '" + dir_ + "' holds neither"},
           {ckpt_ + " --prompt Hi --max-new-tokens 1000000000",
            "--prompt: the prompt's 3 tokens and --max-new-tokens 1000000000 need"},
       }) {
    testing::CommandResult r = generate_all(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_NE(r.output.find("linattn-generate: error: " ), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST_F(Generate, APromptFileThatIsAFolderIsAnError) {
  // It used to generate from an empty prompt, with exit code 0.
  const testing::CommandResult r = generate_all(ckpt_ + " --prompt-file " + dir_);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--prompt-file " + dir_ + ": a folder, not a file"), std::string::npos) << r.output;
}

TEST_F(Generate, SafetensorsWeightsAreRecognisedAndListed) {
  const std::string out = dir_ + "/fla";
  const testing::CommandResult exported = testing::run_command(testing::built_binary("linattn-export") + " " + ckpt_ +
                                                               " " + out + " --format safetensors");
  ASSERT_EQ(exported.status, 0) << exported.output;
  // linattn-generate says what it reads and what to give, for the file and for its folder.
  for (const std::string& path : {out, out + "/model.safetensors"}) {
    const testing::CommandResult r = generate_all(path);
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(path + ": safetensors weights (fla's names and shapes, without linattn's config): "
                            "linattn-generate reads linattn .h5 files; give the checkpoint they were exported from"),
              std::string::npos)
        << r.output;
    // linattn-export --list lists its tensors instead of "not an HDF5 file".
    const testing::CommandResult l = testing::run_command(testing::built_binary("linattn-export") + " --list " + path);
    EXPECT_EQ(l.status, 0) << l.output;
    EXPECT_NE(l.output.find(out + "/model.safetensors: safetensors, "), std::string::npos) << l.output;
    EXPECT_NE(l.output.find("model.embeddings.weight"), std::string::npos) << l.output;
    EXPECT_NE(l.output.find(" parameters\n"), std::string::npos) << l.output;
  }
}

TEST(GenerateMqar, AnMqarModelHasNoTextTokenizerAndSaysSo) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-mqar-generate-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  Config c = parse_config(R"(model: {vocab_size: 16, hidden_size: 32, num_hidden_layers: 1, num_heads: 2, mixer: deltanet}
data:
  source: mqar
  seq_len: 32
  mqar: {vocab_size: 16, num_kv_pairs: 4, num_train_examples: 100, num_val_examples: 30}
train: {batch_size: 8, warmup_steps: 2, max_steps: 2, out_dir: )" + dir + "}\n",
                          "mqar.yaml");
  Trainer(c).run();
  const std::string ckpt = latest_checkpoint(dir);
  const testing::CommandResult r =
      testing::run_command(testing::built_binary("linattn-generate") + " " + ckpt + " --prompt 1");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(ckpt + ": an MQAR model (data.source: mqar, docs/mqar.md): its tokens are the task's key "
                          "and value ids, not text"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace linattn
