#include "data/mqar.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace linattn::data {

int64_t mqar_query_slots(const MqarTask& task, int64_t seq_len) { return (seq_len - 2 * task.num_kv_pairs) / 2; }

MqarProblem mqar_problem(const MqarTask& task, int64_t seq_len) {
  const int64_t K = task.num_kv_pairs, V = task.vocab_size;
  if (K < 1) return {"num_kv_pairs", "'num_kv_pairs' must be at least 1"};
  if (V < 2 * K + 2 || V > (int64_t(1) << 24))
    return {"vocab_size", "'vocab_size' " + std::to_string(V) + " must be in [2 num_kv_pairs + 2, 2^24] = [" +
                              std::to_string(2 * K + 2) + ", 16777216]: keys come from [1, vocab_size / 2), and " +
                              std::to_string(K) + " distinct keys are needed per example"};
  if (seq_len < 4 * K)
    return {"seq_len", "seq_len " + std::to_string(seq_len) + " is too short for " + std::to_string(K) +
                           " key-value pairs and their queries: MQAR needs seq_len >= 4 num_kv_pairs = " +
                           std::to_string(4 * K) + "; raise data.seq_len or lower data.mqar.num_kv_pairs"};
  if (!(task.power_a > 0)) return {"power_a", "'power_a' must be positive (0.01 is the Zoology paper's)"};
  if (task.num_train_examples < 1) return {"num_train_examples", "'num_train_examples' must be at least 1"};
  if (task.num_val_examples < 1) return {"num_val_examples", "'num_val_examples' must be at least 1"};
  return {};
}

namespace {

// count distinct values of [lo, lo + n) in random order (Floyd's sampling, then a shuffle).
void draw_distinct(int32_t* out, int64_t count, int64_t lo, int64_t n, Rng& rng) {
  for (int64_t j = n - count, c = 0; j < n; ++j, ++c) {
    const int32_t t = int32_t(lo + int64_t(rng.below(uint64_t(j) + 1)));
    out[c] = std::find(out, out + c, t) != out + c ? int32_t(lo + j) : t;
  }
  for (int64_t c = count - 1; c > 0; --c) std::swap(out[c], out[rng.below(uint64_t(c) + 1)]);
}

}  // namespace

void mqar_example(int32_t* inputs, int32_t* targets, const MqarTask& task, int64_t seq_len, MqarSplit split,
                  uint64_t index) {
  const int64_t K = task.num_kv_pairs, V = task.vocab_size, half = V / 2, S = mqar_query_slots(task, seq_len);
  const uint64_t split_salt = split == MqarSplit::train ? 0x6d7172745f747261ULL : 0x6d7172745f76616cULL;
  Rng rng(mix64(mix64(task.seed ^ split_salt) ^ index));

  std::vector<int32_t> keys(size_t(K), 0), values(size_t(K), 0);
  draw_distinct(keys.data(), K, 1, half - 1, rng);
  draw_distinct(values.data(), K, half, V - half, rng);
  std::fill(targets, targets + seq_len, kIgnoreTarget);
  std::fill(inputs, inputs + seq_len, -1);  // -1: filler, drawn last
  for (int64_t j = 0; j < K; ++j) inputs[2 * j] = keys[size_t(j)], inputs[2 * j + 1] = values[size_t(j)];

  // Query slots: K distinct of [0, S), slot g drawn with weight (g + 1)^(power_a - 1) among those left.
  std::vector<double> weight(static_cast<size_t>(S));
  double total = 0;
  for (int64_t g = 0; g < S; ++g) total += weight[size_t(g)] = std::pow(double(g + 1), task.power_a - 1);
  for (int64_t j = 0; j < K; ++j) {
    double u = rng.uniform() * total;
    int64_t slot = -1;
    for (int64_t g = 0; g < S; ++g) {
      if (weight[size_t(g)] == 0) continue;
      slot = g;  // the last slot left when rounding leaves u above the sum
      if ((u -= weight[size_t(g)]) < 0) break;
    }
    total -= weight[size_t(slot)];
    weight[size_t(slot)] = 0;
    const int64_t p = 2 * K + 2 * slot;
    inputs[p] = keys[size_t(j)];
    targets[p] = values[size_t(j)];
  }

  // Filler: uniform over the vocabulary without this example's keys, so that each key appears twice.
  for (int64_t t = 2 * K; t < seq_len; ++t) {
    if (inputs[t] >= 0) continue;
    int32_t token;
    do token = int32_t(rng.below(uint64_t(V)));
    while (std::find(keys.begin(), keys.end(), token) != keys.end());
    inputs[t] = token;
  }
}

namespace {

void check_loader_options(const LoaderOptions& o, const MqarTask& task) {
  LINATTN_CHECK(o.batch_size >= 1 && o.seq_len >= 1, "batch_size ", o.batch_size, " and seq_len ", o.seq_len,
                " must be >= 1");
  LINATTN_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, "rank ", o.rank,
                " is not in [0, world_size ", o.world_size, ")");
  const MqarProblem p = mqar_problem(task, o.seq_len);
  LINATTN_CHECK(p.key.empty(), "MQAR: ", p.message);
}

}  // namespace

// ---- MqarTrainLoader ----

MqarTrainLoader::MqarTrainLoader(const MqarTask& task, const LoaderOptions& options) : task_(task), options_(options) {
  check_loader_options(options_, task_);
  state_.seed = options_.seed;
  state_.num_tokens = task_.num_train_examples * uint64_t(options_.seq_len);
  state_.seq_len = uint64_t(options_.seq_len);
}

uint64_t MqarTrainLoader::example_at(uint64_t epoch, uint64_t position) const {
  return permute(position, task_.num_train_examples, epoch_key(state_.seed, epoch));
}

void MqarTrainLoader::restore(const SamplerState& state) {
  LINATTN_CHECK(state.seq_len == state_.seq_len, "cannot restore the data position: it was saved with seq_len ",
                state.seq_len, ", this loader has ", options_.seq_len);
  LINATTN_CHECK(state.num_tokens == state_.num_tokens, "cannot restore the data position: it was saved on ",
                state.num_tokens / state.seq_len, " MQAR training examples, this task has ",
                task_.num_train_examples);
  state_ = state;
}

Batch MqarTrainLoader::next() {
  const int64_t B = options_.batch_size, T = options_.seq_len;
  const uint64_t N = task_.num_train_examples;
  Batch b;
  b.inputs = Tensor::empty({B, T}, DType::i32);
  b.targets = Tensor::empty({B, T}, DType::i32);
  b.rows = B;
  const uint64_t first = state_.position + uint64_t(options_.rank) * uint64_t(B);  // this rank's first row
  for (int64_t row = 0; row < B; ++row) {
    const uint64_t k = first + uint64_t(row);
    mqar_example(b.inputs.data<int32_t>() + row * T, b.targets.data<int32_t>() + row * T, task_, T, MqarSplit::train,
                 example_at(state_.epoch + k / N, k % N));
  }
  // Every rank moves past the whole global batch.
  const uint64_t end = state_.position + uint64_t(B) * uint64_t(options_.world_size);
  state_.epoch += end / N;
  state_.position = end % N;
  state_.batches += 1;
  return b;
}

// ---- MqarValLoader ----

MqarValLoader::MqarValLoader(const MqarTask& task, const LoaderOptions& options) : task_(task), options_(options) {
  check_loader_options(options_, task_);
  num_examples_ = task_.num_val_examples;
  if (options_.max_tokens > 0)
    num_examples_ = std::min(num_examples_, std::max<uint64_t>(1, options_.max_tokens / uint64_t(options_.seq_len)));
}

double MqarValLoader::bytes_per_token() const { return std::numeric_limits<double>::quiet_NaN(); }

bool MqarValLoader::next(Batch& out) {
  const int64_t B = options_.batch_size, T = options_.seq_len;
  const uint64_t global = uint64_t(B) * uint64_t(options_.world_size);
  if (batch_ >= (num_examples_ + global - 1) / global) return false;
  const uint64_t first = batch_ * global + uint64_t(options_.rank) * uint64_t(B);
  const uint64_t end = std::min(first + uint64_t(B), num_examples_);
  const int64_t rows = end > first ? int64_t(end - first) : 0;
  Tensor inputs = Tensor::empty({B, T}, DType::i32), targets = Tensor::empty({B, T}, DType::i32);
  for (int64_t row = 0; row < rows; ++row)
    mqar_example(inputs.data<int32_t>() + row * T, targets.data<int32_t>() + row * T, task_, T, MqarSplit::val,
                 first + uint64_t(row));
  out.inputs = inputs.narrow(0, rows);
  out.targets = targets.narrow(0, rows);
  out.rows = rows;
  ++batch_;
  return true;
}

}  // namespace linattn::data
