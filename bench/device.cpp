// What the `--device cuda` benchmarks share: GPU timing and the reason a GPU is missing.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "bench/bench.h"
#include "core/cuda/runtime.h"
#include "core/memory.h"

namespace linattn::bench {

double cuda_median_ms(const std::function<void()>& run, int reps, int warmup, const std::function<void()>& before) {
  if (kEmulatedCuda) reps = std::min(reps, 3), warmup = std::min(warmup, 1);
  for (int r = 0; r < warmup; ++r) {
    if (before) before();
    run();
  }
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    if (before) before();
    cuda::Event start, stop;
    start.record();
    run();
    stop.record();
    ms.push_back(stop.ms_since(start));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

std::string emulation_note() {
  if (!kEmulatedCuda) return "";
  // Read once, at the first launch: timing the race check's second run would only add noise.
  setenv("LINATTN_EMULATION_CHECK", "off", 0);
  return "emulated: the CUDA emulation on the CPU (docs/cuda-emulation.md): small shapes, median of 3, CPU times, "
         "not GPU times\n";
}

std::string no_gpu_reason() {
  if (cuda_available()) return "";
#ifdef LINATTN_CUDA
  return "no CUDA device here (this build has the CUDA backend)";
#else
  return "no CUDA device here (this build has no CUDA backend: configure with -DLINATTN_CUDA=ON)";
#endif
}

}  // namespace linattn::bench
