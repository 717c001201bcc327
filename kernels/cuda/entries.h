// The CUDA column of the backend table (kernels/backend.cpp): each entry checks the dtype, takes
// the device pointers and sizes from its tensors and launches the kernel of kernels/cuda/ on the
// compute stream. Declared and defined (in entries.cpp) for the entries kernels/backend.def writes
// with LINATTN_ENTRY; the table's CUDA column of the LINATTN_ENTRY_CPU_ONLY ones is nullptr.
// Signatures and shapes: kernels/backend.def. Compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <type_traits>

#include "kernels/backend.h"

namespace linattn::cuda::entry {

using backend::AdamWStep;
using backend::In;
using backend::Ins;
using backend::MixerArgs;

// `void add(In y, In a, In b);` and so on: a function type names the function it declares.
#define LINATTN_ENTRY(name, ...) std::type_identity_t<__VA_ARGS__> name;
#define LINATTN_ENTRY_CPU_ONLY(name, ...)
#include "kernels/backend.def"
#undef LINATTN_ENTRY
#undef LINATTN_ENTRY_CPU_ONLY

}  // namespace linattn::cuda::entry
