// linattn-bench generate: prefill and decode speed and the decoding state's memory per sequence, for a
// linear-only model, the default hybrid and an attention-only model, at several context lengths.
#include <omp.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "layers/decoder.h"
#include "train/config.h"

namespace linattn::bench {

// CPU seconds this process has used (all threads): on a shared machine, the work itself, without the
// time spent waiting for a core.
static double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct GenerateOptions {
  int64_t max_context = INT64_MAX, steps = 32;
  std::string only;
};

static int run_generate(const GenerateOptions& o) {
  std::vector<int64_t> contexts = {1024, 8192, 32768};
  std::erase_if(contexts, [&](int64_t c) { return c > o.max_context; });
  const int64_t steps = o.steps;
  const std::string& only = o.only;
  // The shape of configs/default.yaml before issue 28 narrowed it (hidden 256, 4 layers, 4 heads, byte
  // vocabulary; README's table was measured on it), with its layers all GLA, as they were (GLA,
  // windowed attention, GLA, global attention), and all global attention.
  const std::vector<std::string> shape = {"model.hidden_size=256", "model.num_heads=4", "model.num_hidden_layers=4"};
  const std::vector<std::pair<std::string, std::string>> models = {
      {"linear (4x gla)", "model.layers=[gla, gla, gla, gla]"},
      {"gla hybrid", "model.layers=[gla, {mixer: attention, window_size: 128}, gla, attention]"},
      {"attention (4x global)", "model.layers=[attention, attention, attention, attention]"}};
  std::printf("generate, float32, batch 1, hidden 256, 4 layers, 4 heads, %d threads\n", omp_get_max_threads());
  std::printf("GEMM peak here (1024^3): %.1f GFLOP/s\n", gemm_peak_gflops());
  std::printf("prefill: the context in one call; decode: the median of %lld steps after it; memory: the "
              "decoding state of one sequence\n",
              (long long)steps);
  std::printf("decode CPU ms/token: CPU time of the process over the steps (both threads' work, no waiting)\n");
  std::printf("%-22s %8s %14s %14s %12s %12s %14s\n", "model", "context", "prefill tok/s", "decode tok/s",
              "ms/token", "CPU ms/tok", "state MiB/seq");
  for (const auto& [name, layers] : models) {
    if (!only.empty() && name.find(only) == std::string::npos) continue;
    std::vector<std::string> overrides = shape;
    overrides.push_back(layers);
    Config config = load_config("configs/default.yaml", overrides);
    Model model(config.model, DType::f32);
    model.params().initialize(1);
    Rng rng(2);
    double ms_first = 0, ms_last = 0;
    for (int64_t context : contexts) {
      Tensor ids = Tensor::empty({1, context}, DType::i32);
      for (int64_t i = 0; i < context; ++i) ids.data<int32_t>()[i] = int32_t(rng.below(256));
      Decoder decoder(model, 1);
      auto t0 = std::chrono::steady_clock::now();
      decoder.prefill(ids);
      const double prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::vector<double> ms;
      const double cpu0 = cpu_seconds();
      for (int64_t s = 0; s < steps; ++s) {
        t0 = std::chrono::steady_clock::now();
        decoder.step({int32_t(rng.below(256))});
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      const double cpu_ms = 1e3 * (cpu_seconds() - cpu0) / double(steps);
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      if (context == contexts.front()) ms_first = median;
      ms_last = median;
      std::printf("%-22s %8lld %14.0f %14.1f %12.3f %12.3f %14.3f\n", name.c_str(), (long long)context,
                  double(context) / prefill_s, 1e3 / median, median, cpu_ms, double(decoder.state_bytes()) / (1 << 20));
      std::fflush(stdout);
    }
    if (contexts.size() > 1)
      std::printf("%-22s decode ms/token at context %lld / at %lld: %.2f\n", name.c_str(), (long long)contexts.back(),
                  (long long)contexts.front(), ms_last / ms_first);
  }
  return 0;
}

static std::function<int()> generate_command(CLI::App& c) {
  auto o = std::make_shared<GenerateOptions>();
  c.add_option("--max-context", o->max_context, "the longest context of 1024, 8192, 32768 to measure (default all)")
      ->type_name("T")
      ->check(cli::whole_number(1, INT64_MAX));
  c.add_option("--steps", o->steps, "new tokens timed per context (default 32)")
      ->type_name("N")
      ->check(cli::whole_number(1, 1 << 20));
  c.add_option("--only", o->only, "one model")->type_name("linear|hybrid|attention");
  c.footer("Run it from the project root (it reads configs/default.yaml, for the data and the keys not set here).");
  return [o] { return run_generate(*o); };
}

static bool registered = add_command(
    {"generate", "prefill and decode tokens/s and decoding memory per sequence: linear, hybrid, attention models",
     generate_command});

}  // namespace linattn::bench
