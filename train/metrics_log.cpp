#include "train/metrics_log.h"

#include <cmath>
#include <cstdio>
#include <fstream>

namespace linattn {

std::string metrics_json_line(int64_t step, const MetricFields& fields) {
  std::string line = "{\"step\": " + std::to_string(step);
  for (const auto& [name, value] : fields) {
    char number[32] = "null";
    if (std::isfinite(value)) std::snprintf(number, sizeof number, "%.9g", value);
    line += std::string(", \"") + name + "\": " + number;
  }
  return line + "}";
}

MetricsLog::MetricsLog(std::string path, bool fresh) : path_(std::move(path)) {
  if (fresh) std::ofstream(path_, std::ios::trunc);
}

void MetricsLog::write(int64_t step, const MetricFields& fields) const {
  std::ofstream(path_, std::ios::app) << metrics_json_line(step, fields) << "\n";
}

}  // namespace linattn
