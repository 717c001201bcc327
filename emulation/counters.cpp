// The emulated runtime's counters (cuda_emulation/counters.h): relaxed atomics, so that counting
// costs no lock on the paths it counts.
#include "cuda_emulation/counters.h"

#include <atomic>

namespace cuda_emu {

namespace {
constexpr int kKinds = int(Count::host_wait) + 1;
std::atomic<int64_t> g_counts[kKinds];
}  // namespace

void count(Count what) { g_counts[int(what)].fetch_add(1, std::memory_order_relaxed); }

Counters counters() {
  auto get = [](Count c) { return g_counts[int(c)].load(std::memory_order_relaxed); };
  return {get(Count::kernel),           get(Count::library_call),     get(Count::memset),
          get(Count::host_to_device),   get(Count::device_to_device), get(Count::device_to_host),
          get(Count::graph_launch),     get(Count::host_wait)};
}

void reset_counters() {
  for (auto& c : g_counts) c.store(0, std::memory_order_relaxed);
}

}  // namespace cuda_emu
