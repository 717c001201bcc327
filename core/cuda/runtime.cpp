#include "core/cuda/runtime.h"

#include "core/cuda/stream.h"
#include "core/error.h"

#ifdef LINATTN_CUDA

#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/cuda/check.h"

namespace linattn::cuda {

namespace {

// What the runtime keeps per device. Never destroyed: blocks freed during static destruction at
// exit still find their device, and nothing calls into a CUDA runtime that is shutting down.
struct DeviceState {
  cudaStream_t compute = nullptr, comm = nullptr;
  std::map<size_t, std::vector<void*>> free_blocks;  // bucket size -> cached blocks
  std::unordered_map<void*, size_t> live;            // block -> its bucket size
  MemoryStats stats;
  // CUDA graphs (core/cuda/graph.h). A replay writes the addresses its capture saw, so from the
  // start of a capture until no graph is left, every block live then or handed out during the
  // capture is the graphs': released, it goes to graph_free, which only a capture draws from, and
  // never to free_blocks, so nothing made between two replays lands in memory they use.
  bool capturing = false;
  int graphs = 0;                                    // instantiated graphs alive
  std::unordered_set<void*> graph_owned;
  std::map<size_t, std::vector<void*>> graph_free;  // bucket size -> the graphs' free blocks
};

std::mutex g_mutex;
std::vector<DeviceState*>& devices() {
  static auto* d = new std::vector<DeviceState*>();
  return *d;
}

int current_device() {
  int d = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// The current device's state; call with g_mutex held.
DeviceState& state_locked() {
  const int d = current_device();
  auto& all = devices();
  if (size_t(d) >= all.size()) all.resize(size_t(d) + 1, nullptr);
  if (!all[size_t(d)]) {
    auto* s = new DeviceState();
    LINATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
    LINATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&s->comm, cudaStreamNonBlocking));
    all[size_t(d)] = s;
  }
  return *all[size_t(d)];
}

// The calling thread's device state, cached per host thread so that the streams (asked for at every
// kernel launch) cost neither the lock nor a cudaGetDevice; set_device() drops the cache. Safe
// without the lock: a state is created under g_mutex, its streams set before it is published, and
// it is never destroyed; a thread caches the pointer it got under the lock.
thread_local DeviceState* t_state = nullptr;

DeviceState& current_state() {
  if (!t_state) {
    std::lock_guard<std::mutex> lock(g_mutex);
    t_state = &state_locked();
  }
  return *t_state;
}

cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Frees every cached block of s; call with g_mutex held.
void release_cached(DeviceState& s) {
  if (s.free_blocks.empty()) return;
  // A cached block may still be read by queued work of its last user.
  LINATTN_CUDA_CHECK(cudaStreamSynchronize(s.compute));
  for (auto& [size, blocks] : s.free_blocks)
    for (void* p : blocks) LINATTN_CUDA_CHECK(cudaFree(p));
  s.free_blocks.clear();
  s.stats.cached = 0;
}

}  // namespace

void* compute_stream() { return current_state().compute; }

void* comm_stream() { return current_state().comm; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for the caller to trip over later
    return 0;
  }
  return n;
}

void set_device(int index) {
  LINATTN_CUDA_CHECK(cudaSetDevice(index));
  t_state = nullptr;  // the streams of the new device from the next launch on
}

DeviceInfo device_info() {
  DeviceInfo info;
  info.index = current_device();
  cudaDeviceProp prop{};
  LINATTN_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.index));
  info.name = prop.name;
  info.sm_major = prop.major;
  info.sm_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  LINATTN_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

void synchronize() { LINATTN_CUDA_CHECK(cudaStreamSynchronize(stream())); }

size_t bucket_size(size_t bytes) {
  constexpr size_t kSmallStep = 512, kLargeStep = size_t(2) << 20, kSmallLimit = size_t(1) << 20;
  if (bytes == 0) bytes = 1;
  const size_t step = bytes <= kSmallLimit ? kSmallStep : kLargeStep;
  return (bytes + step - 1) / step * step;
}

namespace {

// A cached block of `size` from `lists`, or null.
void* take_cached(std::map<size_t, std::vector<void*>>& lists, size_t size) {
  auto it = lists.find(size);
  if (it == lists.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  return p;
}

// Once no graph is left or being captured, the graphs' blocks are everyone's again.
void return_graph_blocks(DeviceState& s) {
  if (s.capturing || s.graphs > 0) return;
  for (auto& [size, blocks] : s.graph_free)
    for (void* p : blocks) s.free_blocks[size].push_back(p);
  s.graph_free.clear();
  s.graph_owned.clear();
}

}  // namespace

void* allocate(size_t bytes) {
  const size_t size = bucket_size(bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  void* p = s.capturing ? take_cached(s.graph_free, size) : nullptr;
  if (!p) p = take_cached(s.free_blocks, size);
  if (p) {
    s.stats.cached -= size;
  } else {
    cudaError_t err = cudaMalloc(&p, size);
    // (not while capturing: giving the cache back waits for the stream, which a capture forbids)
    if (err == cudaErrorMemoryAllocation && !s.capturing) {
      cudaGetLastError();  // clear it, give the cache back and try once more
      release_cached(s);
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      LINATTN_FAIL("out of GPU memory: cudaMalloc of ", mib(size), " failed (", cudaGetErrorName(err), "; ",
                   mib(s.stats.in_use), " in use by linattn, ", mib(free_b), " free of ", mib(total_b),
                   "); lower train.micro_batch_size or data.seq_len, or use a smaller model");
    }
    ++s.stats.device_mallocs;
  }
  if (s.capturing) s.graph_owned.insert(p);
  s.live.emplace(p, size);
  s.stats.in_use += size;
  s.stats.peak_in_use = std::max(s.stats.peak_in_use, s.stats.in_use);
  return p;
}

// Called from Storage's destructor: never throws and calls no CUDA function (the block may belong to
// another device than the current one, and the runtime may be shutting down at exit).
void release(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (DeviceState* s : devices()) {
    if (!s) continue;
    auto it = s->live.find(ptr);
    if (it == s->live.end()) continue;
    const size_t size = it->second;
    s->live.erase(it);
    s->stats.in_use -= size;
    s->stats.cached += size;
    (s->graph_owned.count(ptr) ? s->graph_free : s->free_blocks)[size].push_back(ptr);
    return;
  }
  std::fprintf(stderr, "linattn: warning: cuda::release of a pointer the allocator did not hand out\n");
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  if (!s.capturing) release_cached(s);  // it waits for the stream, which a capture forbids
}

void begin_graph_memory() {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  s.capturing = true;
  for (const auto& [p, size] : s.live) s.graph_owned.insert(p);
}

void end_graph_memory(bool graph_made) {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  s.capturing = false;
  if (graph_made) ++s.graphs;
  return_graph_blocks(s);
}

void release_graph_memory() {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  --s.graphs;
  return_graph_blocks(s);
}

MemoryStats memory_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return state_locked().stats;
}

void reset_peak() {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceState& s = state_locked();
  s.stats.peak_in_use = s.stats.in_use;
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  cudaPointerAttributes a{}, b{};
  LINATTN_CUDA_CHECK(cudaPointerGetAttributes(&a, dst));
  LINATTN_CUDA_CHECK(cudaPointerGetAttributes(&b, src));
  LINATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()));
  // Host memory on either side: the host may read or reuse it as soon as we return.
  if (a.type != cudaMemoryTypeDevice || b.type != cudaMemoryTypeDevice) synchronize();
}

void upload_pageable(void* dst, const void* src, size_t bytes) {
  if (bytes) LINATTN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
}

void zero(void* ptr, size_t bytes) {
  if (bytes) LINATTN_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream()));
}

Event::Event() {
  cudaEvent_t e = nullptr;
  LINATTN_CUDA_CHECK(cudaEventCreate(&e));
  event_ = e;
}

Event::~Event() { cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }

void Event::record() { LINATTN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), stream())); }

float Event::ms_since(const Event& start) const {
  LINATTN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  float ms = 0;
  LINATTN_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(event_)));
  return ms;
}

}  // namespace linattn::cuda

#else  // without the CUDA backend: no device, and a clear error for anything that needs one

namespace linattn::cuda {

namespace {
[[noreturn]] void no_backend(const char* what) {
  LINATTN_FAIL(what, ": linattn was built without CUDA (configure with -DLINATTN_CUDA=ON on a machine with nvcc)");
}
}  // namespace

void* compute_stream() { no_backend("the CUDA compute stream"); }
void* comm_stream() { no_backend("the CUDA communication stream"); }
int device_count() { return 0; }
void set_device(int) { no_backend("cuda::set_device"); }
DeviceInfo device_info() { no_backend("the CUDA device"); }
void synchronize() { no_backend("cuda::synchronize"); }
void* allocate(size_t) { no_backend("a CUDA tensor"); }
void release(void*) {}
void empty_cache() {}
void begin_graph_memory() { no_backend("a CUDA graph"); }
void end_graph_memory(bool) {}
void release_graph_memory() {}
MemoryStats memory_stats() { return {}; }
void reset_peak() {}
size_t bucket_size(size_t bytes) { return bytes; }
void copy(void*, const void*, size_t) { no_backend("a copy to or from the GPU"); }
void upload_pageable(void*, const void*, size_t) { no_backend("a copy to the GPU"); }
void zero(void*, size_t) { no_backend("cuda::zero"); }
Event::Event() { no_backend("a CUDA event"); }
Event::~Event() = default;
void Event::record() {}
float Event::ms_since(const Event&) const { return 0; }

}  // namespace linattn::cuda

#endif  // LINATTN_CUDA
