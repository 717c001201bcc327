// How host code launches a kernel and how a kernel declares its dynamic shared memory, written once
// for both builds of the CUDA backend: under nvcc these are `<<<>>>` and `extern __shared__`; in the
// emulation build (emulation/, LINATTN_CUDA_EMULATION) the .cu files are compiled as C++ and the
// launch is queued on the emulated stream, where every thread of every block runs as a fiber.
//
//   LINATTN_LAUNCH(grid, block, shared_bytes, stream, kernel<T>)(args...);
//   LINATTN_LAUNCH_PLAN(plan, stream, kernel<T>)(args...);  // a LaunchPlan's geometry (launch_plan.h)
//   LINATTN_DYNAMIC_SHARED(float, sh);  // float sh[]: the launch's shared_bytes
//   opt_in_dynamic_shared(kernel, bytes);  // more than 48 KiB of it: opted in once, remembered
//
// The kernel comes last so that a template with several arguments needs no parentheses. Included
// only by kernels/cuda/*.cu and *.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"
#include "kernels/cuda/launch_plan.h"

namespace linattn::cuda {

inline dim3 to_dim3(const Dim& d) { return dim3(unsigned(d.x), unsigned(d.y), unsigned(d.z)); }

// Opts `kernel` in to `bytes` of dynamic shared memory on the calling thread's device
// (cudaFuncSetAttribute) unless the device's per-block limit (cudaDevAttrMaxSharedMemoryPerBlockOptin)
// is below it; returns the limit. What the runtime said is remembered per host thread, device and
// kernel, so a launch asks again only for more bytes than before: no CUDA call and no lock per launch.
// (A thread-local cache needs no lock; setting an attribute a second time from another thread is
// harmless.)
inline int opt_in_dynamic_shared(const void* kernel, int64_t bytes) {
  struct Known {
    int limit = -1;
    int64_t opted = 0;  // the most bytes set so far
  };
  // keyed by (the device's compute stream, the kernel)
  thread_local std::unordered_map<const void*, std::unordered_map<const void*, Known>> known;
  Known& k = known[compute_stream()][kernel];
  if (k.limit < 0) {
    int device = 0;
    LINATTN_CUDA_CHECK(cudaGetDevice(&device));
    LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&k.limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  }
  if (bytes > k.opted && bytes <= k.limit) {
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    k.opted = bytes;
  }
  return k.limit;
}

template <class Kernel>
int opt_in_dynamic_shared(Kernel* kernel, int64_t bytes) {
  return opt_in_dynamic_shared(reinterpret_cast<const void*>(kernel), bytes);
}

}  // namespace linattn::cuda

#ifdef LINATTN_CUDA_EMULATION
#define LINATTN_LAUNCH(grid, block, shared_bytes, stream, ...) \
  ::cuda_emu::Launcher(#__VA_ARGS__, __VA_ARGS__, grid, block, shared_bytes, stream)
#define LINATTN_DYNAMIC_SHARED(type, name) type* const name = static_cast<type*>(::cuda_emu::dynamic_shared())
#else
#define LINATTN_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define LINATTN_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

#define LINATTN_LAUNCH_PLAN(plan, stream, ...)                                                       \
  LINATTN_LAUNCH(::linattn::cuda::to_dim3((plan).grid), ::linattn::cuda::to_dim3((plan).block), \
                 size_t((plan).shared_bytes), stream, __VA_ARGS__)
