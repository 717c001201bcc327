// linattn-generate: text from a checkpoint (or an export), streamed as it is decoded.
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/hdf5.h"
#include "data/dataset.h"
#include "data/safetensors.h"
#include "data/tokenizer.h"
#include "data/utf8_stream.h"
#include "layers/decoder.h"
#include "layers/sampler.h"
#include "train/checkpoint.h"
#include "tools/cli.h"
#include "train/run_data.h"

namespace {

using namespace linattn;

struct Args {
  std::string ckpt, prompt, prompt_file, stop, tokenizer, gpt2_dir;
  int64_t max_new = 200, num_samples = 1, seed = 1, decode_threads = 1;
  std::optional<int64_t> threads;
  SamplingOptions sampling{.temperature = 0.8};
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Writes text from a checkpoint of linattn-train (or an export of linattn-export) to stdout as it is\n"
      "decoded: the prompt, then what the model writes after it. The prompt runs through the training\n"
      "kernels once; then each token costs one recurrent step per linear layer and one look at the\n"
      "key/value cache per attention layer (docs/decoding.md). Every sample starts at a document start\n"
      "(an end-of-text token), as the training documents do.",
      "linattn-generate");
  app.add_option("CKPT.h5", a.ckpt, "a checkpoint of linattn-train or an export of linattn-export, or a run folder: "
                 "its newest intact checkpoint");
  CLI::Option* prompt = app.add_option("--prompt", a.prompt, "the text to continue (default: none, a new document)")
                            ->type_name("TEXT");
  app.add_option("--prompt-file", a.prompt_file, "read the prompt from file F instead")->type_name("F")->excludes(prompt);
  app.add_option("--max-new-tokens", a.max_new, "tokens to write per sample, 1 to 10^9 (default 200)")
      ->type_name("N")
      ->check(cli::whole_number(1, 1000000000));
  app.add_option("--temperature", a.sampling.temperature,
                 ">= 0; 0 = greedy, always the most likely token (default 0.8)")
      ->type_name("T")
      ->check(cli::finite_number());
  app.add_option("--top-k", a.sampling.top_k, "draw from the K most likely tokens only; 0 = all (default 0)")
      ->type_name("K")
      ->check(cli::whole_number(0, INT32_MAX));
  app.add_option("--top-p", a.sampling.top_p,
                 "draw from the fewest most likely tokens whose probability reaches P, in (0, 1] (default 1)")
      ->type_name("P")
      ->check(cli::finite_number());
  app.add_option("--seed", a.seed, "the sampling seed; the same seed gives the same text (default 1)")
      ->type_name("S")
      ->check(cli::whole_number(0, INT64_MAX));
  app.add_option("--num-samples", a.num_samples, "samples to write, one after another, 1 to 10000 (default 1)")
      ->type_name("N")
      ->check(cli::whole_number(1, 10000));
  app.add_option("--stop", a.stop,
                 "end a sample where TEXT first appears in it (TEXT is not printed); a sample also ends at an "
                 "end-of-text token")
      ->type_name("TEXT");
  app.add_option("--tokenizer", a.tokenizer,
                 "the tokenizer when the run's data folder is not at hand (by default the one the run's data was "
                 "prepared with; GPT-2's files are found as linattn-data finds them, $LINATTN_GPT2_DIR; a "
                 "tokenizer.json must be the one the data records)")
      ->type_name("bytes|gpt2|PATH/tokenizer.json")
      ->check(cli::tokenizer_name());
  app.add_option("--gpt2-dir", a.gpt2_dir,
                 "the folder of GPT-2's tokenizer files (encoder.json + vocab.bpe, or vocab.json + merges.txt); "
                 "default $LINATTN_GPT2_DIR, else the one scripts/fetch-data fills")
      ->type_name("DIR");
  app.add_option("--threads", a.threads, "OpenMP threads of the prompt's pass, 1 to 4096 (default: all cores)")
      ->type_name("N")
      ->check(cli::whole_number(1, 4096));
  app.add_option("--decode-threads", a.decode_threads,
                 "OpenMP threads of each new token, 1 to 4096 (default 1: one token of a small model is too little "
                 "work to share, and waking threads costs more than it saves)")
      ->type_name("N")
      ->check(cli::whole_number(1, 4096));
  app.footer(
      "A byte-level model can write bytes that are not UTF-8: they are printed as U+FFFD. The time per\n"
      "token goes to stderr at the end. Errors name the flag or file and the fix; LINATTN_DEBUG=1 adds the\n"
      "source location of the failed check.");
  cli::parse(app, argc, argv, 1);
  if (a.ckpt.empty()) cli::usage_error("linattn-generate", "no checkpoint: give CKPT.h5", 1);
  return a;
}

std::string read_file(const std::string& path, const std::string& flag) {
  LINATTN_REQUIRE(!std::filesystem::is_directory(path), flag, " ", path, ": a folder, not a file: give the file "
                  "that holds the text");
  std::ifstream in(path, std::ios::binary);
  LINATTN_REQUIRE(in.good(), flag, " ", path, ": cannot read the file (", std::strerror(errno), ")");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A checkpoint (format linattn-checkpoint) or an export (linattn-weights, any of its dtypes): the
// config and the weights, loaded into a float32 model (float64 when the run trained in float64).
struct Loaded {
  Config config;
  std::unique_ptr<Model> model;
};

Loaded load(const std::string& path) {
  LINATTN_REQUIRE(access(path.c_str(), R_OK) == 0, path, ": cannot read the checkpoint (", std::strerror(errno),
                  "); give the path of a .h5 file written by linattn-train or linattn-export");
  const std::string weights = std::filesystem::is_directory(path) ? path + "/model.safetensors" : path;
  LINATTN_REQUIRE(!data::looks_like_safetensors(weights), path, ": safetensors weights (fla's names and shapes, "
                  "without linattn's config): linattn-generate reads linattn .h5 files; give the checkpoint they "
                  "were exported from, or its .h5 export (linattn-export CKPT.h5 OUT.h5)");
  std::string format, export_dtype;
  {
    H5File f(path, H5File::Mode::read);
    format = f.attr_string("format").value_or("");
    export_dtype = f.attr_string("dtype").value_or("f32");
  }
  LINATTN_REQUIRE(format == "linattn-checkpoint" || format == "linattn-weights", path,
                  ": not a linattn checkpoint or export (its 'format' attribute is '", format,
                  "'); give a file written by linattn-train or linattn-export");
  Loaded l;
  if (format == "linattn-checkpoint") {
    l.config = parse_config(checkpoint_config_text(path), path);
    l.model = std::make_unique<Model>(l.config.model, l.config.train.dtype == "f64" ? DType::f64 : DType::f32);
    load_checkpoint(path, l.config, *l.model, nullptr, nullptr);
    return l;
  }
  H5File f(path, H5File::Mode::read);
  auto text = f.attr_string("config");
  LINATTN_REQUIRE(text.has_value(), path, ": the export has no 'config' attribute (the file is damaged)");
  l.config = parse_config(*text, path);
  l.model = std::make_unique<Model>(l.config.model, DType::f32);
  const Parameters& p = l.model->params();
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string& name = p.name(int(i));
    const Tensor& dst = p.values()[int(i)];
    LINATTN_REQUIRE(f.has(name), path, ": missing parameter '", name, "'");
    if (export_dtype != "bf16") {
      dst.copy_from(f.read(name, DType::f32, dst.shape()));
      continue;
    }
    // bfloat16: the top 16 bits of a float32, stored as uint16.
    Tensor bits = f.read(name, DType::i32, dst.shape());
    for (int64_t j = 0; j < dst.numel(); ++j) {
      uint32_t word = uint32_t(bits.data<int32_t>()[j]) << 16;
      std::memcpy(dst.data<float>() + j, &word, 4);
    }
  }
  return l;
}

// The tokenizer the run's data was prepared with, or the --tokenizer flag's (train/run_data.h); GPT-2's
// files from gpt2_dir (--gpt2-dir), or where linattn-data finds them.
std::unique_ptr<data::Tokenizer> run_tokenizer(const Config& config, const std::string& ckpt, const std::string& name,
                                               const std::string& gpt2_dir) {
  LINATTN_REQUIRE(!name.empty() || config.data.source != "mqar", ckpt, ": an MQAR model (data.source: mqar, "
                  "docs/mqar.md): its tokens are the task's key and value ids, not text, so it has no text tokenizer "
                  "to generate with; measure its recall with linattn-eval instead");
  auto tok = open_run_tokenizer(config.data.path, ckpt, name, gpt2_dir);
  LINATTN_REQUIRE(int64_t(tok->vocab_size()) <= config.model.vocab_size, "--tokenizer ", name, ": its vocabulary (",
                  tok->vocab_size(), ") is larger than the model's (", config.model.vocab_size,
                  "); the model was trained with another tokenizer");
  return tok;
}

// Memory this machine has (physical), in bytes.
double machine_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

// Global attention keeps every position's keys and values: refuse a length whose cache alone would
// not fit in this machine's memory.
void check_length(const Config& config, int64_t prompt_tokens, int64_t new_tokens, size_t scalar_bytes,
                  const std::string& prompt_flag) {
  const ModelConfig& m = config.model;
  double per_token = 0;
  for (const LayerSpec& l : m.layers)
    if (mixer_descriptor(l.mixer).attention && l.window_size == 0)
      per_token += 2.0 * double(l.num_kv_heads) * double(m.hidden_size / l.num_heads) * double(scalar_bytes);
  const double need = per_token * double(prompt_tokens + new_tokens);
  LINATTN_REQUIRE(need <= machine_bytes(), prompt_flag, ": the prompt's ", prompt_tokens, " tokens and --max-new-tokens ",
                  new_tokens, " need ", need / (1 << 30), " GiB of key/value cache for the global attention layers, "
                  "more than this machine's ", machine_bytes() / (1 << 30), " GiB of memory; give a shorter prompt "
                  "or fewer new tokens");
}

// Text on its way to stdout: held back while it could still be the start of the stop text, and
// while a UTF-8 character is incomplete.
class Output {
 public:
  explicit Output(std::string stop) : stop_(std::move(stop)) {}
  // The prompt, first: printed by the same rule as the new text (bytes that are no UTF-8 become
  // U+FFFD; a character the new text completes is printed whole), and never searched for the stop text.
  void echo(std::string_view prompt) { write(utf8_.push(prompt)); }
  // Adds a token's bytes; returns true when the stop text has appeared (the sample ends).
  bool add(std::string_view bytes) {
    text_ += bytes;
    // Text before printed_ held no start of the stop text that could complete.
    const size_t found = stop_.empty() ? std::string::npos : text_.find(stop_, printed_);
    const size_t until = found != std::string::npos ? found
                         : stop_.empty()           ? text_.size()
                                                   : std::max(printed_, text_.size() + 1 - std::min(text_.size() + 1, stop_.size()));
    write(utf8_.push(std::string_view(text_).substr(printed_, until - printed_)));
    printed_ = until;
    return found != std::string::npos;
  }
  void finish(bool stopped) {
    if (!stopped) write(utf8_.push(std::string_view(text_).substr(printed_)));
    write(utf8_.finish());
    write("\n");
  }
  static void write(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }

 private:
  std::string stop_, text_;
  size_t printed_ = 0;
  data::Utf8Stream utf8_;
};

// Times of a run of samples: the prompt's pass and the new tokens.
struct Timing {
  double prefill_s = 0, decode_s = 0;
  int64_t decoded = 0;
};

// One sample after the prompt, streamed to stdout: at most max_new tokens, up to the stop text or
// an end-of-text token.
void write_sample(Decoder& decoder, const Tensor& prompt_ids, const data::Tokenizer& tok, const Args& a, Rng& rng,
                  int prefill_threads, Timing& timing) {
  using Clock = std::chrono::steady_clock;
  Output out(a.stop);
  out.echo(a.prompt);
  auto t0 = Clock::now();
  decoder.reset();
  omp_set_num_threads(prefill_threads);
  Tensor logits = decoder.prefill(prompt_ids);
  omp_set_num_threads(int(a.decode_threads));
  timing.prefill_s += std::chrono::duration<double>(Clock::now() - t0).count();
  t0 = Clock::now();
  bool stopped = false;
  for (int64_t n = 0; n < a.max_new && !stopped; ++n) {
    const int32_t next = sample_tokens(logits, a.sampling, rng)[0];
    if (tok.stops(uint32_t(next)) || uint32_t(next) >= tok.vocab_size()) break;
    stopped = out.add(tok.token_bytes(uint32_t(next)));
    ++timing.decoded;
    if (!stopped && n + 1 < a.max_new) logits = decoder.step({next});
  }
  timing.decode_s += std::chrono::duration<double>(Clock::now() - t0).count();
  out.finish(stopped);
}

int run(Args a) {
  check_sampling(a.sampling);
  if (a.threads) omp_set_num_threads(int(*a.threads));
  // Errors about the prompt name where it came from.
  const std::string prompt_flag = a.prompt_file.empty() ? "--prompt" : "--prompt-file " + a.prompt_file;
  if (!a.prompt_file.empty()) a.prompt = read_file(a.prompt_file, "--prompt-file");

  Loaded l = load(a.ckpt);
  const Model& model = *l.model;
  auto tok = run_tokenizer(l.config, a.ckpt, a.tokenizer, a.gpt2_dir);
  std::vector<uint32_t> ids{tok->eot()};
  tok->encode(a.prompt, ids, prompt_flag);
  const size_t scalar_bytes = dtype_size(model.params().values().all().dtype());
  check_length(l.config, int64_t(ids.size()), a.max_new, scalar_bytes, prompt_flag);

  Tensor prompt_ids = Tensor::empty({1, int64_t(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), prompt_ids.data<int32_t>());
  Rng rng(uint64_t(a.seed));
  Decoder decoder(model, 1);
  const int prefill_threads = omp_get_max_threads();
  Timing timing;
  for (int64_t sample = 0; sample < a.num_samples; ++sample) {
    if (a.num_samples > 1) Output::write("--- sample " + std::to_string(sample + 1) + " ---\n");
    write_sample(decoder, prompt_ids, *tok, a, rng, prefill_threads, timing);
  }
  std::fprintf(stderr,
               "linattn-generate: %lld new tokens in %.3f s (%.1f tokens/s); prompt of %zu tokens prefilled in "
               "%.3f s per sample\n",
               (long long)timing.decoded, timing.decode_s,
               timing.decode_s > 0 ? double(timing.decoded) / timing.decode_s : 0.0, ids.size(),
               timing.prefill_s / double(a.num_samples));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  try {
    args.ckpt = checkpoint_argument(args.ckpt, "linattn-generate");
    return run(std::move(args));
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "linattn-generate: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
