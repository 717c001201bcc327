// The CUDA device runtime: the device's description, a caching allocator over cudaMalloc, copies
// and fills on the compute stream, and timing events. Declared without CUDA types, so any layer may
// include it; without the CUDA backend device_count() is 0 and everything else throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace linattn::cuda {

int device_count();  // 0 without a GPU, without a driver, or without the CUDA backend
// Makes GPU `index` the calling host thread's device (cudaSetDevice): its allocations, streams and
// kernels go there from then on. The device is per host thread, as in CUDA. Change it only through
// here: the streams are cached per host thread (compute_stream() takes no lock) and this drops them.
void set_device(int index);

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0, multiprocessors = 0;
  size_t free_bytes = 0, total_bytes = 0;  // cudaMemGetInfo
};
DeviceInfo device_info();  // the current device

// Blocks the host until the compute stream has run everything queued on it.
void synchronize();

// --- the caching allocator ---
// Device memory for Storage: cudaMalloc'd blocks (never managed memory) whose sizes are rounded up
// to a bucket (512 B steps up to 1 MiB, 2 MiB steps above); a freed block goes to its bucket's free
// list and the next request of that bucket reuses it without calling cudaMalloc. Reuse is safe
// because every kernel and copy that touches the memory runs on the compute stream, in order. When
// cudaMalloc fails, the cached blocks are released and it is tried once more. Thread-safe.
void* allocate(size_t bytes);
void release(void* ptr);
// Returns every cached (free) block to the driver (not the blocks kept for CUDA graphs, below).
void empty_cache();

// For cuda::Graph (core/cuda/graph.h), on the current device: from begin_graph_memory (a capture
// starts) until end_graph_memory (it ends; graph_made: a graph was instantiated from it) and then
// until release_graph_memory has been called once per graph made, the blocks live at the start or
// allocated during a capture stay the graphs' when released: only a capture reuses them.
void begin_graph_memory();
void end_graph_memory(bool graph_made);
void release_graph_memory();

struct MemoryStats {
  size_t in_use = 0;       // bytes of live blocks (rounded sizes)
  size_t peak_in_use = 0;  // the most in_use has been since the start (or reset_peak)
  size_t cached = 0;       // bytes of free blocks kept for reuse
  int64_t device_mallocs = 0;  // cudaMalloc calls so far
};
MemoryStats memory_stats();
void reset_peak();
// The bucket a request of `bytes` is served from (exposed for the tests).
size_t bucket_size(size_t bytes);

// --- copies and fills, on the compute stream ---
// Any direction (host or device on either side). Returns once dst holds the data when dst or src is
// host memory; device-to-device copies are queued.
void copy(void* dst, const void* src, size_t bytes);
// Host to device from pageable host memory (not cudaHostAlloc'ed), queued without waiting: CUDA
// stages pageable memory before the call returns, so src may change or go at once.
void upload_pageable(void* dst, const void* src, size_t bytes);
void zero(void* ptr, size_t bytes);  // queued

// --- events, for timing on the compute stream ---
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record();  // on the compute stream
  // Milliseconds from `start` to this event; waits for this event first.
  float ms_since(const Event& start) const;

 private:
  void* event_ = nullptr;
};

}  // namespace linattn::cuda
