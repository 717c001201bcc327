// linattn-train's command line: options without their value and --resume targets that are not there
// are errors that say what to give, not "unexpected argument".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

// Runs linattn-train with `args`; returns its exit code and fills `out` with what it printed.
int train(const std::string& args, std::string& out) {
  testing::CommandResult r = testing::run_command(testing::built_binary("linattn-train") + " " + args);
  out = r.output;
  return r.status;
}

TEST(TrainCommandLine, OptionsWithoutTheirValueSayWhatToGive) {
  std::string out;
  EXPECT_EQ(train("configs/default.yaml --set", out), 2);
  EXPECT_NE(out.find("--set needs a value: --set section.key=value"), std::string::npos) << out;
  EXPECT_EQ(train("configs/default.yaml --set --dry-run", out), 2);
  EXPECT_NE(out.find("--set needs a value"), std::string::npos) << out;
  EXPECT_EQ(train("configs/default.yaml --out", out), 2);
  EXPECT_NE(out.find("--out needs a value"), std::string::npos) << out;
}

TEST(TrainCommandLine, ResumeTargetsThatAreNotThereOrNotARunAreClearErrors) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-cli-dir-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  std::string out;
  EXPECT_EQ(train("--resume " + dir + "/absent", out), 2);
  EXPECT_NE(out.find("--resume " + dir + "/absent: no such run folder or checkpoint"), std::string::npos) << out;
  // A folder, but not a run folder, and no config given.
  EXPECT_EQ(train("--resume " + dir, out), 2);
  EXPECT_NE(out.find("has no config.yaml: give the config"), std::string::npos) << out;
  // A run folder with --out naming another one.
  EXPECT_EQ(train("configs/default.yaml --resume " + dir + " --out " + dir + "-other", out), 2);
  EXPECT_NE(out.find("drop --out"), std::string::npos) << out;
  fs::remove_all(dir);
}

TEST(TrainCommandLine, AnOutThatIsAFileIsNamed) {
  const std::string file = (fs::temp_directory_path() / ("linattn-cli-file-" + std::to_string(getpid()))).string();
  std::ofstream(file) << "a file";
  std::string out;
  EXPECT_EQ(train("configs/default.yaml --out " + file + " --dry-run", out), 1);
  EXPECT_NE(out.find("the run folder '" + file + "' is a file"), std::string::npos) << out;
  fs::remove(file);
}

}  // namespace
}  // namespace linattn
