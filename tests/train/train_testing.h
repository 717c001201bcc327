// Shared by the trainer tests: byte-level shards of the default corpus in a temporary folder, and a
// tiny hybrid config that trains in seconds.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

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

// A two-layer hybrid (GLA + sliding-window attention), 64 wide, 64-token sequences.
inline Config tiny_config(const std::string& out_dir, const std::vector<std::string>& overrides = {}) {
  return parse_config(R"(model:
  vocab_size: 257
  hidden_size: 64
  num_hidden_layers: 2
  num_heads: 2
  layers: [gla, {mixer: attention, window_size: 32}]
data:
  path: )" + corpus_shards() + R"(
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

}  // namespace linattn::testing
