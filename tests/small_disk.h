// A small tmpfs mounted for one test, to run out of disk space on purpose. Mounting needs root (or
// CAP_SYS_ADMIN); where it is not allowed the test skips, saying why.
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace linattn::testing {

class SmallDisk {
 public:
  // Mounts a tmpfs of `bytes` (rounded up to whole KiB) at `dir`, creating the folder.
  SmallDisk(const std::string& dir, size_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    std::string options = "size=" + std::to_string((bytes + 1023) / 1024) + "k";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0) mounted_ = true;
    else why_not_ = "cannot mount a small tmpfs at " + dir_ + " (" + std::strerror(errno) +
                    "): the full-disk test needs root or CAP_SYS_ADMIN";
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, why_not_;
  bool mounted_ = false;
};

}  // namespace linattn::testing
