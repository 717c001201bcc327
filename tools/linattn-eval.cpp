// linattn-eval: validation loss, perplexity and bits per byte of a checkpoint, on its run's validation
// split, on another prepared folder, or on any text files.
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/mqar.h"
#include "data/prepare.h"
#include "tools/cli.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/run_data.h"

namespace {

using namespace linattn;
namespace fs = std::filesystem;

struct Args {
  std::string ckpt, data, tokenizer, boundaries, gpt2_dir;
  std::vector<std::string> texts;
  std::optional<int64_t> tokens, seq_len, batch, threads;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Evaluates a checkpoint and prints loss (nats per token), perplexity and bits per byte (an MQAR run:\n"
      "loss and recall accuracy at the queries of its validation examples, docs/mqar.md). The model,\n"
      "and by default the data folder and the sequence length, come from the checkpoint's config. By\n"
      "default the whole validation split is evaluated, as the trainer's final evaluation does, so the\n"
      "result equals the loss linattn-train printed at its last step; the evaluations during training\n"
      "read only the first data.val_tokens tokens (--tokens N repeats those).",
      "linattn-eval");
  app.add_option("CKPT.h5", a.ckpt, "the checkpoint (linattn-train's .h5), or a run folder: its newest intact checkpoint");
  app.add_option("--data", a.data,
                 "a folder written by linattn-data prepare (its *val*.bin split). Default: the run's data.path; a "
                 "relative one is looked for from the working directory, then from the checkpoint's folder and "
                 "each folder above it")
      ->type_name("DIR");
  app.add_option("--text", a.texts,
                 "evaluate on these text files (or folders of them) instead: each is one document, tokenized "
                 "with the tokenizer of the run's data (bytes, gpt2, or the tokenizer.json kept in its folder; GPT-2's files are found as linattn-data "
                 "finds them, $LINATTN_GPT2_DIR)")
      ->type_name("FILE");
  app.add_option("--tokenizer", a.tokenizer, "the tokenizer for --text when the run's data folder is not at hand "
                 "(a tokenizer.json must be the one the run's data records)")
      ->type_name("bytes|gpt2|PATH/tokenizer.json")
      ->check(cli::tokenizer_name());
  app.add_option("--gpt2-dir", a.gpt2_dir,
                 "the folder of GPT-2's tokenizer files for --text (encoder.json + vocab.bpe, or vocab.json + "
                 "merges.txt); default $LINATTN_GPT2_DIR, else the one scripts/fetch-data fills")
      ->type_name("DIR");
  app.add_option("--tokens", a.tokens, "evaluate the first N tokens (default 0: all of them)")
      ->type_name("N")
      ->check(cli::whole_number(0, INT64_MAX));
  app.add_option("--seq-len", a.seq_len, "tokens per window (default: the run's data.seq_len)")
      ->type_name("T")
      ->check(cli::whole_number(1, int64_t(1) << 24));
  app.add_option("--batch", a.batch, "sequences per forward pass, 1 to 65536 (default: the run's micro-batch, or batch)")
      ->type_name("B")
      ->check(cli::whole_number(1, 65536));
  app.add_option("--threads", a.threads, "OpenMP threads, 1 to 4096 (default: all cores)")
      ->type_name("N")
      ->check(cli::whole_number(1, 4096));
  app.add_option("--document-boundaries", a.boundaries,
                 "reset: each end-of-text token in a window starts a fresh sequence, as data.document_boundaries: "
                 "reset trains (default: the run's setting); the result line says which was used")
      ->type_name("cross|reset")
      ->check(cli::one_of({"cross", "reset"}));
  app.footer("Errors name the file and the fix; LINATTN_DEBUG=1 adds the source location of the failed check.");
  cli::parse(app, argc, argv, 1);
  if (a.ckpt.empty()) cli::usage_error("linattn-eval", "no checkpoint: give CKPT.h5", 1);
  if (!a.data.empty() && !a.texts.empty()) cli::usage_error("linattn-eval", "give --data or --text, not both", 1);
  return a;
}

// A folder removed with everything in it when the evaluation ends.
struct TempFolder {
  fs::path path = fs::temp_directory_path() / ("linattn-eval-" + std::to_string(getpid()));
  TempFolder() { fs::create_directories(path); }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The run's MQAR validation split: loss and recall accuracy at its queries.
void evaluate_mqar(const Model& model, const Config& config, const std::string& ckpt, int64_t step, int64_t rows) {
  data::LoaderOptions lo;
  lo.batch_size = rows;
  lo.seq_len = config.data.seq_len;
  lo.max_tokens = uint64_t(config.data.val_tokens);
  data::MqarValLoader val(config.data.mqar, lo);
  Arena arena;
  EvalResult r = evaluate(model, val, arena);
  std::printf("%s (step %lld) on %llu MQAR validation examples: val loss %.6f | ppl %.4f | recall accuracy %.6f | "
              "%lld queries, seq_len %lld\n", ckpt.c_str(), (long long)step, (unsigned long long)val.num_examples(),
              r.loss, r.perplexity, r.recall_accuracy, (long long)r.tokens, (long long)config.data.seq_len);
}

// The validation split of a prepared folder (--data, or the run's), or the --text files prepared
// into `temp` with the run's tokenizer; `described` says which for the result line.
std::shared_ptr<const data::Dataset> open_data(const Args& a, const Config& config, std::unique_ptr<TempFolder>& temp,
                                               std::string& described) {
  if (a.texts.empty()) {
    described = find_run_data(config.data.path, a.ckpt, !a.data.empty(), "the folder with --data DIR");
    auto val = data::Dataset::open(described, "val");
    if (!a.data.empty())  // config.data.path is --data's now: the run's own is in the checkpoint
      check_data_matches_run(*val, "--data " + a.data, parse_config(checkpoint_config_text(a.ckpt), a.ckpt).data.path, a.ckpt);
    return val;
  }
  data::PrepareOptions po;
  po.inputs = a.texts;
  po.gpt2_dir = a.gpt2_dir;
  // By default the run's tokenizer: the one its data was prepared with.
  po.tokenizer_instance = open_run_tokenizer(config.data.path, a.ckpt, a.tokenizer, a.gpt2_dir);
  temp = std::make_unique<TempFolder>();
  po.out_dir = temp->path.string();
  data::prepare(po);
  for (const std::string& t : a.texts) described += (described.empty() ? "" : ", ") + t;
  return std::make_shared<const data::Dataset>(std::vector<std::string>{(temp->path / "train.bin").string()});
}

int run(const Args& a) {
  if (a.threads) omp_set_num_threads(int(*a.threads));
  // Like the trainer's final evaluation: the whole split unless --tokens says otherwise.
  std::vector<std::string> overrides{"data.val_tokens=" + std::to_string(a.tokens.value_or(0))};
  if (a.seq_len) overrides.push_back("data.seq_len=" + std::to_string(*a.seq_len));
  if (!a.data.empty()) overrides.push_back("data.path=" + a.data);
  if (!a.boundaries.empty()) overrides.push_back("data.document_boundaries=" + a.boundaries);
  Config config = parse_config(checkpoint_config_text(a.ckpt), a.ckpt, overrides);
  Model model(config.model, config.train.dtype == "f64" ? DType::f64 : DType::f32);
  TrainState state;
  load_checkpoint(a.ckpt, config, model, nullptr, &state);

  const int64_t rows = a.batch                          ? *a.batch
                       : config.train.micro_batch_size ? config.train.micro_batch_size
                                                       : config.train.batch_size;
  LINATTN_REQUIRE(config.data.source != "mqar" || (a.data.empty() && a.texts.empty()), a.ckpt,
                  ": an MQAR model (data.source: mqar) reads no text: its vocabulary is MQAR's keys and values "
                  "(docs/mqar.md). Leave out ", a.texts.empty() ? "--data" : "--text",
                  ": it is then evaluated on its run's MQAR validation examples (loss and recall accuracy)");
  if (config.data.source == "mqar") {
    evaluate_mqar(model, config, a.ckpt, state.step, rows);
    return 0;
  }
  std::unique_ptr<TempFolder> temp;
  std::string described;
  const std::shared_ptr<const data::Dataset> val = open_data(a, config, temp, described);
  LINATTN_REQUIRE(int64_t(val->vocab_size()) <= config.model.vocab_size, described, ": the data's vocabulary (",
                  val->vocab_size(), ") is larger than the model's (", config.model.vocab_size,
                  "): it was prepared with another tokenizer than the run's");
  LINATTN_REQUIRE(val->num_tokens() >= uint64_t(config.data.seq_len) + 1, described, ": ", val->num_tokens(),
                  " tokens, fewer than one window of seq_len ", config.data.seq_len,
                  " + 1; give more text or a smaller --seq-len");
  Arena arena;
  EvalResult r = evaluate(model, val, config.data.seq_len, rows, config.data.val_tokens, arena, nullptr,
                          config.data.document_boundaries);
  std::printf(
      "%s (step %lld) on %s: val loss %.6f | ppl %.4f | bpb %.6f | %lld tokens, seq_len %lld, document boundaries %s\n",
      a.ckpt.c_str(), (long long)state.step, described.c_str(), r.loss, r.perplexity, r.bits_per_byte,
      (long long)r.tokens, (long long)config.data.seq_len, document_boundaries_name(config.data.document_boundaries));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  try {
    args.ckpt = checkpoint_argument(args.ckpt, "linattn-eval");
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-eval: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
