// How a CPU kernel reads a value that a tape node may keep in bf16 (autograd/saved.h) and writes a
// product's bf16 operand: load gives an element in the kernel's arithmetic type (bf16 widened
// exactly to float), store rounds to the element's type (bf16: to nearest even, core/dtype.h).
#pragma once

#include "core/dtype.h"

namespace linattn::cpu {

template <class T>
inline T load(T x) {
  return x;
}
inline float load(bfloat16 x) { return to_float(x); }

template <class T>
inline void store(T& y, T v) {
  y = v;
}
inline void store(bfloat16& y, float v) { y = from_float(v); }

}  // namespace linattn::cpu
