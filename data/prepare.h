// Tokenizes text files into token shards: one document per file, each preceded by end-of-text, split
// by document into a training and a validation shard. Used by `linattn-data prepare`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/shard.h"

namespace linattn::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files, or folders (read recursively, hidden entries skipped)
  std::string tokenizer = "bytes";  // "bytes" or "gpt2"
  std::string gpt2_dir;             // GPT-2's files; empty: default_gpt2_dir()
  std::string out_dir;
  // Validation documents: those whose file name matches one of these shell patterns (fnmatch), or else
  // the last val_fraction of the documents in input order. Neither: every document trains.
  std::vector<std::string> val_globs;
  double val_fraction = 0;
  // Called now and then with a one-line progress report.
  std::function<void(const std::string&)> progress;
};

struct Document {
  std::string path;
  uint64_t bytes = 0;  // the document's length; the file's when it is not split
  bool val = false;
  uint64_t offset = 0;      // where the document starts in its file (a single file split in two)
  uint64_t file_bytes = 0;  // the file's size when listed
};

struct PrepareResult {
  std::vector<Document> documents;  // in the order they were written
  ShardInfo train;
  bool has_val = false;
  ShardInfo val;
  double seconds = 0;
  // Inputs that look like binary files, not text: "PATH: 61% of its bytes are ...". They are
  // prepared as given (the byte tokenizer reads any bytes); the tool warns.
  std::vector<std::string> warnings;
};

// The documents of the inputs, in order: each file as given, each folder's files sorted by path.
// Missing inputs, empty files and folders without files are errors naming them. The folder out_dir
// (the output) is skipped inside an input folder, and is an error when it is an input folder.
std::vector<Document> list_documents(const std::vector<std::string>& inputs, const std::string& out_dir = "");

// Marks the validation documents (see PrepareOptions) and checks that both splits are non-empty when
// a split was asked for. A single document with a val_fraction is split in two at the line break
// nearest to the last val_fraction of its bytes: the first part trains, the second validates.
void assign_validation(std::vector<Document>& documents, const std::vector<std::string>& val_globs, double val_fraction);

// Writes OUT_DIR/train.bin, OUT_DIR/val.bin (when there are validation documents) and
// OUT_DIR/documents.tsv (split, bytes, tokens and path of every document).
PrepareResult prepare(const PrepareOptions& options);

// Splits "201*,202*" at commas.
std::vector<std::string> split_patterns(const std::string& list);

}  // namespace linattn::data
