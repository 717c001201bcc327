// Finding a run's data folder from one of its checkpoints (linattn-eval, linattn-generate).
#pragma once

#include <memory>
#include <string>

#include "data/dataset.h"
#include "data/tokenizer.h"

namespace linattn {

// The run's data folder: `path` (data.path) as written when it is absolute or a flag gave it
// (from_flag); otherwise the first of the working directory, the checkpoint's folder and the folders
// above it that holds it. When none does, the error lists the places tried and says "give FIX".
std::string find_run_data(const std::string& path, const std::string& ckpt, bool from_flag, const std::string& fix);

// The tokenizer of a run: the --tokenizer flag's (bytes, gpt2 or a tokenizer.json) when given, else the
// one its data folder records (data.path, found as find_run_data does; a tokenizer.json is read from the
// folder). When the flag is given and the run's data is at hand too, the two must be the same tokenizer.
std::unique_ptr<data::Tokenizer> open_run_tokenizer(const std::string& data_path, const std::string& ckpt,
                                                    const std::string& tokenizer_flag, const std::string& gpt2_dir);

// Refuses data (named `data_source` in the error, e.g. "--data DIR") prepared with another tokenizer
// than the run's data, when that is at hand.
void check_data_matches_run(const data::Dataset& data, const std::string& data_source, const std::string& data_path,
                            const std::string& ckpt);

}  // namespace linattn
