// Token datasets and the loaders that feed the trainer.
//
// A Dataset is one split (train or val): one or more shards (linattn or llm.c format) mapped into
// memory and read as one token stream. TrainLoader draws training windows of seq_len + 1 tokens in a
// seeded order whose position is a small POD (SamplerState) that checkpoints store; ValLoader walks the
// validation split in a fixed order. Both split every global batch between data-parallel ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "data/shard.h"
#include "data/tokenizer.h"

namespace linattn::data {

class Dataset {
 public:
  // The shards of `split` in dir: the *.bin files whose name has `split` as a word ("train.bin",
  // "fineweb_train_000001.bin", "shakespeare_val.bin"), sorted by name.
  static std::shared_ptr<const Dataset> open(const std::string& dir, const std::string& split);
  // These shards, in this order. They must agree on tokenizer and vocabulary size.
  explicit Dataset(const std::vector<std::string>& paths);

  uint64_t num_tokens() const { return num_tokens_; }
  uint32_t vocab_size() const { return shards_.front().info().vocab_size; }
  uint32_t eot() const { return shards_.front().info().eot; }
  const std::string& tokenizer() const { return shards_.front().info().tokenizer; }
  // The sha256 of the tokenizer.json that made the shards ("" for bytes and gpt2).
  const std::string& tokenizer_sha256() const { return shards_.front().info().tokenizer_sha256; }
  // "bytes", "gpt2", or "tokenizer.json sha256 0123abcd..." for messages.
  std::string describe_tokenizer() const;
  const std::vector<TokenShard>& shards() const { return shards_; }

  // Bytes of text the split covers, and per token: what turns a loss in nats per token into bits per
  // byte (see bits_per_byte). Unknown (has_text_bytes() false, bytes_per_token() NaN) when a shard does
  // not record it (llm.c shards).
  bool has_text_bytes() const { return has_text_bytes_; }
  uint64_t text_bytes() const { return text_bytes_; }
  double bytes_per_token() const;

  // out[k] = token begin + k of the whole split, across shard boundaries.
  void read(uint64_t begin, uint64_t count, int32_t* out) const;

 private:
  std::vector<TokenShard> shards_;
  std::vector<uint64_t> starts_;  // first token of each shard in the split's stream
  uint64_t num_tokens_ = 0;
  bool has_text_bytes_ = true;
  uint64_t text_bytes_ = 0;
};

// Whether a shard file belongs to `split`: its name ends in .bin and `split` is one of the words of its
// stem, words being separated by '_', '-' or '.' ("fineweb_train_000001.bin" is in "train").
bool shard_in_split(const std::string& path, const std::string& split);

// Bytes of text all the tokens of a split decode to with `tokenizer` (end-of-text counts none): the
// figure bits per byte needs, for shards that do not record it (llm.c's). The tokenizer must be the one
// the shards were made with.
uint64_t count_text_bytes(const Dataset& data, const Tokenizer& tokenizer);

// The tokenizer that made the data: bytes or gpt2 by name (GPT-2's files from gpt2_dir, default
// default_gpt2_dir()), or the tokenizer.json that linattn-data prepare copied beside the shards, which must
// be the file the shards record (its sha256). Errors say what is missing and how to fix it.
std::unique_ptr<Tokenizer> data_tokenizer(const Dataset& data, const std::string& gpt2_dir = "");

// Refuses a tokenizer that did not make the data: another name, vocabulary or tokenizer.json. The
// error names `tokenizer_source` (e.g. "--tokenizer x/tokenizer.json") and `data_source` (the folder).
void check_tokenizer_matches(const Tokenizer& tokenizer, const std::string& tokenizer_source, const Dataset& data,
                             const std::string& data_source);

// The tokenizer.json (and tokenizer_config.json) that linattn-data prepare keeps in a data folder.
inline constexpr const char* data_tokenizer_file = "tokenizer.json";
inline constexpr const char* data_tokenizer_config_file = "tokenizer_config.json";

// Bits per byte from a mean cross-entropy in nats per token: loss / ln 2 / bytes_per_token.
double bits_per_byte(double loss_nats_per_token, double bytes_per_token);

// Where the training sampler is. Plain data: the checkpoint stores it as is, every rank holds the same.
struct SamplerState {
  uint64_t seed = 0;
  uint64_t epoch = 0;       // passes over the training split so far
  uint64_t position = 0;    // windows of this epoch already drawn (all ranks together)
  uint64_t batches = 0;     // global batches drawn so far
  uint64_t num_tokens = 0;  // of the training split: restore() refuses another split
  uint64_t seq_len = 0;     // restore() refuses another sequence length

  bool operator==(const SamplerState&) const = default;
};
static_assert(std::is_trivially_copyable_v<SamplerState> && std::is_standard_layout_v<SamplerState>);

struct LoaderOptions {
  int64_t batch_size = 8;  // rows per rank; a global batch is batch_size * world_size rows
  int64_t seq_len = 256;   // each row: seq_len inputs and the seq_len targets one token later
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  uint64_t max_tokens = 0;  // ValLoader only: evaluate about this many tokens (0: the whole split)
};

// One batch: int32 inputs and targets [rows, seq_len]; targets[i][t] = inputs[i][t + 1] in the stream
// (generated tasks set their own targets, kIgnoreTarget where no loss is taken; see data/mqar.h).
struct Batch {
  Tensor inputs;
  Tensor targets;
  int64_t rows = 0;
};

// A target that takes no loss: ops::cross_entropy's default ignore_index.
constexpr int32_t kIgnoreTarget = -100;

// What the trainer draws training batches from: token windows (TrainLoader) or generated examples
// (data/mqar.h). Each rank reads its rows of every global batch; the position is a SamplerState.
class TrainBatches {
 public:
  virtual ~TrainBatches() = default;
  // This rank's part of the next global batch: inputs and targets [batch_size, seq_len] int32.
  virtual Batch next() = 0;
  virtual SamplerState state() const = 0;
  virtual void restore(const SamplerState& state) = 0;  // continue exactly where `state` was taken
};

// What evaluation walks: the validation batches in a fixed order, split between ranks.
class ValBatches {
 public:
  virtual ~ValBatches() = default;
  virtual void reset() = 0;           // back to the first batch
  virtual bool next(Batch& out) = 0;  // false after the last batch
  // Bytes of text per token, for bits per byte; NaN when unknown or when the tokens are not text.
  virtual double bytes_per_token() const = 0;
  // Whether the targets that take a loss are recall queries (MQAR): evaluation then also scores
  // their argmax predictions (recall accuracy).
  virtual bool scores_recall() const { return false; }
};

// The seeded orders the loaders share: a key per (seed, epoch), and permute(x, n, key), a
// pseudo-random bijection on [0, n).
uint64_t mix64(uint64_t z);
uint64_t epoch_key(uint64_t seed, uint64_t epoch);
uint64_t permute(uint64_t x, uint64_t n, uint64_t key);

// Training windows. Each epoch cuts the split into windows of seq_len + 1 tokens that share their edge
// token (window c starts at shift + c * seq_len, the shift drawn per epoch in [0, seq_len)), and visits
// them in a seeded pseudo-random order (a bijection on the window indices: every window once per
// epoch). Global batch b takes the next batch_size * world_size windows; rank r reads rows
// [r * batch_size, (r + 1) * batch_size) of it.
class TrainLoader : public TrainBatches {
 public:
  TrainLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& options);

  // This rank's part of the next global batch: inputs and targets [batch_size, seq_len] int32.
  Batch next() override;
  void next(const Tensor& inputs, const Tensor& targets);

  SamplerState state() const override { return state_; }
  void restore(const SamplerState& state) override;  // continue exactly where `state` was taken

  uint64_t windows_in_epoch(uint64_t epoch) const;
  // Token offset of the window drawn at (epoch, position): for tests and for looking at the order.
  uint64_t window_start(uint64_t epoch, uint64_t position) const;
  const Dataset& dataset() const { return *data_; }

 private:
  std::shared_ptr<const Dataset> data_;
  LoaderOptions options_;
  SamplerState state_;
};

// Validation windows in a fixed order, the same on every run: window k covers tokens
// [k * seq_len, k * seq_len + seq_len + 1), for k below min(whole split, max_tokens / seq_len) (the last
// < seq_len tokens are not evaluated). Global batch b holds windows [b * B * world, (b + 1) * B * world),
// rank r its rows [r * B, (r + 1) * B) of them, so ranks see disjoint windows whose union is the split.
// The last batch may have fewer rows on some ranks (even zero); every rank gets the same number of
// batches.
class ValLoader : public ValBatches {
 public:
  ValLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& options);

  void reset() override;            // back to the first batch
  bool next(Batch& out) override;   // false after the last batch
  uint64_t num_windows() const { return num_windows_; }  // all ranks together
  uint64_t num_batches() const;
  uint64_t num_target_tokens() const { return num_windows_ * uint64_t(options_.seq_len); }
  double bytes_per_token() const override { return data_->bytes_per_token(); }
  const Dataset& dataset() const { return *data_; }

 private:
  std::shared_ptr<const Dataset> data_;
  LoaderOptions options_;
  uint64_t num_windows_ = 0;
  uint64_t batch_ = 0;
};

}  // namespace linattn::data
