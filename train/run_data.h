// Finding a run's data folder from one of its checkpoints (linattn-eval, linattn-generate).
#pragma once

#include <string>

namespace linattn {

// The run's data folder: `path` (data.path) as written when it is absolute or a flag gave it
// (from_flag); otherwise the first of the working directory, the checkpoint's folder and the folders
// above it that holds it. When none does, the error lists the places tried and says "give FIX".
std::string find_run_data(const std::string& path, const std::string& ckpt, bool from_flag, const std::string& fix);

}  // namespace linattn
