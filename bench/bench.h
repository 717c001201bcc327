// linattn-bench subcommands register themselves here; each bench/*.cpp adds one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/op_types.h"
#include "tools/cli.h"

namespace linattn::bench {

struct Command {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `command` (tools/cli.h) and returns what runs it once they
  // are parsed.
  std::function<std::function<int()>(CLI::App& command)> setup;
};

bool add_command(Command command);

// Best wall time in milliseconds of `reps` runs of fn after one warm-up run.
inline double best_ms(const std::function<void()>& fn, int reps = 5) {
  fn();
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

// Wall times of fn over as many runs as fit in about budget_ms (at least min_reps, at most
// max_reps) after one warm-up run. The best run is the usual "best of N"; the median is the fairer
// figure for comparing short runs with long ones on a shared machine, since the best of many short
// runs catches a quiet moment that one long run averages away.
struct Timing {
  double best_ms, median_ms;
};
inline Timing time_runs(const std::function<void()>& fn, double budget_ms, int min_reps = 3, int max_reps = 30) {
  auto elapsed_ms = [](auto t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  auto t0 = std::chrono::steady_clock::now();
  fn();
  const int reps = std::clamp(int(budget_ms / std::max(elapsed_ms(t0), 1e-3)), min_reps, max_reps);
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(elapsed_ms(t0));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return {ms.front(), n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2])};
}

// `--device cuda`: the median milliseconds of run() on the GPU, timed by CUDA events on the compute
// stream, over `reps` runs after `warmup` untimed ones; before() (untimed; may be empty) runs before
// each. bench/device.cpp.
double cuda_median_ms(const std::function<void()>& run, int reps = 20, int warmup = 3,
                      const std::function<void()>& before = {});
// Empty where a CUDA device is here; else why not, for a message ("no CUDA device here (this build
// has the CUDA backend)").
std::string no_gpu_reason();

// The CUDA emulation build (docs/cuda-emulation.md) runs the device benchmarks too, at small shapes
// and with few repetitions: its times are the CPU's, printed under emulation_note().
#ifdef LINATTN_CUDA_EMULATION
inline constexpr bool kEmulatedCuda = true;
#else
inline constexpr bool kEmulatedCuda = false;
#endif
// "" on a GPU; in the emulation build, a line saying what its times are.
std::string emulation_note();

// Achieved float32 GFLOP/s of a square 1024^3 oneDNN product with the current thread count:
// the machine's reference figure that the other benchmarks print beside their own.
double gemm_peak_gflops();

}  // namespace linattn::bench

namespace linattn::bench {

// A token mixer as `linattn-bench mixers` measures it. prepare() allocates float32 inputs of the
// given sizes and returns a function that runs one forward + backward; flops() is the work of
// that forward + backward for one (batch, head) sequence of T tokens, used for GFLOP/s.
struct MixerBench {
  std::string name;
  std::function<std::function<void()>(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv)> prepare;
  std::function<double(int64_t T, int64_t dk, int64_t dv)> flops;
};

bool add_mixer_bench(MixerBench mixer);
const std::vector<MixerBench>& mixer_benches();  // in registration order

// linattn-bench mixers --device cuda (bench/mixers_cuda.cpp): the linear mixers' autograd ops on the
// GPU; `only` as --only, lengths up to max_t, the linear attention and GLA products in `precision`
// (backend::set_matmul_precision: bf16 or tf32 on the tensor cores).
int run_mixers_cuda(const std::string& only, int64_t max_t, MatmulPrecision precision);

}  // namespace linattn::bench
