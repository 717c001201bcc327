// The CPU column of the backend table (kernels/backend.cpp): each entry unpacks its tensors, does
// the dtype dispatch (float32 trains, float64 is what the gradient checks use) and calls the
// kernel of kernels/cpu/. Every entry of kernels/backend.def has one. Signatures and shapes:
// kernels/backend.def.
#pragma once

#include <type_traits>

#include "kernels/backend.h"

namespace linattn::cpu::entry {

using backend::AdamWStep;
using backend::In;
using backend::Ins;
using backend::MixerArgs;

// `void add(In y, In a, In b);` and so on: a function type names the function it declares.
#define LINATTN_ENTRY(name, ...) std::type_identity_t<__VA_ARGS__> name;
#define LINATTN_ENTRY_CPU_ONLY(name, ...) std::type_identity_t<__VA_ARGS__> name;
#include "kernels/backend.def"
#undef LINATTN_ENTRY
#undef LINATTN_ENTRY_CPU_ONLY

}  // namespace linattn::cpu::entry
