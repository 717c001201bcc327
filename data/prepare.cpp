#include "data/prepare.h"

#include <fnmatch.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "data/mapped_file.h"
#include "data/shard.h"
#include "data/dataset.h"
#include "data/hf_tokenizer.h"
#include "data/tokenizer.h"

namespace linattn::data {

namespace fs = std::filesystem;

std::vector<std::string> split_patterns(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Whether the file at `path` starts as a linattn or llm.c token shard does.
static bool is_token_shard(const std::string& path) {
  char head[8] = {};
  std::ifstream(path, std::ios::binary).read(head, sizeof head);
  int32_t llmc = 0;
  std::memcpy(&llmc, head, sizeof llmc);
  return std::memcmp(head, shard_magic, sizeof head) == 0 || llmc == llmc_magic;
}

std::vector<Document> list_documents(const std::vector<std::string>& inputs, const std::string& out_dir) {
  LINATTN_REQUIRE(!inputs.empty(), "no input: give text files or folders of text files");
  std::vector<Document> docs;
  auto add_file = [&](const fs::path& p) {
    const uint64_t bytes = fs::file_size(p);
    LINATTN_REQUIRE(bytes > 0, p.string(), ": input file is empty");
    LINATTN_REQUIRE(!is_token_shard(p.string()), p.string(), ": a token shard (the output of a prepare, or llm.c's), "
                    "not text: give the text files it was prepared from");
    docs.push_back(Document{p.string(), bytes, false, 0, bytes});
  };
  // The output folder, when it exists: its shards and listing are never read as documents.
  auto is_out = [&](const fs::path& p) {
    std::error_code ec;
    return !out_dir.empty() && fs::equivalent(p, out_dir, ec);
  };
  for (const std::string& input : inputs) {
    const fs::path p(input);
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    LINATTN_REQUIRE(fs::exists(st), input, ": input does not exist");
    if (fs::is_regular_file(st)) {
      add_file(p);
      continue;
    }
    LINATTN_REQUIRE(fs::is_directory(st), input, ": input is neither a file nor a folder");
    LINATTN_REQUIRE(!is_out(p), "--out ", out_dir, " is the input folder ", input, ": the next prepare would read this "
                    "one's train.bin, val.bin and documents.tsv as text; give an --out outside the input folder");
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(p);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      // Hidden entries and the output folder are skipped, and not entered.
      if ((!name.empty() && name[0] == '.') || (it->is_directory() && is_out(it->path()))) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.push_back(it->path());
    }
    LINATTN_REQUIRE(!files.empty(), input, ": input folder holds no files", out_dir.empty() ? "" : " (besides --out)");
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) add_file(f);
  }
  return docs;
}

// The cut nearest to `target` just after a byte for which `ends_piece` holds, strictly inside the
// text (both parts non-empty); 0 when there is none.
template <class Pred>
static size_t nearest_cut(std::string_view text, size_t target, Pred ends_piece) {
  size_t best = 0;
  for (size_t i = target; i-- > 0;)  // the last piece end before the target
    if (ends_piece(i)) {
      best = i + 1;
      break;
    }
  for (size_t i = target; i + 1 < text.size() && (best == 0 || i + 1 - target < target - best); ++i)
    if (ends_piece(i)) return i + 1;
  return best < text.size() ? best : 0;
}

// One file as a training and a validation document, cut near the start of its last `fraction` of
// bytes: after the nearest line break; in a file without one (text8-style corpora are one line),
// after the nearest space; else before the nearest UTF-8 character. A character is never cut.
static std::vector<Document> split_document(const Document& d, double fraction) {
  const MappedFile file(d.path);
  const std::string_view text = file.text();
  const size_t target = text.size() - size_t(std::ceil(fraction * double(text.size())));
  size_t cut = nearest_cut(text, target, [&](size_t i) { return text[i] == '\n'; });
  if (cut == 0) cut = nearest_cut(text, target, [&](size_t i) { return text[i] == ' '; });
  if (cut == 0)
    cut = nearest_cut(text, target, [&](size_t i) { return i + 1 < text.size() && (uint8_t(text[i + 1]) & 0xC0) != 0x80; });
  LINATTN_REQUIRE(cut > 0, d.path, ": --val-fraction on a single file needs at least two characters to split; "
                  "give a larger file, several files, or no --val-fraction");
  Document train = d, val = d;
  train.bytes = cut;
  val.offset = cut;
  val.bytes = d.bytes - cut;
  val.val = true;
  return {train, val};
}

void assign_validation(std::vector<Document>& docs, const std::vector<std::string>& val_globs, double val_fraction) {
  LINATTN_REQUIRE(val_globs.empty() || val_fraction == 0, "give --val-glob or --val-fraction, not both");
  LINATTN_REQUIRE(val_fraction >= 0 && val_fraction < 1, "--val-fraction ", val_fraction, " is not in [0, 1)");
  for (Document& d : docs) d.val = false;
  if (!val_globs.empty()) {
    for (Document& d : docs) {
      const std::string name = fs::path(d.path).filename().string();
      for (const std::string& g : val_globs)
        if (fnmatch(g.c_str(), name.c_str(), 0) == 0) d.val = true;
    }
    std::string joined;
    for (const std::string& g : val_globs) joined += (joined.empty() ? "" : ",") + g;
    const auto n_val = std::count_if(docs.begin(), docs.end(), [](const Document& d) { return d.val; });
    LINATTN_REQUIRE(n_val > 0, "--val-glob '", joined, "' matches no input file name");
    LINATTN_REQUIRE(size_t(n_val) < docs.size(), "--val-glob '", joined, "' matches every input file: nothing left to train on");
  } else if (val_fraction > 0 && docs.size() == 1) {
    docs = split_document(docs[0], val_fraction);
  } else if (val_fraction > 0) {
    size_t n_val = size_t(std::ceil(val_fraction * double(docs.size())));
    n_val = std::min(n_val, docs.size() - 1);
    for (size_t k = docs.size() - n_val; k < docs.size(); ++k) docs[k].val = true;
  }
}

namespace {

// The share of `text`'s bytes that no text holds: control bytes other than tab, line breaks, form
// feed and escape, and bytes that are not part of well-formed UTF-8 (a lead byte and its
// continuation bytes; overlong forms are not told apart). Text in another 8-bit code page scores a
// few percent; random bytes about 60%.
double non_text_share(std::string_view text) {
  size_t bad = 0;
  for (size_t i = 0; i < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      bad += (b < 0x20 && (b == 0 || !std::strchr("\t\n\r\f\v\x1b", b))) || b == 0x7f;
      ++i;
      continue;
    }
    const size_t len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    size_t k = 1;
    while (len && k < len && i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80) ++k;
    if (len && k == len) {
      i += len;
    } else {
      ++bad;
      ++i;
    }
  }
  return text.empty() ? 0.0 : double(bad) / double(text.size());
}

}  // namespace


// CPU time of this process, all threads.
static double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The tokenizer.json (and tokenizer_config.json) of a prepare, kept beside the shards so that train,
// eval, generate and export find the tokenizer with the data; a stale one is removed.
static void keep_tokenizer_files(const Tokenizer& tokenizer, const std::string& out_dir) {
  const fs::path out = fs::path(out_dir);
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  for (const char* name : {data_tokenizer_file, data_tokenizer_config_file}) {
    const fs::path to = out / name;
    const fs::path from = hf ? fs::path(hf->path()).parent_path() / name : fs::path();
    std::error_code ec;
    if (!hf || !fs::exists(from)) {
      fs::remove(to, ec);
      continue;
    }
    if (fs::exists(to) && fs::equivalent(from, to, ec)) continue;
    const fs::path tmp = out / (std::string(name) + ".tmp");
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    LINATTN_REQUIRE(!ec, tmp.string(), ": cannot copy ", from.string(), " there (", ec.message(), ")");
    fs::rename(tmp, to, ec);
    LINATTN_REQUIRE(!ec, to.string(), ": cannot write (", ec.message(), ")");
  }
}

PrepareResult prepare(const PrepareOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  LINATTN_REQUIRE(!options.out_dir.empty(), "no output folder: give --out DIR");
  LINATTN_REQUIRE(options.threads >= 0, "--threads ", options.threads, " is negative; give 1 or more (0: all cores)");

  PrepareResult result;
  result.documents = list_documents(options.inputs, options.out_dir);
  assign_validation(result.documents, options.val_globs, options.val_fraction);
  const std::shared_ptr<const Tokenizer> tokenizer =
      options.tokenizer_instance ? options.tokenizer_instance
                                 : make_tokenizer(options.tokenizer, options.gpt2_dir.empty() ? default_gpt2_dir() : options.gpt2_dir);

  fs::create_directories(options.out_dir);
  const std::string train_path = (fs::path(options.out_dir) / "train.bin").string();
  const std::string val_path = (fs::path(options.out_dir) / "val.bin").string();
  const bool any_val = std::any_of(result.documents.begin(), result.documents.end(), [](const Document& d) { return d.val; });
  if (!any_val) fs::remove(val_path);  // a val.bin left from an earlier split must not be read as this one's

  const std::string sha = tokenizer->file_sha256();
  ShardWriter train(train_path, tokenizer->name(), tokenizer->vocab_size(), tokenizer->eot(), 0, sha);
  std::unique_ptr<ShardWriter> val;
  if (any_val) val = std::make_unique<ShardWriter>(val_path, tokenizer->name(), tokenizer->vocab_size(), tokenizer->eot(), 0, sha);

  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  result.threads = threads;
  uint64_t total_bytes = 0, done_bytes = 0;
  for (const Document& d : result.documents) total_bytes += d.bytes;
  std::vector<uint64_t> doc_tokens;
  double last_report = 0;
  // Batches of documents are encoded in parallel, then written in order: 32 MiB of text or one document
  // per thread, whichever is more, but no more than 256 MiB unless one document is larger.
  const size_t n_docs = result.documents.size();
  std::vector<std::vector<uint32_t>> ids;
  std::vector<std::exception_ptr> errors;
  std::vector<std::string> warnings;
  for (size_t first = 0; first < n_docs;) {
    size_t last = first;
    for (uint64_t batch_bytes = 0; last < n_docs && (batch_bytes < (32u << 20) || last - first < size_t(threads));) {
      if (last > first && batch_bytes + result.documents[last].bytes > (256u << 20)) break;
      batch_bytes += result.documents[last++].bytes;
    }
    const size_t count = last - first;
    ids.resize(std::max(ids.size(), count));
    errors.assign(count, nullptr);
    warnings.assign(count, "");
    const auto e0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t k = 0; k < count; ++k) {
      try {
        const Document& d = result.documents[first + k];
        const MappedFile file(d.path);
        LINATTN_REQUIRE(file.size() == d.file_bytes, d.path, ": changed while being read (", d.file_bytes, " then ",
                        file.size(), " bytes); run prepare again when nothing writes to it");
        // A binary file among the inputs (an image, an archive) trains as noise: said, judged on its start.
        const std::string_view head = file.text().substr(d.offset, std::min<uint64_t>(d.bytes, 1 << 20));
        const double share = head.size() >= 64 ? non_text_share(head) : 0.0;
        if (share > 0.3)
          warnings[k] = d.path + ": " + std::to_string(int(std::lround(100 * share))) + "% of its " +
                        (head.size() < d.bytes ? "first " : "") + std::to_string(head.size()) +
                        " bytes are control bytes or not UTF-8: it looks like a binary file, not text; it is "
                        "prepared as given (leave it out of the inputs if it is not meant to be trained on)";
        ids[k].clear();
        ids[k].push_back(tokenizer->eot());  // every document starts with end-of-text, as in llm.c's shards
        tokenizer->encode(file.text().substr(d.offset, d.bytes), ids[k], d.path);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
    result.encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
    result.encode_cpu_seconds += process_cpu_seconds() - c0;
    for (size_t k = 0; k < count; ++k) {
      if (errors[k]) std::rethrow_exception(errors[k]);
      if (!warnings[k].empty()) result.warnings.push_back(warnings[k]);
      const Document& d = result.documents[first + k];
      (d.val ? *val : train).add_document(ids[k].data(), ids[k].size(), d.bytes);
      doc_tokens.push_back(ids[k].size());
      done_bytes += d.bytes;
    }
    first = last;
    if (options.progress && (elapsed() - last_report >= 1.0 || first == n_docs)) {
      last_report = elapsed();
      char line[256];
      std::snprintf(line, sizeof line, "prepare: %zu/%zu documents, %.1f/%.1f MB, %llu tokens, %.1f s", first, n_docs,
                    done_bytes / 1e6, total_bytes / 1e6,
                    (unsigned long long)(train.token_count() + (val ? val->token_count() : 0)), last_report);
      options.progress(line);
    }
  }
  result.train = train.finish();
  if (val) {
    result.val = val->finish();
    result.has_val = true;
  }
  keep_tokenizer_files(*tokenizer, options.out_dir);

  const std::string listing = (fs::path(options.out_dir) / "documents.tsv").string();
  std::ofstream out(listing);
  out << "split\tbytes\ttokens\tpath\n";
  for (size_t k = 0; k < result.documents.size(); ++k) {
    const Document& d = result.documents[k];
    out << (d.val ? "val" : "train") << '\t' << d.bytes << '\t' << doc_tokens[k] << '\t' << d.path << '\n';
  }
  LINATTN_CHECK(out.good(), listing, ": write failed");
  result.seconds = elapsed();
  return result;
}

}  // namespace linattn::data
