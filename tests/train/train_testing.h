// Shared by the trainer tests: byte-level shards of the default corpus (or of given text) in a
// temporary folder, and a tiny hybrid config that trains in seconds.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "train/config.h"

namespace linattn::testing {

// Prepares the corpus once per test process; the folder is removed at exit.
inline const std::string& corpus_shards() {
  static std::string dir = [] {
    namespace fs = std::filesystem;
    EXPECT_TRUE(fs::is_directory("data/corpus/sotu"))
        << "the default corpus is missing: run ./scripts/fetch-data (./scripts/test does it)";
    std::string d = (fs::temp_directory_path() / ("linattn-shards-" + std::to_string(getpid()))).string();
    data::PrepareOptions o;
    o.inputs = {"data/corpus/sotu"};
    o.out_dir = d;
    o.val_globs = {"2020*", "2021*"};  // a small validation split keeps the final evaluations quick
    data::prepare(o);
    static struct Cleanup {
      std::string path;
      ~Cleanup() { std::filesystem::remove_all(path); }
    } cleanup{d};
    return d;
  }();
  return dir;
}

// Byte-level shards of `train_text` and `val_text` (one document each) in a temporary folder named
// after `name`, removed at exit.
inline std::string text_shards(const std::string& name, const std::string& train_text, const std::string& val_text) {
  namespace fs = std::filesystem;
  static struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const std::string& p : paths) fs::remove_all(p);
    }
  } cleanup;
  const fs::path dir = fs::temp_directory_path() / ("linattn-" + name + "-" + std::to_string(getpid()));
  cleanup.paths.push_back(dir.string());
  fs::create_directories(dir / "text");
  std::ofstream(dir / "text" / "train.txt") << train_text;
  std::ofstream(dir / "text" / "val.txt") << val_text;
  data::PrepareOptions o;
  o.inputs = {(dir / "text").string()};
  o.out_dir = (dir / "shards").string();
  o.val_globs = {"val.txt"};
  data::prepare(o);
  return o.out_dir;
}

// A two-layer hybrid (GLA + sliding-window attention), 64 wide, 64-token sequences, on the data in
// `data_dir`.
inline Config tiny_config_on(const std::string& data_dir, const std::string& out_dir,
                             const std::vector<std::string>& overrides = {}) {
  return parse_config(R"(model:
  vocab_size: 257
  hidden_size: 64
  num_hidden_layers: 2
  num_heads: 2
  layers: [gla, {mixer: attention, window_size: 32}]
data:
  path: )" + data_dir + R"(
  seq_len: 64
  val_tokens: 20000
train:
  batch_size: 8
  lr: 3.0e-3
  lr_min: 3.0e-4
  warmup_steps: 20
  max_steps: 300
  eval_every: 0
  log_every: 100
  out_dir: )" + out_dir + "\n",
                      "tiny.yaml", overrides);
}

// The same on the default corpus.
inline Config tiny_config(const std::string& out_dir, const std::vector<std::string>& overrides = {}) {
  return tiny_config_on(corpus_shards(), out_dir, overrides);
}

}  // namespace linattn::testing
