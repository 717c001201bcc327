// The emulated CUDA runtime: devices, tracked allocations, copies, and streams whose work runs only
// when something waits for it, so that a missing synchronisation reads stale data here as it would
// on a GPU. Kernels themselves run in emulation/device.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_emulation/counters.h"
#include "emulation/internal.h"

struct CUstream_st {
  int device = 0;
  unsigned flags = 0;
  bool legacy = false;
  struct Item {
    std::string what;
    std::function<void()> run;
  };
  std::deque<Item> queue;
  uint64_t submitted = 0, done = 0;  // items queued and run since creation
  bool draining = false;             // a thread is running this stream's front item
  // Between cudaStreamBeginCapture and cudaStreamEndCapture: the work queued is recorded here, not
  // run; `invalidated` says why the capture failed ("" while it is valid).
  std::unique_ptr<std::vector<Item>> capture;
  std::string invalidated;
};

struct CUgraph_st {
  int device = 0;
  std::vector<CUstream_st::Item> items;
};

struct CUgraphExec_st {
  int device = 0;
  std::shared_ptr<const std::vector<CUstream_st::Item>> items;  // shared with the launches still queued
};

struct CUevent_st {
  unsigned flags = 0;
  CUstream_st* stream = nullptr;  // where it was last recorded
  uint64_t position = 0;          // the stream's item count at the record
  bool recorded = false;
  std::chrono::steady_clock::time_point when{};  // when the stream reached it
};

namespace cuda_emu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kDeviceMemory = size_t(80) << 30;
constexpr unsigned char kPoison = 0xFF;  // freed and fresh device memory: every float a NaN

struct Allocation {
  size_t size;
  int device;
};

struct Device {
  CUstream_st legacy;
  std::vector<CUstream_st*> streams;  // created ones, for device synchronisation
  size_t in_use = 0;
  cudaError_t error = cudaSuccess;  // an execution error not yet returned
  std::string error_detail;
};

std::mutex g_mutex;
std::condition_variable g_stream_done;
std::map<uintptr_t, Allocation> g_allocations;  // by base address
std::unordered_map<const void*, size_t> g_max_shared;

int device_count_setting() {
  static const int n = [] {
    const char* s = std::getenv("LINATTN_EMULATED_GPUS");
    int v = s ? std::atoi(s) : 4;
    return v < 0 ? 0 : v;
  }();
  return n;
}

std::vector<Device>& devices() {
  static auto* all = [] {
    auto* d = new std::vector<Device>(size_t(device_count_setting()));
    for (size_t i = 0; i < d->size(); ++i) {
      (*d)[i].legacy.device = int(i);
      (*d)[i].legacy.legacy = true;
    }
    return d;
  }();
  return *all;
}

thread_local int t_device = 0;
thread_local int t_work_device = -1;  // the device whose stream work this thread is running
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local cudaError_t t_detail_error = cudaSuccess;  // the error t_detail describes
thread_local std::string t_detail;

const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* error_text(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}

// Sets the calling thread's last error; every runtime call returns through here.
cudaError_t note(cudaError_t err) {
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// g_mutex held.
const Allocation* allocation_at(const void* p, size_t bytes, uintptr_t* base) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_allocations.upper_bound(a);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  if (a < it->first || a + bytes > it->first + it->second.size) return nullptr;
  if (bytes == 0 && a > it->first + it->second.size) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

bool valid_device(int d) { return d >= 0 && d < int(devices().size()); }

Device& current() {
  if (!valid_device(t_device)) {
    std::fprintf(stderr, "linattn CUDA emulation: no emulated device %d (LINATTN_EMULATED_GPUS=%d)\n", t_device,
                 device_count_setting());
    std::abort();
  }
  return devices()[size_t(t_device)];
}

CUstream_st* resolve(cudaStream_t s) { return s ? s : &current().legacy; }

// Runs stream s's items until `upto` of them have run (or all, upto = UINT64_MAX). Items run on the
// calling thread without the lock held (a kernel, a library call, a wait for another stream).
void drain(CUstream_st* s, uint64_t upto) {
  std::unique_lock<std::mutex> lock(g_mutex);
  for (;;) {
    if (s->done >= upto || s->done == s->submitted) return;
    if (s->draining) {
      g_stream_done.wait(lock);
      continue;
    }
    s->draining = true;
    std::function<void()> run = std::move(s->queue.front().run);
    lock.unlock();
    const int outer = t_work_device;
    t_work_device = s->device;
    run();
    t_work_device = outer;
    lock.lock();
    s->queue.pop_front();
    ++s->done;
    s->draining = false;
    g_stream_done.notify_all();
  }
}

void drain_device(int d) {
  Device& dev = devices()[size_t(d)];
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    all = dev.streams;
  }
  all.push_back(&dev.legacy);
  // Work on one stream may wait for another's; repeat until nothing is left anywhere.
  for (bool again = true; again;) {
    for (CUstream_st* s : all) drain(s, UINT64_MAX);
    std::lock_guard<std::mutex> lock(g_mutex);
    again = false;
    for (CUstream_st* s : all) again |= s->done != s->submitted;
  }
}

// The execution error of device d not yet returned, returned once (and cleared).
cudaError_t take_error(int d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Device& dev = devices()[size_t(d)];
  const cudaError_t err = dev.error;
  if (err != cudaSuccess) {
    t_detail_error = err;
    t_detail = dev.error_detail;
    dev.error = cudaSuccess;
    dev.error_detail.clear();
  }
  return note(err);
}

void queue(CUstream_st* s, std::string what, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (s->capture) {  // recorded for the graph; dropped once the capture is invalid
    if (s->invalidated.empty()) s->capture->push_back({std::move(what), std::move(work)});
    return;
  }
  Device& dev = devices()[size_t(s->device)];
  // The legacy default stream waits for the work queued before on the blocking streams, and they
  // for the legacy stream's; non-blocking streams do not synchronise with it.
  if (!(s->flags & cudaStreamNonBlocking)) {
    std::vector<std::pair<CUstream_st*, uint64_t>> before;
    if (s->legacy) {
      for (CUstream_st* o : dev.streams)
        if (!(o->flags & cudaStreamNonBlocking)) before.emplace_back(o, o->submitted);
    } else {
      before.emplace_back(&dev.legacy, dev.legacy.submitted);
    }
    if (!before.empty()) {
      work = [before = std::move(before), inner = std::move(work)] {
        for (auto& [o, n] : before) drain(o, n);
        inner();
      };
    }
  }
  s->queue.push_back({std::move(what), std::move(work)});
  ++s->submitted;
}

bool is_stream(cudaStream_t s) {
  if (!s) return true;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (Device& d : devices())
    if (std::find(d.streams.begin(), d.streams.end(), s) != d.streams.end()) return true;
  return false;
}

bool capturing(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return s && s->capture != nullptr;
}

// Whether a stream of device d is capturing.
bool device_capturing(int d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (CUstream_st* s : devices()[size_t(d)].streams)
    if (s->capture) return true;
  return false;
}

// Refuses `call` on a capturing stream (or, with s null, on device d while one of its streams
// captures), as CUDA does: the capture is invalidated and the call fails.
cudaError_t refuse_capture(const std::string& call, CUstream_st* s, int d, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const std::string reason = call + " " + why;
    if (s) {
      if (s->invalidated.empty()) s->invalidated = reason;
    } else {
      for (CUstream_st* o : devices()[size_t(d)].streams)
        if (o->capture && o->invalidated.empty()) o->invalidated = reason;
    }
  }
  return reject(cudaErrorStreamCaptureUnsupported, call + " " + why + " while a stream is capturing a graph: the capture is invalidated (" +
                           "queue it before cudaStreamBeginCapture or after cudaStreamEndCapture)");
}

}  // namespace

// ---- internal.h ----

int current_device() { return t_device; }

void enqueue(cudaStream_t s, std::string what, std::function<void()> work) {
  queue(resolve(s), std::move(what), std::move(work));
}

bool in_device_memory(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return p && allocation_at(p, bytes, nullptr) != nullptr;
}

bool find_allocation(const void* p, size_t bytes, Span* out) {
  std::lock_guard<std::mutex> lock(g_mutex);
  uintptr_t base = 0;
  const Allocation* a = p ? allocation_at(p, bytes, &base) : nullptr;
  if (!a) return false;
  *out = Span{reinterpret_cast<char*>(base), a->size, a->device};
  return true;
}

void fail(cudaError_t err, const std::string& detail) {
  std::fprintf(stderr, "linattn CUDA emulation: %s: %s\n", error_name(err), detail.c_str());
  std::lock_guard<std::mutex> lock(g_mutex);
  Device& dev = t_work_device >= 0 ? devices()[size_t(t_work_device)] : current();
  if (dev.error == cudaSuccess) {
    dev.error = err;
    dev.error_detail = detail;
  }
}

cudaError_t reject(cudaError_t err, const std::string& detail) {
  t_detail_error = err;
  t_detail = detail;
  return note(err);
}

size_t max_dynamic_shared(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_max_shared.find(kernel);
  return it == g_max_shared.end() ? kDefaultDynamicShared : it->second;
}

cudaError_t set_function_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return reject(cudaErrorInvalidValue, "cudaFuncSetAttribute: the emulation knows only "
                                         "cudaFuncAttributeMaxDynamicSharedMemorySize");
  if (value < 0 || size_t(value) > kMaxDynamicSharedOptin)
    return reject(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                             " bytes of dynamic shared memory: the H100 allows at most " +
                                             std::to_string(kMaxDynamicSharedOptin) + " per block");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_max_shared[kernel] = size_t(value);
  return cudaSuccess;
}

}  // namespace cuda_emu

using namespace cuda_emu;

// ---- errors ----

const char* cudaGetErrorName(cudaError_t err) { return error_name(err); }

const char* cudaGetErrorString(cudaError_t err) {
  if (err != cudaSuccess && err == t_detail_error && !t_detail.empty()) return t_detail.c_str();
  return error_text(err);
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return t_last_error; }

// ---- devices ----

cudaError_t cudaGetDeviceCount(int* count) {
  *count = int(devices().size());
  return *count ? cudaSuccess : reject(cudaErrorNoDevice, "no emulated device (LINATTN_EMULATED_GPUS=0)");
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device))
    return reject(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) + "): the emulation has " +
                                              std::to_string(devices().size()) +
                                              " devices (set LINATTN_EMULATED_GPUS for more)");
  t_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = t_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (!valid_device(device)) return reject(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no such device");
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "linattn CUDA emulation (H100 limits)");
  p->totalGlobalMem = kDeviceMemory;
  p->sharedMemPerBlock = kDefaultDynamicShared;
  p->sharedMemPerBlockOptin = kMaxDynamicSharedOptin;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->major = 9, p->minor = 0;
  p->multiProcessorCount = 132;
  p->maxThreadsPerMultiProcessor = 2048;
  p->l2CacheSize = 50 << 20;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (cudaError_t e = cudaGetDeviceProperties(&p, device)) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(p.sharedMemPerBlock); return cudaSuccess;
    case cudaDevAttrWarpSize: *value = p.warpSize; return cudaSuccess;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); return cudaSuccess;
  }
  return reject(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute " + std::to_string(int(attr)) +
                                           " is not emulated");
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *total = kDeviceMemory;
  *free_bytes = kDeviceMemory - current().in_use;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (device_capturing(t_device)) return refuse_capture("cudaDeviceSynchronize", nullptr, t_device, "waits for the device");
  count(Count::host_wait);
  drain_device(t_device);
  return take_error(t_device);
}

cudaError_t cudaDeviceReset() {
  drain_device(t_device);
  take_error(t_device);
  return cudaSuccess;
}

// ---- memory ----

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = nullptr;
  const size_t size = bytes ? bytes : 1;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (current().in_use + size > kDeviceMemory)
      return reject(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) +
                                                   " bytes: more than the emulated device's 80 GiB");
  }
  // Aligned as cudaMalloc's (256 bytes), and poisoned: a kernel that reads memory nobody wrote
  // reads NaNs.
  void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p) return reject(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) + " bytes: host out of memory");
  std::memset(p, kPoison, size);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{size, t_device};
  current().in_use += size;
  *ptr = p;
  return cudaSuccess;
}

namespace {

cudaError_t release(void* ptr, const char* call) {
  if (!ptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_allocations.end())
    return reject(cudaErrorInvalidValue, std::string(call) + "(" + hex(ptr) +
                                             "): not the start of a live cudaMalloc allocation (freed twice, or a "
                                             "host pointer)");
  std::memset(ptr, kPoison, it->second.size);
  devices()[size_t(it->second.device)].in_use -= it->second.size;
  g_allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (device_capturing(t_device)) return refuse_capture("cudaFree", nullptr, t_device, "synchronises the device");
  drain_device(t_device);  // cudaFree synchronises the device
  if (cudaError_t e = take_error(t_device)) return e;
  return note(release(ptr, "cudaFree"));
}

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaMallocAsync: not a stream");
  if (capturing(stream)) return refuse_capture("cudaMallocAsync", stream, 0, "(stream-ordered allocation is not emulated in graphs)");
  return cudaMalloc(ptr, bytes);
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaFreeAsync: not a stream");
  if (capturing(stream)) return refuse_capture("cudaFreeAsync", stream, 0, "(stream-ordered allocation is not emulated in graphs)");
  if (!ptr) return cudaSuccess;
  if (!in_device_memory(ptr, 0))
    return reject(cudaErrorInvalidValue, "cudaFreeAsync(" + hex(ptr) + "): not a live cudaMalloc allocation");
  enqueue(stream, "cudaFreeAsync", [ptr] {
    if (release(ptr, "cudaFreeAsync") != cudaSuccess) fail(cudaErrorInvalidValue, "cudaFreeAsync of freed memory");
  });
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* ptr) {
  *a = cudaPointerAttributes{};
  Span s;
  if (find_allocation(ptr, 0, &s)) {
    a->type = cudaMemoryTypeDevice;
    a->device = s.device;
    a->devicePointer = const_cast<void*>(ptr);
  } else {
    a->type = cudaMemoryTypeUnregistered;
    a->device = -2;
    a->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

namespace {

const char* kind_name(cudaMemcpyKind k) {
  switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    case cudaMemcpyDefault: return "cudaMemcpyDefault";
  }
  return "an unknown cudaMemcpyKind";
}

// Where a pointer of a copy lies: device memory (the whole range inside one allocation) or host.
// A range that starts in an allocation and runs past its end is an error.
cudaError_t locate(const char* call, const char* which, const void* p, size_t bytes, bool* device) {
  Span s;
  *device = find_allocation(p, bytes, &s);
  if (!*device && find_allocation(p, 0, &s))
    return reject(cudaErrorInvalidValue, std::string(call) + ": the " + which + " range of " + std::to_string(bytes) +
                                             " bytes at " + hex(p) + " runs past the end of its " +
                                             std::to_string(s.size) + "-byte device allocation");
  return cudaSuccess;
}

// Checks `kind` against where the pointers are; returns the direction.
cudaError_t direction(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, bool* dst_dev,
                      bool* src_dev) {
  if (cudaError_t e = locate(call, "destination", dst, bytes, dst_dev)) return e;
  if (cudaError_t e = locate(call, "source", src, bytes, src_dev)) return e;
  if (kind == cudaMemcpyDefault) return cudaSuccess;
  if (int(kind) < 0 || int(kind) > 4) return reject(cudaErrorInvalidMemcpyDirection, std::string(call) + ": invalid kind");
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (want_dst != *dst_dev || want_src != *src_dev)
    return reject(cudaErrorInvalidValue,
                  std::string(call) + " with " + kind_name(kind) + ": the destination " + hex(dst) + " is " +
                      (*dst_dev ? "device" : "host") + " memory and the source " + hex(src) + " is " +
                      (*src_dev ? "device" : "host") + " memory");
  return cudaSuccess;
}

// The host bytes of a host-to-device copy, staged at the call as the driver stages pageable memory.
std::shared_ptr<std::vector<unsigned char>> stage(const void* src, size_t bytes) {
  auto s = std::make_shared<std::vector<unsigned char>>(bytes);
  std::memcpy(s->data(), src, bytes);
  return s;
}

cudaError_t copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                 bool blocking) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, std::string(call) + ": not a stream");
  bool dst_dev = false, src_dev = false;
  if (cudaError_t e = direction(call, dst, src, bytes, kind, &dst_dev, &src_dev)) return e;
  if (bytes == 0) return cudaSuccess;
  if (!dst_dev && !src_dev) {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if ((!dst_dev || !src_dev) && capturing(stream))
    return refuse_capture(std::string(call) + (src_dev ? " to host memory" : " from host memory"), stream, 0,
                          "on the capturing stream (a graph would read or write the host memory at each replay)");
  count(!src_dev ? Count::host_to_device : dst_dev ? Count::device_to_device : Count::device_to_host);
  if (!src_dev) {  // host to device: the source is read now, the device written when the stream runs
    auto staged = stage(src, bytes);
    enqueue(stream, call, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  enqueue(stream, call, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  if (blocking && !dst_dev) {  // to the host, cudaMemcpy returns when the copy is done
    count(Count::host_wait);
    drain(resolve(stream), UINT64_MAX);
    return take_error(t_device);
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return note(copy("cudaMemcpy", dst, src, bytes, kind, nullptr, true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return note(copy("cudaMemcpyAsync", dst, src, bytes, kind, stream, false));
}

namespace {
cudaError_t fill(const char* call, void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, std::string(call) + ": not a stream");
  if (bytes == 0) return cudaSuccess;
  if (!in_device_memory(ptr, bytes))
    return reject(cudaErrorInvalidValue, std::string(call) + "(" + hex(ptr) + ", " + std::to_string(bytes) +
                                             " bytes): not inside one device allocation");
  count(Count::memset);
  enqueue(stream, call, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) { return note(fill("cudaMemset", ptr, value, bytes, nullptr)); }

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  return note(fill("cudaMemsetAsync", ptr, value, bytes, stream));
}

// ---- streams and events ----

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  auto* s = new CUstream_st();
  s->device = t_device;
  s->flags = flags;
  std::lock_guard<std::mutex> lock(g_mutex);
  current().streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a stream");
  if (capturing(stream)) return refuse_capture("cudaStreamDestroy", stream, 0, "of the capturing stream");
  drain(stream, UINT64_MAX);  // CUDA lets queued work finish
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& all = devices()[size_t(stream->device)].streams;
  all.erase(std::find(all.begin(), all.end(), stream));
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: not a stream");
  CUstream_st* s = resolve(stream);
  if (capturing(s)) return refuse_capture("cudaStreamSynchronize", s, 0, "waits for the capturing stream");
  count(Count::host_wait);
  drain(s, UINT64_MAX);
  return take_error(s->device);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (!event || !is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: bad handle");
  if (capturing(stream)) return refuse_capture("cudaStreamWaitEvent", stream, 0, "(the emulation captures one stream)");
  CUstream_st* on;
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!event->recorded) return cudaSuccess;  // waiting for a never-recorded event is a no-op
    on = event->stream, position = event->position;
  }
  enqueue(stream, "cudaStreamWaitEvent", [on, position] { drain(on, position); });
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st();
  (*event)->flags = flags;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return reject(cudaErrorInvalidResourceHandle, "cudaEventDestroy: null event");
  if (event->recorded) drain(event->stream, event->position);  // its record may still be queued
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event || !is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaEventRecord: bad handle");
  if (capturing(stream)) return refuse_capture("cudaEventRecord", stream, 0, "(the emulation captures one stream)");
  CUstream_st* s = resolve(stream);
  enqueue(stream, "cudaEventRecord", [event] { event->when = Clock::now(); });
  std::lock_guard<std::mutex> lock(g_mutex);
  event->stream = s;
  event->position = s->submitted;  // the record itself included
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return reject(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: null event");
  if (!event->recorded) return cudaSuccess;
  count(Count::host_wait);
  drain(event->stream, event->position);
  return take_error(event->stream->device);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start || !end) return reject(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: null event");
  if ((start->flags | end->flags) & cudaEventDisableTiming)
    return reject(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
  std::lock_guard<std::mutex> lock(g_mutex);
  const bool ran = start->recorded && end->recorded && start->stream->done >= start->position &&
                   end->stream->done >= end->position;
  if (!ran) return reject(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed (synchronise on it first)");
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

// ---- graphs ----

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (!stream) return reject(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: the legacy default stream cannot be captured");
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture: not a stream");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (stream->capture) return reject(cudaErrorInvalidValue, "cudaStreamBeginCapture: the stream is capturing already");
  stream->capture = std::make_unique<std::vector<CUstream_st::Item>>();
  stream->invalidated.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  if (!stream || !is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamEndCapture: not a stream");
  std::unique_ptr<std::vector<CUstream_st::Item>> items;
  std::string invalidated;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!stream->capture) return reject(cudaErrorInvalidValue, "cudaStreamEndCapture: the stream is not capturing");
    items = std::move(stream->capture);
    invalidated = std::move(stream->invalidated);
    stream->invalidated.clear();
  }
  if (!invalidated.empty())
    return reject(cudaErrorStreamCaptureInvalidated, "cudaStreamEndCapture: the capture was invalidated: " + invalidated);
  *graph = new CUgraph_st{stream->device, std::move(*items)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing: not a stream");
  std::lock_guard<std::mutex> lock(g_mutex);
  CUstream_st* s = resolve(stream);
  *status = !s->capture ? cudaStreamCaptureStatusNone
            : s->invalidated.empty() ? cudaStreamCaptureStatusActive
                                     : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!graph) return reject(cudaErrorInvalidValue, "cudaGraphGetNodes: null graph");
  if (nodes) return reject(cudaErrorInvalidValue, "cudaGraphGetNodes: the emulation gives the count only (pass nodes = null)");
  *count = graph->items.size();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!graph) return reject(cudaErrorInvalidValue, "cudaGraphInstantiate: null graph");
  *exec = new CUgraphExec_st{graph->device, std::make_shared<const std::vector<CUstream_st::Item>>(graph->items)};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return reject(cudaErrorInvalidValue, "cudaGraphLaunch: null graph");
  if (!is_stream(stream)) return reject(cudaErrorInvalidResourceHandle, "cudaGraphLaunch: not a stream");
  if (capturing(stream)) return refuse_capture("cudaGraphLaunch", stream, 0, "(graphs in graphs are not emulated)");
  if (resolve(stream)->device != exec->device)
    return reject(cudaErrorInvalidValue, "cudaGraphLaunch: the graph was captured on device " +
                                             std::to_string(exec->device) + ", the stream is on device " +
                                             std::to_string(resolve(stream)->device));
  count(Count::graph_launch);
  // Its operations in the order they were captured, as one operation of the stream.
  enqueue(stream, "cudaGraphLaunch", [items = exec->items] {
    for (const CUstream_st::Item& item : *items) item.run();
  });
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // a launch still queued keeps the operations
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
