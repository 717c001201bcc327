// linattn-eval: validation loss, perplexity and bits per byte of a checkpoint, on its run's validation
// split, on another prepared folder, or on any text files.
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/flag_values.h"
#include "data/mqar.h"
#include "data/prepare.h"
#include "train/checkpoint.h"
#include "train/run_data.h"
#include "train/trainer.h"

namespace {

using namespace linattn;
namespace fs = std::filesystem;

const char* kUsage = R"(usage: linattn-eval CKPT.h5 [--data DIR | --text FILE...] [--tokens N] [--seq-len T]
                    [--batch B] [--threads N] [--document-boundaries cross|reset]

Evaluates a checkpoint and prints loss (nats per token), perplexity and bits per byte (an MQAR run:
loss and recall accuracy at the queries of its validation examples, docs/mqar.md). The model,
and by default the data folder and the sequence length, come from the checkpoint's config. By
default the whole validation split is evaluated, as the trainer's final evaluation does, so the
result equals the loss linattn-train printed at its last step; the evaluations during training
read only the first data.val_tokens tokens (--tokens N repeats those).

  --data DIR     a folder written by linattn-data prepare (its *val*.bin split). Default: the
                 run's data.path; a relative one is looked for from the working directory, then
                 from the checkpoint's folder and each folder above it
  --text FILE... evaluate on these text files (or folders of them) instead: each is one document,
                 tokenized with the tokenizer of the run's data (bytes or gpt2; GPT-2's files are
                 found as linattn-data finds them, $LINATTN_GPT2_DIR)
  --tokenizer bytes|gpt2   the tokenizer for --text when the run's data folder is not at hand
  --tokens N     evaluate the first N tokens (default 0: all of them)
  --seq-len T    tokens per window (default: the run's data.seq_len)
  --batch B      sequences per forward pass, 1 to 65536 (default: the run's micro-batch, or batch)
  --threads N    OpenMP threads, 1 to 4096 (default: all cores)
  --document-boundaries cross|reset
                 reset: each end-of-text token in a window starts a fresh sequence, as
                 data.document_boundaries: reset trains (default: the run's setting); the result
                 line says which was used

Errors name the file and the fix; LINATTN_DEBUG=1 adds the source location of the failed check.
)";

// A folder removed with everything in it when the evaluation ends.
struct TempFolder {
  fs::path path = fs::temp_directory_path() / ("linattn-eval-" + std::to_string(getpid()));
  TempFolder() { fs::create_directories(path); }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string ckpt, data_flag, tokenizer, tokens, seq_len, boundaries;
  std::vector<std::string> texts;
  int64_t batch = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        LINATTN_REQUIRE(i + 1 < argc, a, " needs a value (see linattn-eval --help)");
        return argv[++i];
      };
      if (a == "-h" || a == "--help") {
        std::printf("%s", kUsage);
        return 0;
      } else if (a == "--data") {
        data_flag = value();
      } else if (a == "--text") {
        texts.push_back(value());
        while (i + 1 < argc && argv[i + 1][0] != '-') texts.push_back(argv[++i]);
      } else if (a == "--tokenizer") {
        tokenizer = value();
      } else if (a == "--tokens") {
        tokens = std::to_string(parse_count(a, value(), 0, INT64_MAX));
      } else if (a == "--seq-len") {
        seq_len = std::to_string(parse_count(a, value(), 1, int64_t(1) << 24));
      } else if (a == "--batch") {
        batch = parse_count(a, value(), 1, 65536);
      } else if (a == "--threads") {
        omp_set_num_threads(int(parse_count(a, value(), 1, 4096)));
      } else if (a == "--document-boundaries") {
        boundaries = value();
        LINATTN_REQUIRE(boundaries == "cross" || boundaries == "reset", "--document-boundaries '", boundaries,
                        "' must be cross or reset");
      } else if (a.rfind("-", 0) == 0) {
        LINATTN_REQUIRE(false, "unknown option '", a, "' (see linattn-eval --help)");
      } else {
        LINATTN_REQUIRE(ckpt.empty(), "unexpected argument '", a, "': give one checkpoint (see linattn-eval --help)");
        ckpt = a;
      }
    }
    LINATTN_REQUIRE(!ckpt.empty(), "no checkpoint: give CKPT.h5 (see linattn-eval --help)");
    LINATTN_REQUIRE(data_flag.empty() || texts.empty(), "give --data or --text, not both");

    // Like the trainer's final evaluation: the whole split unless --tokens says otherwise.
    std::vector<std::string> overrides{"data.val_tokens=" + (tokens.empty() ? "0" : tokens)};
    if (!seq_len.empty()) overrides.push_back("data.seq_len=" + seq_len);
    if (!data_flag.empty()) overrides.push_back("data.path=" + data_flag);
    if (!boundaries.empty()) overrides.push_back("data.document_boundaries=" + boundaries);
    Config config = parse_config(checkpoint_config_text(ckpt), ckpt, overrides);
    Model model(config.model, config.train.dtype == "f64" ? DType::f64 : DType::f32);
    TrainState state;
    load_checkpoint(ckpt, config, model, nullptr, &state);

    const int64_t rows = batch > 0                          ? batch
                         : config.train.micro_batch_size ? config.train.micro_batch_size
                                                         : config.train.batch_size;
    if (config.data.source == "mqar" && data_flag.empty() && texts.empty()) {  // the run's MQAR validation split
      data::LoaderOptions lo;
      lo.batch_size = rows;
      lo.seq_len = config.data.seq_len;
      lo.max_tokens = uint64_t(config.data.val_tokens);
      data::MqarValLoader val(config.data.mqar, lo);
      Arena arena;
      EvalResult r = evaluate(model, val, arena);
      std::printf("%s (step %lld) on %llu MQAR validation examples: val loss %.6f | ppl %.4f | recall accuracy %.6f | "
                  "%lld queries, seq_len %lld\n", ckpt.c_str(), (long long)state.step,
                  (unsigned long long)val.num_examples(), r.loss, r.perplexity, r.recall_accuracy, (long long)r.tokens,
                  (long long)config.data.seq_len);
      return 0;
    }
    std::shared_ptr<const data::Dataset> val;
    std::string described;
    std::unique_ptr<TempFolder> temp;
    if (texts.empty()) {
      described = find_run_data(config.data.path, ckpt, !data_flag.empty(), "the folder with --data DIR");
      val = data::Dataset::open(described, "val");
    } else {
      if (tokenizer.empty())  // the run's: the one its data was prepared with
        tokenizer =
            data::Dataset::open(find_run_data(config.data.path, ckpt, false, "--tokenizer bytes|gpt2"), "train")
                ->tokenizer();
      temp = std::make_unique<TempFolder>();
      data::PrepareOptions po;
      po.inputs = texts;
      po.tokenizer = tokenizer;
      po.out_dir = temp->path.string();
      data::prepare(po);
      val = std::make_shared<const data::Dataset>(std::vector<std::string>{(temp->path / "train.bin").string()});
      for (const std::string& t : texts) described += (described.empty() ? "" : ", ") + t;
    }
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
        ckpt.c_str(), (long long)state.step, described.c_str(), r.loss, r.perplexity, r.bits_per_byte,
        (long long)r.tokens, (long long)config.data.seq_len, document_boundaries_name(config.data.document_boundaries));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-eval: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
