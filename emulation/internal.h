// What the parts of the CUDA emulation share (emulation/*.cpp only; never included by the project):
// the streams' work queues, the device allocations, and the errors that queued work reports.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace cuda_emu {

// The device the calling host thread has selected with cudaSetDevice (0 by default).
int current_device();

// Queues `work` on stream s (nullptr: the legacy default stream of the current device). Nothing runs
// at the call: the stream's work runs in order when something waits for it (a stream or device
// synchronisation, an event it recorded being waited on, a blocking copy), on the waiting thread.
// `what` names the work in error messages ("cublasGemmEx", "ncclAllReduce").
void enqueue(cudaStream_t s, std::string what, std::function<void()> work);

// Whether [p, p + bytes) lies inside one live cudaMalloc allocation (of any device).
bool in_device_memory(const void* p, size_t bytes);

// Reports an execution failure from inside queued work (a kernel, a library call): the next
// synchronising call on the device returns `err`, and cudaGetErrorString of it gives `detail`. The
// detail is also printed to stderr at once.
void fail(cudaError_t err, const std::string& detail);

// Sets the calling thread's last error (what cudaGetLastError returns) with a detail message, and
// returns err: for argument errors found before anything is queued.
cudaError_t reject(cudaError_t err, const std::string& detail);

}  // namespace cuda_emu

namespace cuda_emu {

// The live allocation that [p, p + bytes) lies in (p may also be its one-past-the-end address when
// bytes is 0); false when there is none.
struct Span {
  char* base = nullptr;
  size_t size = 0;
  int device = 0;
};
bool find_allocation(const void* p, size_t bytes, Span* out);

// The dynamic shared memory a launch of `kernel` may use: 48 KiB unless cudaFuncSetAttribute raised it.
size_t max_dynamic_shared(const void* kernel);

// The H100's limits that the emulated devices keep.
constexpr size_t kDefaultDynamicShared = 48 * 1024;
constexpr size_t kMaxDynamicSharedOptin = 227 * 1024;

}  // namespace cuda_emu
