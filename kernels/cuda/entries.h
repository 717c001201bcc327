// The CUDA column of the backend table (kernels/backend.cpp): each entry checks the dtype, takes
// the device pointers and sizes from its tensors and launches the kernel of kernels/cuda/ on the
// compute stream. Declared for every entry of kernels/backend.def; defined (in entries.cpp) for
// those the table gives a CUDA kernel, the others' CUDA column being nullptr. Signatures and
// shapes: kernels/backend.def. Compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <type_traits>

#include "kernels/backend.h"

namespace linattn::cuda::entry {

using backend::AdamWStep;
using backend::In;
using backend::MixerArgs;

// `void add(In y, In a, In b);` and so on: a function type names the function it declares.
#define LINATTN_ENTRY(name, ...) std::type_identity_t<__VA_ARGS__> name;
#include "kernels/backend.def"
#undef LINATTN_ENTRY

}  // namespace linattn::cuda::entry
