// linattn-train's command line: options without their value and --resume targets that are not there
// are errors that say what to give, not "unexpected argument".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/mount.h>
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
  // A folder inside the file cannot be created: the dry run says so, and a run says so before it
  // loads the data and builds the model (the default config's data need not be here).
  for (const char* dry_run : {" --dry-run", ""}) {
    EXPECT_EQ(train("configs/default.yaml --out " + file + "/sub" + dry_run, out), 1) << dry_run;
    EXPECT_EQ(out, "linattn-train: error: the run folder '" + file + "/sub' cannot be written: '" + file +
                       "' is a file, not a folder; give another folder with --out DIR (or train.out_dir)\n")
        << dry_run;
  }
  fs::remove(file);
}

// A folder this process cannot write in: a read-only tmpfs where mounting is allowed (root, for whom
// permissions are no bar), else a folder without write permission.
class ReadOnlyFolder {
 public:
  explicit ReadOnlyFolder(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir_);
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_RDONLY, "size=64k") == 0;
    if (!mounted_) fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  }
  ~ReadOnlyFolder() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    fs::permissions(dir_, fs::perms::owner_all);
    fs::remove_all(dir_);
  }
  bool writable() const { return ::access(dir_.c_str(), W_OK) == 0; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(TrainCommandLine, ARunFolderThatCannotBeWrittenIsRefusedBeforeTheData) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-cli-ro-" + std::to_string(getpid()))).string();
  const ReadOnlyFolder ro(dir);
  if (ro.writable()) GTEST_SKIP() << dir << " stays writable here (root without mount)";
  std::string out;
  for (const std::string& run : {dir, dir + "/new/run"}) {
    EXPECT_EQ(train("configs/default.yaml --out " + run + " --dry-run", out), 1) << run;
    EXPECT_NE(out.find("linattn-train: error: the run folder '" + run + "' cannot be written: '" + dir +
                       "' is not writable ("),
              std::string::npos)
        << out;
  }
}

}  // namespace
}  // namespace linattn
