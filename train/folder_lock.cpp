#include "train/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/shell_quote.h"

namespace linattn {

namespace {

namespace fs = std::filesystem;

// This process's command line, as a shell reads it back.
std::string own_command() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string command;
  std::string arg;
  while (std::getline(in, arg, '\0')) {
    if (!command.empty()) command += ' ';
    command += shell_quoted(arg);
  }
  return command;
}

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, size_t(n));
    at += n;
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

std::string folder_lock_path(const std::string& dir) { return (fs::path(dir) / ".lock").string(); }

std::string folder_write_problem(const std::string& dir) {
  fs::path at = dir.empty() ? fs::path(".") : fs::path(dir);
  auto quoted = [](const fs::path& p) {
    std::string q = "'";
    q += p.string();
    return q += "'";
  };
  // Up to the nearest path that exists: the folder itself, or the one it would be created in.
  for (;;) {
    std::error_code ec;
    const fs::file_status st = fs::status(at, ec);
    // ENOTDIR: a file on the way ("afile/sub"), found as the walk goes up.
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return "cannot look at " + quoted(at) + " (" + ec.message() + ")";
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) return quoted(at) + " is a file, not a folder";
      break;
    }
    at = at.has_parent_path() ? at.parent_path() : fs::path(".");  // "new": created in the working folder
  }
  if (::access(at.c_str(), W_OK | X_OK) != 0)
    return quoted(at) + " is not writable (" + std::strerror(errno) + ")";
  return "";
}

FolderLock::FolderLock(const std::string& dir, const std::string& what) {
  LINATTN_REQUIRE(!fs::exists(dir) || fs::is_directory(dir), what, " '", dir,
                  "' is a file, not a folder: give a folder's path (one that does not exist yet is created)");
  std::error_code ec;
  fs::create_directories(dir, ec);
  LINATTN_REQUIRE(!ec, "cannot create ", what, " '", dir, "': ", ec.message());
  const std::string path = folder_lock_path(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LINATTN_REQUIRE(fd_ >= 0, "cannot open the lock file '", path, "' of ", what, ": ", std::strerror(errno),
                  errno == EACCES || errno == EROFS || errno == EPERM
                      ? ": the folder must be writable; give another folder, or make it writable (chmod u+w)"
                      : "");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? read_all(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    LINATTN_REQUIRE(err == EWOULDBLOCK, "cannot lock ", what, " '", dir, "' (", path, "): ", std::strerror(err));
    LINATTN_REQUIRE(false, what, " '", dir, "' is in use by another process (",
                    holder.empty() ? "it has not written its PID yet" : holder,
                    "): two processes writing into one folder would mix their records and overwrite each other's "
                    "files. Wait for it to end (or stop it), or use another folder");
  }
  const std::string holder = "pid " + std::to_string(getpid()) + ", command: " + own_command() + "\n";
  // Who holds it is a courtesy to the process refused: the lock holds without it.
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t ignored = ::pwrite(fd_, holder.data(), holder.size(), 0);
    (void)ignored;
  }
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  const int ignored = ::ftruncate(fd_, 0);  // before the unlock: the next holder writes its own
  (void)ignored;
  ::close(fd_);  // releases the lock
}

}  // namespace linattn
