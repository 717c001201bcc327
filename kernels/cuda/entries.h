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

}  // namespace linattn::cuda::entry
