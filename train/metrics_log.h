// RUN_DIR/metrics.jsonl: one JSON object per line, {"step": 10, "loss": 2.5, ...}, for plotting.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace linattn {

using MetricFields = std::vector<std::pair<const char*, double>>;

// {"step": STEP, "name": value, ...}: numbers with 9 significant digits, non-finite ones as null
// (JSON has no NaN or infinity).
std::string metrics_json_line(int64_t step, const MetricFields& fields);

class MetricsLog {
 public:
  // Appends to `path`; with `fresh`, empties it first.
  MetricsLog(std::string path, bool fresh);
  void write(int64_t step, const MetricFields& fields) const;

 private:
  std::string path_;
};

}  // namespace linattn
