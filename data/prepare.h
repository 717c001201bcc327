// Tokenizes text files into token shards: one document per file, each preceded by end-of-text, split
// by document into a training and a validation shard. Used by `linattn-data prepare`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/shard.h"
#include "data/tokenizer.h"

namespace linattn::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files, or folders (read recursively, hidden entries skipped)
  // "bytes", "gpt2", or a Hugging Face tokenizer.json (a file, or the folder that holds it), which is
  // copied into out_dir (with the tokenizer_config.json beside it, if any) and recorded in the shards.
  std::string tokenizer = "bytes";
  std::shared_ptr<const Tokenizer> tokenizer_instance;  // when set, used instead of making `tokenizer`
  std::string gpt2_dir;             // GPT-2's files; empty: default_gpt2_dir()
  int threads = 0;                  // documents encoded at once; 0: OpenMP's default (all cores)
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
  double seconds = 0;             // all of it
  double encode_seconds = 0;      // reading and encoding the text, on `threads` threads
  double encode_cpu_seconds = 0;  // the CPU time of that, all threads together
  int threads = 1;
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
// OUT_DIR/documents.tsv (split, bytes, tokens and path of every document); with a tokenizer.json, also
// OUT_DIR/tokenizer.json. Documents are encoded in parallel, in batches, and written in order: the
// shards do not depend on the number of threads.
PrepareResult prepare(const PrepareOptions& options);

// Splits "201*,202*" at commas.
std::vector<std::string> split_patterns(const std::string& list);

}  // namespace linattn::data
