// How host code launches a kernel and how a kernel declares its dynamic shared memory, written once
// for both builds of the CUDA backend: under nvcc these are `<<<>>>` and `extern __shared__`; in the
// emulation build (emulation/, LINATTN_CUDA_EMULATION) the .cu files are compiled as C++ and the
// launch is queued on the emulated stream, where every thread of every block runs as a fiber.
//
//   LINATTN_LAUNCH(grid, block, shared_bytes, stream, kernel<T>)(args...);
//   LINATTN_LAUNCH_PLAN(plan, stream, kernel<T>)(args...);  // a LaunchPlan's geometry (launch_plan.h)
//   LINATTN_DYNAMIC_SHARED(float, sh);  // float sh[]: the launch's shared_bytes
//
// The kernel comes last so that a template with several arguments needs no parentheses. Included
// only by kernels/cuda/*.cu and *.cuh.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/launch_plan.h"

namespace linattn::cuda {

inline dim3 to_dim3(const Dim& d) { return dim3(unsigned(d.x), unsigned(d.y), unsigned(d.z)); }

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
