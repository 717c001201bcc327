#include "train/run_data.h"

#include <filesystem>
#include <vector>

#include "core/error.h"

namespace linattn {

namespace fs = std::filesystem;

std::string find_run_data(const std::string& path, const std::string& ckpt, bool from_flag, const std::string& fix) {
  if (from_flag || fs::path(path).is_absolute()) return path;
  std::vector<std::string> tried{path};
  if (fs::is_directory(path)) return path;
  for (fs::path dir = fs::absolute(ckpt).lexically_normal().parent_path();; dir = dir.parent_path()) {
    const fs::path candidate = dir / path;
    if (fs::is_directory(candidate)) return candidate.string();
    tried.push_back(candidate.string());
    if (dir == dir.root_path()) break;
  }
  std::string list;
  for (const std::string& t : tried) list += "\n  " + t;
  LINATTN_REQUIRE(false, ckpt, ": the run's data folder '", path, "' (data.path) is not found; tried:", list,
                  "\ngive ", fix);
  return "";
}

}  // namespace linattn
