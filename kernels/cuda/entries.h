// The CUDA column of the backend table (kernels/backend.cpp): each entry checks the dtype, takes
// the device pointers and sizes from its tensors and launches the kernel of kernels/cuda/ on the
// compute stream. Only entries with a kernel are here. Signatures and shapes: kernels/backend.h.
// Compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include "kernels/backend.h"

namespace linattn::cuda::entry {

using backend::AdamWStep;
using backend::In;
using backend::MixerArgs;

void add(In y, In a, In b);
void add_inplace(In y, In x);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B, double beta, In C);

}  // namespace linattn::cuda::entry
