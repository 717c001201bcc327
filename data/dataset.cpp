#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.h"

namespace linattn::data {

namespace fs = std::filesystem;

// ---- Dataset ----

bool shard_in_split(const std::string& path, const std::string& split) {
  const fs::path p(path);
  if (p.extension() != ".bin") return false;
  const std::string stem = p.stem().string();
  size_t from = 0;
  while (from <= stem.size()) {
    const size_t to = std::min(stem.find_first_of("_.-", from), stem.size());
    if (stem.compare(from, to - from, split) == 0 && to - from == split.size()) return true;
    from = to + 1;
  }
  return false;
}

std::shared_ptr<const Dataset> Dataset::open(const std::string& dir, const std::string& split) {
  LINATTN_REQUIRE(fs::is_directory(dir), dir, fs::exists(dir) ? ": not a folder; give the data folder that holds "
                  "train.bin and val.bin" : ": data folder does not exist (prepare it with linattn-data prepare)");
  std::vector<std::string> paths, seen;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".bin") continue;
    seen.push_back(entry.path().filename().string());
    if (shard_in_split(entry.path().string(), split)) paths.push_back(entry.path().string());
  }
  if (paths.empty()) {
    std::string listing;
    for (const std::string& s : seen) listing += " " + s;
    LINATTN_REQUIRE(false, dir, ": no shard of the '", split, "' split (expected e.g. ", split, ".bin; the folder has",
                    listing.empty() ? " no .bin file" : listing, ")",
                    split == "val" ? "; prepare it with --val-glob or --val-fraction to have a validation split" : "");
  }
  std::sort(paths.begin(), paths.end());
  return std::make_shared<const Dataset>(paths);
}

Dataset::Dataset(const std::vector<std::string>& paths) {
  LINATTN_CHECK(!paths.empty(), "a dataset needs at least one shard");
  for (const std::string& p : paths) {
    shards_.emplace_back(p);
    const ShardInfo& info = shards_.back().info();
    const ShardInfo& first = shards_.front().info();
    LINATTN_CHECK(info.tokenizer == first.tokenizer && info.vocab_size == first.vocab_size &&
                      info.tokenizer_sha256 == first.tokenizer_sha256,
                  p, ": tokenizer ", info.tokenizer, info.tokenizer_sha256.empty() ? "" : " sha256 " + info.tokenizer_sha256,
                  " (vocabulary ", info.vocab_size, ") differs from ", first.path, "'s ", first.tokenizer,
                  first.tokenizer_sha256.empty() ? "" : " sha256 " + first.tokenizer_sha256, " (vocabulary ",
                  first.vocab_size, "): a split's shards must come from one tokenizer; prepare the folder again");
    starts_.push_back(num_tokens_);
    num_tokens_ += info.token_count;
    has_text_bytes_ = has_text_bytes_ && info.has_text_bytes;
    text_bytes_ += info.text_bytes;
  }
  if (!has_text_bytes_) text_bytes_ = 0;
}

double Dataset::bytes_per_token() const {
  if (!has_text_bytes_ || num_tokens_ == 0) return std::numeric_limits<double>::quiet_NaN();
  return double(text_bytes_) / double(num_tokens_);
}

void Dataset::read(uint64_t begin, uint64_t count, int32_t* out) const {
  LINATTN_CHECK(begin + count <= num_tokens_, "dataset read of tokens [", begin, ", ", begin + count,
                ") past the end (", num_tokens_, " tokens)");
  size_t s = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (count > 0) {
    const uint64_t local = begin - starts_[s];
    const uint64_t take = std::min(count, shards_[s].size() - local);
    shards_[s].read(local, take, out);
    out += take, begin += take, count -= take;
    ++s;
  }
}

std::string Dataset::describe_tokenizer() const {
  return tokenizer_sha256().empty() ? tokenizer() : "tokenizer.json sha256 " + tokenizer_sha256();
}

std::unique_ptr<Tokenizer> data_tokenizer(const Dataset& data, const std::string& gpt2_dir) {
  if (data.tokenizer() != "hf") return make_tokenizer(data.tokenizer(), gpt2_dir.empty() ? default_gpt2_dir() : gpt2_dir);
  const fs::path dir = fs::path(data.shards().front().info().path).parent_path();
  const std::string file = (dir / data_tokenizer_file).string();
  LINATTN_REQUIRE(fs::exists(file), file, ": missing: the shards of ", dir.string(), " were prepared with a tokenizer.json "
                  "(sha256 ", data.tokenizer_sha256(), ") that linattn-data prepare keeps there; copy that file back, "
                  "or give its path with --tokenizer");
  auto tokenizer = make_tokenizer(file, "");
  check_tokenizer_matches(*tokenizer, file, data, dir.string());
  return tokenizer;
}

void check_tokenizer_matches(const Tokenizer& tokenizer, const std::string& tokenizer_source, const Dataset& data,
                             const std::string& data_source) {
  const std::string made = tokenizer.file_sha256().empty() ? tokenizer.name() : "tokenizer.json sha256 " + tokenizer.file_sha256();
  LINATTN_REQUIRE(tokenizer.name() == data.tokenizer() && tokenizer.file_sha256() == data.tokenizer_sha256() &&
                      tokenizer.vocab_size() == data.vocab_size(),
                  tokenizer_source, " is not the tokenizer that made ", data_source, ": it is ", made, " (vocabulary ",
                  tokenizer.vocab_size(), "), the shards record ", data.describe_tokenizer(), " (vocabulary ",
                  data.vocab_size(), "); give the tokenizer the data was prepared with, or prepare the data again "
                  "with this one");
}

uint64_t count_text_bytes(const Dataset& data, const Tokenizer& tokenizer) {
  LINATTN_CHECK(tokenizer.name() == data.tokenizer() && tokenizer.vocab_size() == data.vocab_size(), "the ",
                tokenizer.name(), " tokenizer (vocabulary ", tokenizer.vocab_size(), ") did not make these shards (",
                data.tokenizer(), ", vocabulary ", data.vocab_size(), ")");
  std::vector<uint64_t> bytes_of(data.vocab_size());
  for (uint32_t id = 0; id < data.vocab_size(); ++id) bytes_of[id] = tokenizer.text_bytes(id);
  uint64_t total = 0;
  for (const TokenShard& shard : data.shards())
    for (uint64_t i = 0; i < shard.size(); ++i) total += bytes_of[shard[i]];
  return total;
}

double bits_per_byte(double loss_nats_per_token, double bytes_per_token) {
  return loss_nats_per_token / std::log(2.0) / bytes_per_token;
}

// ---- TrainLoader ----

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t epoch_key(uint64_t seed, uint64_t epoch) { return mix64(seed ^ mix64(epoch ^ 0x243f6a8885a308d3ULL)); }

// A pseudo-random bijection on [0, n): a 6-round Feistel network on the smallest even number of bits
// that holds n, applied again while the result is >= n (cycle walking stays inside [0, n) and remains a
// bijection; the domain is < 4n, so a few rounds on average).
uint64_t permute(uint64_t x, uint64_t n, uint64_t key) {
  int bits = 2;
  while (bits < 64 && (uint64_t(1) << bits) < n) bits += 2;
  const int half = bits / 2;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 6; ++round) {
      const uint64_t f = mix64(key ^ (round << 56) ^ right) & mask;
      const uint64_t new_right = left ^ f;
      left = right;
      right = new_right;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

TrainLoader::TrainLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& options)
    : data_(std::move(data)), options_(options) {
  LINATTN_CHECK(data_, "TrainLoader needs a dataset");
  LINATTN_CHECK(options_.batch_size >= 1 && options_.seq_len >= 1, "batch_size ", options_.batch_size, " and seq_len ",
                options_.seq_len, " must be >= 1");
  LINATTN_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size, "rank ",
                options_.rank, " is not in [0, world_size ", options_.world_size, ")");
  LINATTN_CHECK(data_->num_tokens() >= uint64_t(options_.seq_len) + 1, "the training split has ", data_->num_tokens(),
                " tokens; seq_len ", options_.seq_len, " needs at least ", options_.seq_len + 1,
                ": give a smaller data.seq_len or more training text");
  state_.seed = options_.seed;
  state_.num_tokens = data_->num_tokens();
  state_.seq_len = uint64_t(options_.seq_len);
}

namespace {

// Shift of the window grid in an epoch, in [0, min(T, N - T)): windows then always fit at least once.
uint64_t epoch_shift(uint64_t seed, uint64_t epoch, uint64_t n_tokens, uint64_t T) {
  return mix64(epoch_key(seed, epoch) ^ 0x5851f42d4c957f2dULL) % std::min(T, n_tokens - T);
}

}  // namespace

uint64_t TrainLoader::windows_in_epoch(uint64_t epoch) const {
  const uint64_t N = data_->num_tokens(), T = uint64_t(options_.seq_len);
  return (N - 1 - epoch_shift(state_.seed, epoch, N, T)) / T;
}

uint64_t TrainLoader::window_start(uint64_t epoch, uint64_t position) const {
  const uint64_t N = data_->num_tokens(), T = uint64_t(options_.seq_len);
  const uint64_t n = windows_in_epoch(epoch);
  LINATTN_CHECK(position < n, "window position ", position, " is past the epoch's ", n, " windows");
  return epoch_shift(state_.seed, epoch, N, T) + permute(position, n, epoch_key(state_.seed, epoch)) * T;
}

void TrainLoader::restore(const SamplerState& state) {
  LINATTN_CHECK(state.num_tokens == data_->num_tokens(), "cannot restore the data position: it was saved on a "
                "training split of ", state.num_tokens, " tokens, this one has ", data_->num_tokens());
  LINATTN_CHECK(state.seq_len == uint64_t(options_.seq_len), "cannot restore the data position: it was saved with "
                "seq_len ", state.seq_len, ", this loader has ", options_.seq_len);
  state_ = state;
}

Batch TrainLoader::next() {
  Batch b;
  b.inputs = Tensor::empty({options_.batch_size, options_.seq_len}, DType::i32);
  b.targets = Tensor::empty({options_.batch_size, options_.seq_len}, DType::i32);
  b.rows = options_.batch_size;
  next(b.inputs, b.targets);
  return b;
}

void TrainLoader::next(const Tensor& inputs, const Tensor& targets) {
  const int64_t B = options_.batch_size, T = options_.seq_len;
  for (const Tensor* t : {&inputs, &targets})
    LINATTN_CHECK(t->dtype() == DType::i32 && t->ndim() == 2 && t->size(0) == B && t->size(1) == T,
                  "TrainLoader::next wants i32[", B, ", ", T, "] inputs and targets, got ", t->str());
  int32_t* in = inputs.data<int32_t>();
  int32_t* tg = targets.data<int32_t>();

  uint64_t epoch = state_.epoch, position = state_.position;
  auto advance = [&](uint64_t steps) {
    position += steps;
    for (uint64_t n; position >= (n = windows_in_epoch(epoch));) position -= n, ++epoch;
  };
  advance(uint64_t(options_.rank) * uint64_t(B));  // skip the rows of the ranks before this one
  std::vector<int32_t> window(size_t(T) + 1);
  for (int64_t row = 0; row < B; ++row) {
    data_->read(window_start(epoch, position), uint64_t(T) + 1, window.data());
    std::copy(window.begin(), window.end() - 1, in + row * T);
    std::copy(window.begin() + 1, window.end(), tg + row * T);
    advance(1);
  }

  // Every rank moves past the whole global batch.
  epoch = state_.epoch, position = state_.position;
  advance(uint64_t(B) * uint64_t(options_.world_size));
  state_.epoch = epoch;
  state_.position = position;
  state_.batches += 1;
}

// ---- ValLoader ----

ValLoader::ValLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& options)
    : data_(std::move(data)), options_(options) {
  LINATTN_CHECK(data_, "ValLoader needs a dataset");
  LINATTN_CHECK(options_.batch_size >= 1 && options_.seq_len >= 1, "batch_size ", options_.batch_size, " and seq_len ",
                options_.seq_len, " must be >= 1");
  LINATTN_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size, "rank ",
                options_.rank, " is not in [0, world_size ", options_.world_size, ")");
  const uint64_t T = uint64_t(options_.seq_len);
  LINATTN_CHECK(data_->num_tokens() >= T + 1, "the validation split has ", data_->num_tokens(), " tokens; seq_len ", T,
                " needs at least ", T + 1, ": give a smaller data.seq_len or more validation text");
  num_windows_ = (data_->num_tokens() - 1) / T;
  if (options_.max_tokens > 0) num_windows_ = std::min(num_windows_, std::max<uint64_t>(1, options_.max_tokens / T));
}

uint64_t ValLoader::num_batches() const {
  const uint64_t global = uint64_t(options_.batch_size) * uint64_t(options_.world_size);
  return (num_windows_ + global - 1) / global;
}

void ValLoader::reset() { batch_ = 0; }

bool ValLoader::next(Batch& out) {
  if (batch_ >= num_batches()) return false;
  const int64_t B = options_.batch_size, T = options_.seq_len;
  const uint64_t first = batch_ * uint64_t(B) * uint64_t(options_.world_size) + uint64_t(options_.rank) * uint64_t(B);
  const uint64_t end = std::min(first + uint64_t(B), num_windows_);
  const int64_t rows = end > first ? int64_t(end - first) : 0;
  Tensor inputs = Tensor::empty({B, T}, DType::i32), targets = Tensor::empty({B, T}, DType::i32);
  int32_t* in = inputs.data<int32_t>();
  int32_t* tg = targets.data<int32_t>();
  for (int64_t row = 0; row < rows; ++row) {
    const uint64_t start = (first + uint64_t(row)) * uint64_t(T);
    data_->read(start, uint64_t(T), in + row * T);
    data_->read(start + 1, uint64_t(T), tg + row * T);
  }
  out.inputs = inputs.narrow(0, rows);
  out.targets = targets.narrow(0, rows);
  out.rows = rows;
  ++batch_;
  return true;
}

}  // namespace linattn::data
