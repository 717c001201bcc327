// RUN_DIR/metrics.jsonl: one JSON object per line, {"step": 10, "loss": 2.5, ...}, for plotting.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/json.h"

namespace linattn {

using MetricFields = std::vector<std::pair<const char*, double>>;

// {"step": STEP, "name": value, ...}: numbers with 9 significant digits, non-finite ones as null
// (JSON has no NaN or infinity).
std::string metrics_json_line(int64_t step, const MetricFields& fields);

// Line `line_number` (from 1) of the JSON-lines file `path`, parsed; an error names the file's line
// and the column in it, "metrics.jsonl:11:41 (byte 40): ...".
data::Json parse_json_line(const std::string& line, const std::string& path, size_t line_number);

// A record that could not be written (a full disk): the run must stop, since its log would have a gap.
class MetricsWriteError : public Error {
 public:
  using Error::Error;
};

// What a resume cut from the log: the records after its checkpoint, a finished run's ending, and
// damaged lines (a partial last line of a killed run or a full disk, a cut record mid-file).
struct MetricsCut {
  int64_t records_dropped = 0;      // whole records past the checkpoint, or ending the run
  std::vector<std::string> damaged;  // "metrics.jsonl:LINE: what is wrong", one per line dropped
};

class MetricsLog {
 public:
  // A fresh run's log: `path` emptied.
  static MetricsLog start(const std::string& path);
  // The log of a run resumed from the checkpoint of `step`: `path` cut back (through a temporary
  // file and a rename) to the records of the steps up to `step`, less the "done" record and the
  // final evaluation of a run that ended there, and less every line that is not a whole record.
  static MetricsLog resume(const std::string& path, int64_t step, MetricsCut* cut = nullptr);

  // Appends one record, a whole line. Throws MetricsWriteError when it cannot (the file is then cut
  // back to the records before it, so no partial line stays).
  void write(int64_t step, const MetricFields& fields) const;
  const std::string& path() const { return path_; }

 private:
  explicit MetricsLog(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace linattn
