// Error checks for CUDA runtime calls and kernel launches. Include only from files compiled with
// the CUDA backend (kernels/cuda/*.cu, and .cpp files inside #ifdef LINATTN_CUDA).
// The message names the call, CUDA's error name and text; Error::where() holds our file:line.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define LINATTN_CUDA_CHECK(call)                                                                 \
  do {                                                                                           \
    cudaError_t linattn_cuda_err_ = (call);                                                      \
    LINATTN_CHECK(linattn_cuda_err_ == cudaSuccess, #call, " failed: ",                          \
                  cudaGetErrorName(linattn_cuda_err_), " (", cudaGetErrorString(linattn_cuda_err_), ")"); \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once (execution errors surface
// at the next synchronizing call).
#define LINATTN_CUDA_CHECK_LAUNCH() LINATTN_CUDA_CHECK(cudaGetLastError())
