// linattn-bench documents: the cost of data.document_boundaries: reset against cross. One forward +
// backward of a config's model on the same training batches, the two modes interleaved so that a
// shared machine's load falls on both alike; also with documents of a given length cut into every
// row (the worst case of short documents).
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench.h"
#include "train/trainer.h"

namespace linattn::bench {

struct DocumentsOptions {
  std::string config_path = "configs/default.yaml";
  std::vector<std::string> overrides;
  int64_t batches = 6, doc_len = 64;
};

static int run_documents(const DocumentsOptions& o) {
  const std::string& config_path = o.config_path;
  const std::vector<std::string>& overrides = o.overrides;
  const int64_t batches = o.batches, doc_len = o.doc_len;
  const Config config = load_config(config_path, overrides);
  Model model(config.model, DType::f32);
  model.params().initialize(config.train.seed);
  auto data = data::Dataset::open(config.data.path, "train");
  data::LoaderOptions lo;
  lo.batch_size = config.train.micro_batch_size ? config.train.micro_batch_size : config.train.batch_size;
  lo.seq_len = config.data.seq_len;
  data::TrainLoader loader(data, lo);
  std::vector<data::Batch> batch;
  int64_t cut_rows = 0;
  for (int64_t i = 0; i < batches; ++i) {
    batch.push_back(loader.next());
    const ops::Segments s = document_segments(batch.back().inputs, DocumentBoundaries::reset, data->eot());
    cut_rows += int64_t(s.offsets.size()) - 1 - lo.batch_size;
  }
  Arena arena;
  auto step = [&](const data::Batch& b, const ops::Segments& s) {
    {
      ArenaScope scope(arena);
      backward(model.loss(b.inputs, b.targets, s));
    }
    arena.reset();
    model.params().zero_grad();
  };
  // Documents of doc_len tokens throughout every row: starts at 0, doc_len, 2 doc_len, ...
  ops::Segments short_docs;
  for (int64_t r = 0; r < lo.batch_size; ++r)
    for (int64_t t = 0; t < lo.seq_len; t += doc_len) short_docs.offsets.push_back(r * lo.seq_len + t);
  short_docs.offsets.push_back(lo.batch_size * lo.seq_len);

  std::printf("documents: %s, float32 forward+backward of batches of %lld x %lld tokens, %d threads\n",
              config_path.c_str(), (long long)lo.batch_size, (long long)lo.seq_len, omp_get_max_threads());
  std::printf("GEMM peak here (1024^3): %.1f GFLOP/s\n", gemm_peak_gflops());
  std::printf("%lld training batches: %lld document starts inside their rows under reset\n", (long long)batches,
              (long long)cut_rows);
  // Per round: every batch once per mode, the modes alternating; the median round per mode.
  const char* names[3] = {"cross", "reset", "reset, short docs"};
  std::vector<double> ms[3];
  for (int round = 0; round < 7; ++round)
    for (int mode = 0; mode < 3; ++mode) {
      auto t0 = std::chrono::steady_clock::now();
      for (const data::Batch& b : batch)
        step(b, mode == 0   ? ops::Segments{}
                : mode == 1 ? document_segments(b.inputs, DocumentBoundaries::reset, data->eot())
                            : short_docs);
      if (round > 0)  // round 0 warms up
        ms[mode].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                           double(batches));
    }
  std::printf("%-24s %12s %12s %12s %10s\n", "mode", "best ms", "median ms", "tokens/s", "vs cross");
  double cross_median = 0;
  for (int mode = 0; mode < 3; ++mode) {
    std::sort(ms[mode].begin(), ms[mode].end());
    const double median = ms[mode][ms[mode].size() / 2];
    if (mode == 0) cross_median = median;
    std::string label = names[mode];
    if (mode == 2) label += " (" + std::to_string(doc_len) + ")";
    std::printf("%-24s %12.1f %12.1f %12.0f %9.1f%%\n", label.c_str(), ms[mode].front(), median,
                double(lo.batch_size * lo.seq_len) / (median * 1e-3), 100.0 * (median / cross_median - 1.0));
  }
  return 0;
}

static std::function<int()> documents_command(CLI::App& c) {
  auto o = std::make_shared<DocumentsOptions>();
  c.add_option("--config", o->config_path, "the model and data (default configs/default.yaml)")->type_name("FILE");
  c.add_option("--set", o->overrides, "override one config value")->type_name("KEY=VALUE")->allow_extra_args(false);
  c.add_option("--batches", o->batches, "training batches (default 6)")->type_name("N")->check(cli::whole_number(1, 1 << 20));
  c.add_option("--doc-len", o->doc_len, "the length of the documents cut into every row (default 64)")
      ->type_name("L")
      ->check(cli::whole_number(1, int64_t(1) << 24));
  return [o] { return run_documents(*o); };
}

static const bool registered = add_command(
    {"documents", "forward+backward time of data.document_boundaries reset against cross", documents_command});

}  // namespace linattn::bench
