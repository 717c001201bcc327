// What the host asked of the emulated runtime, counted over every device and host thread since the
// start or the last reset_counters(): the stream operations a training step queues (a GPU pays a
// launch for each) and the times the host read device memory or waited for the device. Tests count a
// step's launches and check that the host never waits in the middle of one (tests/train/step_sync_test.cpp).
// The names of the kernels launched come from a LaunchRecorder (cuda_emulation/device.h).
#pragma once

#include <cstdint>

namespace cuda_emu {

struct Counters {
  int64_t kernels = 0;          // kernel launches queued (past the launch's configuration checks)
  int64_t library_calls = 0;    // cuBLAS products and NCCL collectives queued
  int64_t memsets = 0;          // cudaMemset(Async)
  int64_t host_to_device = 0;   // copies from host memory, queued
  int64_t device_to_device = 0; // copies within device memory, queued
  int64_t device_to_host = 0;   // copies into host memory: the host reads device memory
  int64_t graph_launches = 0;   // cudaGraphLaunch: one operation for all the graph holds
  int64_t host_waits = 0;       // cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, blocking
                                // cudaMemcpy into host memory: the host waits for the device
  // Every operation a GPU's stream would run: what "launches per step" counts.
  int64_t stream_operations() const {
    return kernels + library_calls + memsets + host_to_device + device_to_device + device_to_host + graph_launches;
  }
  Counters operator-(const Counters& o) const {
    return {kernels - o.kernels, library_calls - o.library_calls, memsets - o.memsets,
            host_to_device - o.host_to_device, device_to_device - o.device_to_device,
            device_to_host - o.device_to_host, graph_launches - o.graph_launches, host_waits - o.host_waits};
  }
};

Counters counters();
void reset_counters();

// Counted by the emulation (emulation/*.cpp), not by the project.
enum class Count {
  kernel, library_call, memset, host_to_device, device_to_device, device_to_host, graph_launch, host_wait
};
void count(Count what);

}  // namespace cuda_emu
