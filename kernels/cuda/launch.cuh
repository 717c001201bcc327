// How host code launches a kernel and how a kernel declares its dynamic shared memory, written once
// for both builds of the CUDA backend: under nvcc these are `<<<>>>` and `extern __shared__`; in the
// emulation build (emulation/, LINATTN_CUDA_EMULATION) the .cu files are compiled as C++ and the
// launch is queued on the emulated stream, where every thread of every block runs as a fiber.
//
//   LINATTN_LAUNCH(grid, block, shared_bytes, stream, kernel<T>)(args...);
//   LINATTN_DYNAMIC_SHARED(float, sh);  // float sh[]: the launch's shared_bytes
//
// The kernel comes last so that a template with several arguments needs no parentheses. Included
// only by kernels/cuda/*.cu and *.cuh.
#pragma once

#include <cuda_runtime.h>

#ifdef LINATTN_CUDA_EMULATION
#define LINATTN_LAUNCH(grid, block, shared_bytes, stream, ...) \
  ::cuda_emu::Launcher(#__VA_ARGS__, __VA_ARGS__, grid, block, shared_bytes, stream)
#define LINATTN_DYNAMIC_SHARED(type, name) type* const name = static_cast<type*>(::cuda_emu::dynamic_shared())
#else
#define LINATTN_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define LINATTN_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif
