// What a run folder holds, read back for tables and plots: its config and the evaluation records
// of its metrics.jsonl; and the sweep's results table, one row per run.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace linattn {

struct EvalPoint {
  int64_t step = 0;
  double tokens = 0;  // training tokens seen: step x batch_size x seq_len
  double val_loss = 0, val_ppl = 0, val_bpb = 0;
  double recall_accuracy = 0;  // NaN when the run is not on MQAR
  // Read the whole validation split: the final evaluation of a finished run, or every evaluation
  // when data.val_tokens is 0. The others read the split's first data.val_tokens tokens, which is
  // easier or harder than the whole: only evaluations of one kind compare with each other.
  bool whole_split = false;
};

struct RunRecord {
  std::string dir;
  Config config;                // RUN_DIR/config.yaml
  std::vector<EvalPoint> evals;  // by step; of a step evaluated twice (a resumed run), the later
  bool done = false;            // the trainer's last record ({"done": 1, ...}) is there
  double tokens = 0;            // trained: from the last record, else the last step logged
  double tokens_per_s = 0;      // tokens over training seconds (NaN when not done)
  // "RUN_DIR/metrics.jsonl:LINE: what is wrong" for each damaged line, which is left out (a
  // half-written last line, of a run still writing or killed, is left out without a word).
  std::vector<std::string> damaged;
};

// Reads RUN_DIR/config.yaml and RUN_DIR/metrics.jsonl; throws linattn::Error naming the file when
// one is missing or unreadable. Damaged lines of the metrics are left out and listed in `damaged`.
RunRecord read_run(const std::string& dir);

// The value of `metric` ("val_loss", "bpb" or "recall_accuracy") in an evaluation.
double metric_value(const EvalPoint& e, const std::string& metric);

struct ResultRow {
  std::string name;
  std::string config;               // its configuration (SweepRun::config)
  std::string tuned;                // its tuned values (SweepRun::tuned; "" without tune)
  std::vector<std::string> values;  // the overrides, one per key of the table ("" = the base's)
  std::string group;                // rows with equal groups are compared
  int64_t params = 0, state = 0;    // parameter count; state_size(model, data.seq_len)
  double tokens = NAN, tokens_per_s = NAN, val_loss = NAN, val_ppl = NAN, val_bpb = NAN, recall = NAN;
  std::string status;  // done | diverged | failed | interrupted | pending
  std::string error;   // the failure's (or divergence's) last stderr lines
  bool best = false;  // mark_best, or mark_best_configs (sweep/summary.h) in a search
};

// The row's parameter count and state size, from the run's config.
void fill_sizes(ResultRow& row, const Config& config);
// A row filled from a run folder (status and error stay the caller's).
void fill_row(ResultRow& row, const RunRecord& run);
// Marks the best finished row of every group: highest recall accuracy when the group's rows have
// one (MQAR), else lowest final validation loss.
void mark_best(std::vector<ResultRow>& rows);
std::string results_csv(const std::vector<std::string>& keys, const std::vector<ResultRow>& rows);
// `searched`: the rows are runs of a search (tune or seeds), and (best) marks the runs of each
// group's best configuration at its chosen value (mark_best_configs) rather than mark_best's.
std::string results_markdown(const std::vector<std::string>& keys, const std::vector<ResultRow>& rows,
                             bool searched = false);

}  // namespace linattn
