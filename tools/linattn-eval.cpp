// linattn-eval: validation loss, perplexity and bits per byte of a checkpoint.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "train/checkpoint.h"
#include "train/trainer.h"

namespace {

const char* kUsage = R"(usage: linattn-eval CKPT.h5 [--data DIR] [--tokens N] [--batch B] [--threads N]

Evaluates a checkpoint on a validation split and prints loss, perplexity and bits per byte.
The model and, by default, the data folder and token count come from the checkpoint's config, so
the result equals what linattn-train printed for the same checkpoint.

  --data DIR     a folder written by linattn-data prepare (its *val*.bin split)
  --tokens N     evaluate the first N tokens of the split (default 0: all of it, as the trainer's
                 final evaluation does)
  --batch B      sequences per forward pass (default: the run's micro-batch, or its batch)
  --threads N    OpenMP threads (default: all cores)
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace linattn;
  std::string ckpt;
  std::vector<std::string> overrides;
  int64_t batch = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--data" && i + 1 < argc) {
      overrides.push_back(std::string("data.path=") + argv[++i]);
    } else if (a == "--tokens" && i + 1 < argc) {
      overrides.push_back(std::string("data.val_tokens=") + argv[++i]);
    } else if (a == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      omp_set_num_threads(std::atoi(argv[++i]));
    } else if (a.rfind("--", 0) == 0 || !ckpt.empty()) {
      std::fprintf(stderr, "linattn-eval: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      ckpt = a;
    }
  }
  if (ckpt.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  try {
    // Like the trainer's final evaluation: the whole split unless --tokens says otherwise.
    overrides.insert(overrides.begin(), "data.val_tokens=0");
    Config config = parse_config(checkpoint_config_text(ckpt), ckpt, overrides);
    Model model(config.model, config.train.dtype == "f64" ? DType::f64 : DType::f32);
    TrainState state;
    load_checkpoint(ckpt, config, model, nullptr, &state);
    auto val = data::Dataset::open(config.data.path, "val");
    LINATTN_REQUIRE(int64_t(val->vocab_size()) <= config.model.vocab_size, config.data.path, ": the data's vocabulary (",
                    val->vocab_size(), ") is larger than the model's (", config.model.vocab_size, ")");
    Arena arena;
    EvalResult r = evaluate(model, val, config.data.seq_len, batch > 0 ? batch
                            : config.train.micro_batch_size ? config.train.micro_batch_size : config.train.batch_size,
                            config.data.val_tokens, arena);
    std::printf("%s (step %lld) on %s: val loss %.4f | ppl %.3f | bpb %.4f | %lld tokens\n", ckpt.c_str(),
                (long long)state.step, config.data.path.c_str(), r.loss, r.perplexity, r.bits_per_byte,
                (long long)r.tokens);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-eval: error: %s\n", e.what());
    return 1;
  }
}
