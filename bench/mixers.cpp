// linattn-bench mixers: forward+backward time, tokens/s and GFLOP/s of every registered mixer.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/error.h"

namespace linattn::bench {

static std::vector<MixerBench>& mixers() {
  static std::vector<MixerBench> all;
  return all;
}

bool add_mixer_bench(MixerBench mixer) {
  mixers().push_back(std::move(mixer));
  return true;
}

const std::vector<MixerBench>& mixer_benches() { return mixers(); }

struct MixersOptions {
  std::string only, device = "cpu", precision = "f32";
  int64_t max_t = -1;  // none
};

static int run_mixers(const MixersOptions& o) {
  int64_t B = 4, H = 4, dk = 64, dv = 64;
  std::vector<int64_t> lengths = {512, 1024, 2048, 4096, 8192, 16384};
  const std::string &only = o.only, &device = o.device;
  const int64_t max_t = o.max_t;
  if (device == "cuda")
    return run_mixers_cuda(only, max_t, o.precision == "bf16"   ? MatmulPrecision::bf16
                                        : o.precision == "tf32" ? MatmulPrecision::tf32
                                                                : MatmulPrecision::f32);
  if (o.precision != "f32")
    throw Error("--precision " + o.precision + ": the CPU mixers run in float32; it applies to --device cuda");
  if (max_t >= 0) std::erase_if(lengths, [&](int64_t t) { return t > max_t; });
  std::printf("mixers, float32, forward+backward, B=%ld H=%ld dk=%ld dv=%ld, %d threads\n", long(B), long(H),
              long(dk), long(dv), omp_get_max_threads());
  std::printf("GEMM peak here (1024^3): %.1f GFLOP/s\n", gemm_peak_gflops());
  std::printf("ms: best of 3-30 runs (~2 s per row); median: their median, from which tokens/s and ns/token\n");
  std::printf("%-16s %7s %10s %10s %12s %10s %12s\n", "mixer", "T", "ms", "median", "tokens/s", "GFLOP/s",
              "ns/token");
  for (const MixerBench& m : mixers()) {
    if (!only.empty() && m.name != only) continue;
    double ns_first = 0, ns_last = 0;  // at T=1024 and at the longest T
    for (int64_t T : lengths) {
      auto run = m.prepare(B, T, H, dk, dv);
      const Timing t = time_runs(run, 2000);
      const double tokens = double(B * T);
      const double gflops = m.flops(T, dk, dv) * double(B * H) / (t.best_ms * 1e6);
      const double ns_per_token = t.median_ms * 1e6 / tokens;
      if (T == 1024) ns_first = ns_per_token;
      ns_last = ns_per_token;
      std::printf("%-16s %7ld %10.2f %10.2f %12.0f %10.1f %12.1f\n", m.name.c_str(), long(T), t.best_ms, t.median_ms,
                  tokens / (t.median_ms * 1e-3), gflops, ns_per_token);
      std::fflush(stdout);
    }
    if (ns_first > 0 && lengths.back() > 1024)
      std::printf("%-16s ns/token at T=%ld / T=1024: %.2f\n", m.name.c_str(), long(lengths.back()),
                  ns_last / ns_first);
  }
  return 0;
}

static std::function<int()> mixers_command(CLI::App& c) {
  auto o = std::make_shared<MixersOptions>();
  c.add_option("--device", o->device,
               "cpu, or cuda: the linear mixers' CUDA kernels (an error without a GPU; a mixer without a CUDA "
               "kernel yet is skipped with a message)")
      ->type_name("cpu|cuda")
      ->check(cli::one_of({"cpu", "cuda"}));
  c.add_option("--only", o->only, "one mixer")->type_name("NAME");
  c.add_option("--precision", o->precision,
               "with --device cuda: the operands of linear attention's and GLA's intra-chunk products, as "
               "train.tf32 / train.precision: bf16 set them: f32 (CUDA cores; the default), tf32 or bf16 (tensor "
               "cores)")
      ->type_name("f32|tf32|bf16")
      ->check(cli::one_of({"f32", "tf32", "bf16"}));
  c.add_option("--max-t", o->max_t, "the longest sequence length (default 16384)")
      ->type_name("T")
      ->check(cli::whole_number(1, int64_t(1) << 24));
  return [o] { return run_mixers(*o); };
}

static bool registered =
    add_command({"mixers", "forward+backward time, tokens/s and GFLOP/s of each token mixer", mixers_command});

}  // namespace linattn::bench
