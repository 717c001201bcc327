// The lock of a run or sweep folder between real processes: a second holder is refused with the
// first one's PID and command, and the lock dies with its process (a SIGKILL leaves none behind).
#include "train/folder_lock.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class FolderLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-folder-lock-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A child process that takes the lock of `dir_`, says so through a pipe and then sleeps until killed.
  pid_t holder() {
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      try {
        FolderLock lock(dir_, "the run folder");
        const ssize_t ignored = write(ready[1], "y", 1);
        (void)ignored;
        for (;;) pause();
      } catch (...) {
        _exit(3);
      }
    }
    close(ready[1]);
    char c = 0;
    EXPECT_EQ(read(ready[0], &c, 1), 1) << "the child did not take the lock";
    close(ready[0]);
    return pid;
  }
  std::string dir_;
};

TEST_F(FolderLockTest, ASecondProcessIsRefusedWithTheHoldersPidAndCommand) {
  const pid_t pid = holder();
  const std::string message = testing::error_of([&] { FolderLock second(dir_, "the run folder"); });
  EXPECT_NE(message.find("the run folder '" + dir_ + "' is in use by another process (pid " + std::to_string(pid) +
                         ", command: "),
            std::string::npos)
      << message;
  // The command is the test binary's own (the holder is a fork of it).
  std::ifstream cmdline("/proc/self/cmdline");
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  EXPECT_NE(message.find(argv0), std::string::npos) << message;
  EXPECT_NE(message.find("use another folder"), std::string::npos) << message;

  // Killed, it holds nothing: the lock is taken at once.
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  EXPECT_NO_THROW(FolderLock again(dir_, "the run folder"));
}

TEST_F(FolderLockTest, ReleasedWhenTheHolderEndsAndTheFileNamesNoStaleHolder) {
  {
    FolderLock lock(dir_, "the sweep folder");
    std::ifstream in(folder_lock_path(dir_));
    std::string text(std::istreambuf_iterator<char>(in), {});
    EXPECT_EQ(text.rfind("pid " + std::to_string(getpid()) + ", command: ", 0), 0u) << text;
  }
  EXPECT_EQ(fs::file_size(folder_lock_path(dir_)), 0u);
  EXPECT_NO_THROW(FolderLock again(dir_, "the sweep folder"));
}

TEST_F(FolderLockTest, AFileInsteadOfAFolderIsNamed) {
  std::ofstream(dir_) << "not a folder";
  const std::string message = testing::error_of([&] { FolderLock lock(dir_, "the run folder"); });
  EXPECT_NE(message.find("the run folder '" + dir_ + "' is a file, not a folder"), std::string::npos) << message;
  fs::remove(dir_);
}

}  // namespace
}  // namespace linattn
