// An advisory lock on a folder that one process writes into: a run folder (linattn-train) or a
// sweep's out_dir (linattn-sweep). Two writers in one folder mix their metrics and overwrite each
// other's checkpoints, so the second is refused, told which process holds the folder.
//
// The lock is flock(2) on FOLDER/.lock: the kernel releases it when its process ends, however it
// ends (a SIGKILL leaves no stale lock). The file holds the holder's PID and command line. The
// descriptor is closed on exec, so a program that the holder starts does not hold the lock too.
#pragma once

#include <string>

namespace linattn {

class FolderLock {
 public:
  // Creates `dir` when it does not exist and takes its lock. Throws an Error when another process
  // holds it (naming its PID and command) or when `dir` is a file; `what` names the folder in the
  // message ("the run folder", "the sweep folder").
  FolderLock(const std::string& dir, const std::string& what);
  ~FolderLock();  // releases the lock and empties the lock file
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// FOLDER/.lock
std::string folder_lock_path(const std::string& dir);

// What keeps this process from creating `dir` (where it does not exist) and writing in it, found
// without creating anything (for --dry-run, and before a run loads its data): "" when nothing does,
// else "'a/b' is a file, not a folder" or "'ro' is not writable (Permission denied)". Only the
// nearest folder that exists is asked; the kernel has the last word when the folder is written.
std::string folder_write_problem(const std::string& dir);

}  // namespace linattn
