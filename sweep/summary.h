// The configurations of a sweep with `tune` or `seeds`: each at the tuned value with the best mean
// over its seeds, the spread of its seeds, and which differences between configurations exceed
// that spread (docs/ablations.md, "How a sweep decides").
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sweep/results.h"

namespace linattn {

// Finished runs' values of one metric.
struct Spread {
  int n = 0;
  double mean = NAN;
  double sd = NAN;  // the sample standard deviation (divided by n - 1); NaN for fewer than 2
  double min = NAN, max = NAN;
};
Spread spread_of(const std::vector<double>& values);

// The sweep's metric: "recall_accuracy" when a row has one (MQAR), else "val_loss".
std::string sweep_metric(const std::vector<ResultRow>& rows);
bool higher_is_better(const std::string& metric);
// The row's final value of "val_loss", "bpb" or "recall_accuracy" (NaN when not finished).
double row_metric(const ResultRow& row, const std::string& metric);

// Is `a` better than `b` beyond the spread of their seeds: both have two finished seeds or more,
// and a's range [min, max] lies wholly on the better side of b's (ranges that touch overlap).
bool better_beyond_spread(const Spread& a, const Spread& b, const std::string& metric);

// One configuration at one tuned value, over its seeds.
struct TunedPoint {
  std::string tuned;  // "train.lr=1.0e-3" ("" without tune)
  int runs = 0;       // its runs (one per seed), finished or not
  Spread metric;      // of the finished ones
  int diverged = 0;   // its runs that diverged (status "diverged")
};

struct ConfigSummary {
  std::string config, group;
  std::vector<std::string> values;  // its first row's values (ResultRow::values)
  int64_t params = 0, state = 0;
  std::vector<TunedPoint> points;   // in the order of their first rows
  // The point with the best mean, among those where no seed diverged when there are some; -1 while
  // none has a finished run.
  int chosen = -1;
  double tokens_per_s = NAN;        // the mean of the chosen point's finished runs
  Spread bpb;                       // their final bits per byte (language models; n = 0 on MQAR)
  // Against the best mean of its group (by better_beyond_spread):
  //   "best"          the best mean, and every other configuration is behind it beyond the spread;
  //   "tied for best" the best mean or one whose spread overlaps it;
  //   "behind"        worse beyond the spread;
  //   "not judged"    it or the best has fewer than 2 finished seeds (no spread to judge by);
  //   ""              no finished run.
  std::string verdict;
  bool best_mean = false;  // the best mean of its group
  const Spread& result() const { return points.at(size_t(chosen)).metric; }
};

// The rows by configuration (in the order of their first rows), each configuration's points by
// tuned value, the chosen point and the verdicts. Rows whose status is not "done" count as runs
// without a value.
std::vector<ConfigSummary> summarize(const std::vector<ResultRow>& rows, const std::string& metric);

// Marks the rows of each group's best-mean configuration at its chosen point (ResultRow::best).
void mark_best_configs(std::vector<ResultRow>& rows, const std::vector<ConfigSummary>& configs);

// results.md's sections for the search: the configurations at their chosen points with the spread
// and verdicts (and, ranked by validation loss, their bits per byte), the verdicts of each group in words, and the whole search as a table of means.
// `keys` are the table's keys; those in `searched` (the tuned keys and train.seed) are left out.
std::string summary_markdown(const std::vector<std::string>& keys, const std::vector<std::string>& searched,
                             const std::vector<ConfigSummary>& configs, const std::string& metric, size_t seeds);

}  // namespace linattn
