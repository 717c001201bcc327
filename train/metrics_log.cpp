#include "train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/hdf5.h"
#include "data/json.h"

namespace linattn {

data::Json parse_json_line(const std::string& line, const std::string& path, size_t line_number) {
  try {
    return data::parse_json(line, path);
  } catch (const Error& e) {
    // parse_json counts the lines of the text it was given, here one: "PATH:1:COLUMN ...".
    const std::string message = e.what(), first = path + ":1:";
    if (message.rfind(first, 0) != 0) throw;
    throw Error(path + ":" + std::to_string(line_number) + ":" + message.substr(first.size()));
  }
}

std::string metrics_json_line(int64_t step, const MetricFields& fields) {
  std::string line = "{\"step\": " + std::to_string(step);
  for (const auto& [name, value] : fields) {
    char number[32] = "null";
    if (std::isfinite(value)) std::snprintf(number, sizeof number, "%.9g", value);
    line += std::string(", \"") + name + "\": " + number;
  }
  return line + "}";
}

MetricsLog MetricsLog::start(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  LINATTN_REQUIRE(out, "cannot create '", path, "': ", std::strerror(errno));
  return MetricsLog(path);
}

namespace {

struct Record {
  std::string line;  // without its newline
  int64_t step = 0;
  bool done = false, eval = false;
};

}  // namespace

MetricsLog MetricsLog::resume(const std::string& path, int64_t step, MetricsCut* cut) {
  MetricsCut local;
  MetricsCut& c = cut ? *cut : local;
  c = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) return start(path);  // a run resumed from a checkpoint copied elsewhere starts its log
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  std::vector<Record> kept;
  size_t line_number = 0;
  for (size_t from = 0; from < text.size();) {
    const size_t end = text.find('\n', from);
    const std::string line = text.substr(from, end == std::string::npos ? std::string::npos : end - from);
    from = end == std::string::npos ? text.size() : end + 1;
    const std::string where = path + ":" + std::to_string(++line_number);
    if (line.empty()) continue;
    if (end == std::string::npos) {
      c.damaged.push_back(where + ": a partial record with no end (the writer stopped mid-line)");
      break;
    }
    data::Json r;
    try {
      r = parse_json_line(line, path, line_number);
    } catch (const Error& e) {
      c.damaged.push_back(e.what());
      continue;
    }
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number()) {
      c.damaged.push_back(where + ": not a record (no \"step\" number)");
      continue;
    }
    const int64_t record_step = r["step"].get<int64_t>();
    if (record_step > step) {
      ++c.records_dropped;
      continue;
    }
    kept.push_back({line, record_step, r.contains("done"), r.contains("val_loss")});
  }
  // The run goes on from `step`: an ending there is no longer its end.
  if (!kept.empty() && kept.back().done && kept.back().step == step) {
    kept.pop_back();
    ++c.records_dropped;
    if (!kept.empty() && kept.back().eval && kept.back().step == step) {
      kept.pop_back();
      ++c.records_dropped;
    }
  }
  if (c.records_dropped > 0 || !c.damaged.empty()) {
    std::string out;
    for (const Record& r : kept) out += r.line + "\n";
    write_text_atomically(path, out);
  }
  return MetricsLog(path);
}

void MetricsLog::write(int64_t step, const MetricFields& fields) const {
  const std::string line = metrics_json_line(step, fields) + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    throw MetricsWriteError("cannot open '" + path_ + "' to add the record of step " + std::to_string(step) + ": " +
                            std::strerror(errno));
  struct stat st {};
  const off_t before = ::fstat(fd, &st) == 0 ? st.st_size : -1;
  size_t done = 0;
  errno = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += size_t(n);
  }
  const int err = done < line.size() ? (errno ? errno : ENOSPC) : 0;
  if (err && before >= 0) {
    const int ignored = ::ftruncate(fd, before);  // no partial line: the records before stay whole
    (void)ignored;
  }
  const bool closed = ::close(fd) == 0;
  if (!err && closed) return;
  const int why = err ? err : errno;
  throw MetricsWriteError("cannot add the record of step " + std::to_string(step) + " to '" + path_ + "': " +
                          std::strerror(why) +
                          (why == ENOSPC || why == EFBIG || why == EDQUOT
                               ? " (the disk is full, or the file reached its size limit): free some space there"
                               : ""));
}

}  // namespace linattn
