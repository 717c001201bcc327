// MQAR, multi-query associative recall (the synthetic task of the Zoology paper), generated in memory.
//
// An example of seq_len tokens starts with num_kv_pairs key-value pairs; later, each key appears once
// more as a query, and the target at the query is its value; every other target is kIgnoreTarget.
// Example i of a split is a function of (seed, split, i) alone, so any number of data-parallel ranks
// reading any examples see the same ones as one process. docs/mqar.md gives the exact definition.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace linattn::data {

struct MqarTask {
  int64_t vocab_size = 8192;   // keys [1, V/2), values [V/2, V), filler anywhere but the example's keys
  int64_t num_kv_pairs = 8;
  double power_a = 0.01;       // query slot g in [0, S) is drawn with weight (g + 1)^(power_a - 1)
  uint64_t num_train_examples = 100000;
  uint64_t num_val_examples = 3000;
  uint64_t seed = 0;

  bool operator==(const MqarTask&) const = default;
};

enum class MqarSplit { train, val };

// The query slots of an example: S = (seq_len - 2 num_kv_pairs) / 2; the task needs S >= num_kv_pairs.
int64_t mqar_query_slots(const MqarTask& task, int64_t seq_len);

// What makes the task impossible, and the setting to change: `key` is a field of MqarTask or
// "seq_len", and empty when the task is fine.
struct MqarProblem {
  std::string key;
  std::string message;
};
MqarProblem mqar_problem(const MqarTask& task, int64_t seq_len);

// Example `index` of `split` of a task that has no problem. inputs, targets: [seq_len].
void mqar_example(int32_t* inputs, int32_t* targets, const MqarTask& task, int64_t seq_len, MqarSplit split,
                  uint64_t index);

// Training examples: each epoch visits the num_train_examples examples once, in a seeded order
// (permute with epoch_key(options.seed, epoch)); global batch b takes the next batch_size *
// world_size of them and rank r reads rows [r * batch_size, (r + 1) * batch_size), as TrainLoader.
class MqarTrainLoader : public TrainBatches {
 public:
  MqarTrainLoader(const MqarTask& task, const LoaderOptions& options);

  Batch next() override;
  SamplerState state() const override { return state_; }
  void restore(const SamplerState& state) override;
  // Which training example the sampler draws at (epoch, position): for tests.
  uint64_t example_at(uint64_t epoch, uint64_t position) const;

 private:
  MqarTask task_;
  LoaderOptions options_;
  SamplerState state_;
};

// The first min(num_val_examples, max(1, max_tokens / seq_len)) validation examples (all of them when
// max_tokens is 0) in order, split between ranks as ValLoader splits its windows.
class MqarValLoader : public ValBatches {
 public:
  MqarValLoader(const MqarTask& task, const LoaderOptions& options);

  void reset() override { batch_ = 0; }
  bool next(Batch& out) override;
  double bytes_per_token() const override;  // NaN: the tokens are no text
  bool scores_recall() const override { return true; }
  uint64_t num_examples() const { return num_examples_; }

 private:
  MqarTask task_;
  LoaderOptions options_;
  uint64_t num_examples_ = 0;
  uint64_t batch_ = 0;
};

}  // namespace linattn::data
