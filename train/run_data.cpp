#include "train/run_data.h"

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"

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

std::unique_ptr<data::Tokenizer> open_run_tokenizer(const std::string& data_path, const std::string& ckpt,
                                                    const std::string& tokenizer_flag, const std::string& gpt2_dir) {
  const std::string fix = "--tokenizer bytes|gpt2|PATH/tokenizer.json";
  if (tokenizer_flag.empty())
    return data::data_tokenizer(*data::Dataset::open(find_run_data(data_path, ckpt, false, fix), "train"), gpt2_dir);
  auto tokenizer = data::make_tokenizer(tokenizer_flag, gpt2_dir.empty() ? data::default_gpt2_dir() : gpt2_dir);
  std::string dir;
  try {
    dir = find_run_data(data_path, ckpt, false, fix);
  } catch (const Error&) {
    return tokenizer;  // the run's data is not at hand: nothing to compare with
  }
  data::check_tokenizer_matches(*tokenizer, "--tokenizer " + tokenizer_flag, *data::Dataset::open(dir, "train"),
                                "the run's data " + dir);
  return tokenizer;
}

void check_data_matches_run(const data::Dataset& data, const std::string& data_source, const std::string& data_path,
                            const std::string& ckpt) {
  std::string dir;
  try {
    dir = find_run_data(data_path, ckpt, false, "");
  } catch (const Error&) {
    return;
  }
  const auto run = data::Dataset::open(dir, "train");
  LINATTN_REQUIRE(data.describe_tokenizer() == run->describe_tokenizer() && data.vocab_size() == run->vocab_size(),
                  data_source, " was prepared with ", data.describe_tokenizer(), " (vocabulary ", data.vocab_size(),
                  "), the run's data ", dir, " with ", run->describe_tokenizer(), " (vocabulary ", run->vocab_size(),
                  "): the model reads its ids as other tokens; prepare the text with the run's tokenizer");
}

}  // namespace linattn
