#include "train/sample.h"

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>

#include "data/utf8_stream.h"
#include "layers/decoder.h"
#include "layers/sampler.h"

namespace linattn {

std::string training_sample(const Model& model, const data::Tokenizer& tokenizer, const std::string& prompt,
                            int64_t tokens, uint64_t seed) {
  std::vector<uint32_t> ids{tokenizer.eot()};
  tokenizer.encode(prompt, ids, "train.sample_prompt");
  Tensor prompt_ids = Tensor::empty({1, int64_t(ids.size())}, DType::i32);
  std::copy(ids.begin(), ids.end(), prompt_ids.data<int32_t>());
  Decoder decoder(model, 1);
  Tensor logits = decoder.prefill(prompt_ids);
  SamplingOptions options;
  options.temperature = 0.8;
  Rng rng(seed);
  data::Utf8Stream utf8;
  std::string text = utf8.push(prompt);
  for (int64_t n = 0; n < tokens; ++n) {
    const int32_t next = sample_tokens(logits, options, rng)[0];
    if (tokenizer.stops(uint32_t(next)) || uint32_t(next) >= tokenizer.vocab_size()) break;
    text += utf8.push(tokenizer.token_bytes(uint32_t(next)));
    if (n + 1 < tokens) logits = decoder.step({next});
  }
  text += utf8.finish();
  // One line that cannot move the terminal's cursor: control characters as escapes.
  std::string line;
  for (unsigned char c : text) {
    char escape[8];
    std::snprintf(escape, sizeof escape, "\\x%02x", c);
    line += c == '\n' ? "\\n" : c == '\t' ? "\\t" : c < 0x20 || c == 0x7f ? escape : std::string(1, char(c));
  }
  return line;
}

namespace {

std::string sample_line(const Model& model, const std::function<const data::Tokenizer&()>& tokenizer,
                        const TrainConfig& t, int64_t step) {
  try {
    return "sample step " + std::to_string(step) + " | " +
           training_sample(model, tokenizer(), t.sample_prompt, t.sample_tokens, t.seed);
  } catch (const std::exception& e) {
    return "warning: no sample at step " + std::to_string(step) + ": " + e.what();
  }
}

}  // namespace

std::string training_sample_line(const Model& model, const std::string& tokenizer, const TrainConfig& t,
                                 int64_t step) {
  std::unique_ptr<data::Tokenizer> tok;
  return sample_line(model, [&]() -> const data::Tokenizer& {
    tok = data::make_tokenizer(tokenizer, data::default_gpt2_dir());
    return *tok;
  }, t, step);
}

std::string training_sample_line(const Model& model, const data::Dataset& data, const TrainConfig& t, int64_t step) {
  // A tokenizer.json can take a second to read: the last one is kept, by the data it made.
  static std::mutex mutex;
  static std::string kept_for;
  static std::unique_ptr<data::Tokenizer> kept;
  const std::string key = data.shards().front().info().path + "\n" + data.describe_tokenizer();
  return sample_line(model, [&]() -> const data::Tokenizer& {
    std::lock_guard<std::mutex> lock(mutex);
    if (!kept || kept_for != key) {
      kept.reset();
      kept = data::data_tokenizer(data);
      kept_for = key;
    }
    return *kept;
  }, t, step);
}

}  // namespace linattn
