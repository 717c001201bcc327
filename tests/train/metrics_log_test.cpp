// metrics.jsonl lines: valid JSON for any number (JSON has no NaN or infinity); a record that cannot
// be written is an error and leaves no partial line; a resume cuts the log back to its checkpoint.
#include "train/metrics_log.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MetricsLog, LinesAreJsonWithNullForNonFiniteNumbers) {
  EXPECT_EQ(metrics_json_line(10, {{"loss", 2.5}, {"lr", 3e-4}, {"val_bpb", NAN}, {"mfu", INFINITY}}),
            "{\"step\": 10, \"loss\": 2.5, \"lr\": 0.0003, \"val_bpb\": null, \"mfu\": null}");
  EXPECT_EQ(metrics_json_line(1, {{"loss", 1.0 / 3.0}}), "{\"step\": 1, \"loss\": 0.333333333}");
}

class MetricsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("linattn-metrics-" + std::to_string(getpid()) + ".jsonl")).string();
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST_F(MetricsFile, AWriteBeyondTheFileSizeLimitThrowsAndLeavesOnlyWholeLines) {
  // A full disk, without root: the file size limit (RLIMIT_FSIZE) in a child process, where a write
  // that crosses it is cut short at the limit, as on a full disk, and the next one fails. The limit
  // falls mid-record. Exit codes: 0 the error came with the step and the file; 1 no error; 2 another.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1000, RLIM_INFINITY};
    setrlimit(RLIMIT_FSIZE, &limit);
    MetricsLog log = MetricsLog::start(path_);
    for (int64_t step = 1; step <= 100; ++step) {
      try {
        log.write(step, {{"loss", 2.0 + 1.0 / double(step)}, {"lr", 1e-3}});
      } catch (const MetricsWriteError& e) {
        const std::string m = e.what();
        _exit(m.find("cannot add the record of step " + std::to_string(step) + " to '" + path_ + "': ") == 0 &&
                      m.find("free some space there") != std::string::npos
                  ? 0
                  : 2);
      }
    }
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no write failed; 2: the error does not name the step and the file";
  const std::string text = read(path_);
  ASSERT_FALSE(text.empty());
  EXPECT_LT(text.size(), 1000u);
  EXPECT_EQ(text.back(), '\n') << "a partial record was left:\n" << text;
  // Every record before the failed one is there, whole.
  std::istringstream lines(text);
  int64_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    EXPECT_EQ(line, metrics_json_line(n, {{"loss", 2.0 + 1.0 / double(n)}, {"lr", 1e-3}}));
  }
  EXPECT_GT(n, 5);
}

TEST_F(MetricsFile, AResumeCutsTheLogBackToItsCheckpointDroppingDamagedLines) {
  // Steps 1..6 logged with evaluations at 2 and 4; a line cut mid-record by a full disk before 3; the
  // run then finished at 6 and a half line of a later resume stayed at the end.
  std::ofstream(path_) << "{\"step\": 1, \"loss\": 5}\n"
                          "{\"step\": 2, \"loss\": 4.5}\n"
                          "{\"step\": 2, \"val_loss\": 4.6}\n"
                          "{\"step\": 3, \"loss\": 4.4{\"step\": 3, \"loss\": 4.3}\n"
                          "{\"step\": 4, \"loss\": 4.2}\n"
                          "{\"step\": 4, \"val_loss\": 4.1}\n"
                          "{\"step\": 6, \"loss\": 4}\n"
                          "{\"step\": 6, \"val_loss\": 3.9}\n"
                          "{\"step\": 6, \"done\": 1, \"tokens\": 96, \"seconds\": 1}\n"
                          "{\"step\": 7, \"lo";
  MetricsCut cut;
  MetricsLog log = MetricsLog::resume(path_, 4, &cut);
  EXPECT_EQ(read(path_), "{\"step\": 1, \"loss\": 5}\n"
                         "{\"step\": 2, \"loss\": 4.5}\n"
                         "{\"step\": 2, \"val_loss\": 4.6}\n"
                         "{\"step\": 4, \"loss\": 4.2}\n"
                         "{\"step\": 4, \"val_loss\": 4.1}\n");
  EXPECT_EQ(cut.records_dropped, 3);
  ASSERT_EQ(cut.damaged.size(), 2u);
  // FILE:LINE:COLUMN of the file, as compilers say it (not the column's line within the one line).
  EXPECT_TRUE(std::regex_search(cut.damaged[0], std::regex("^" + path_ + ":4:[0-9]+ \\(byte [0-9]+\\): ")))
      << cut.damaged[0];
  EXPECT_EQ(cut.damaged[1].rfind(path_ + ":10: a partial record", 0), 0u) << cut.damaged[1];
  log.write(5, {{"loss", 4.1}});
  EXPECT_EQ(read(path_).substr(read(path_).rfind("{")), "{\"step\": 5, \"loss\": 4.1}\n");
}

TEST_F(MetricsFile, AResumeFromTheFinalCheckpointDropsTheEndingItContinues) {
  // A finished run continued with a higher bound: its "done" record and the final evaluation before
  // it are no longer its end; the evaluation during training at that step stays.
  const std::string kept = "{\"step\": 4, \"loss\": 4.2}\n{\"step\": 4, \"val_loss\": 4.3}\n";
  std::ofstream(path_) << kept << "{\"step\": 4, \"val_loss\": 4.1}\n{\"step\": 4, \"done\": 1, \"tokens\": 64, \"seconds\": 1}\n";
  MetricsCut cut;
  MetricsLog::resume(path_, 4, &cut);
  EXPECT_EQ(read(path_), kept);
  EXPECT_EQ(cut.records_dropped, 2);
  EXPECT_TRUE(cut.damaged.empty());
  // A log with nothing to cut is left as it is.
  const auto before = fs::last_write_time(path_);
  MetricsLog::resume(path_, 4, &cut);
  EXPECT_EQ(read(path_), kept);
  EXPECT_EQ(fs::last_write_time(path_), before);
}

}  // namespace
}  // namespace linattn
