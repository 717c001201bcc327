// Helpers shared by the op implementations (not part of the public autograd API).
#pragma once

#include "autograd/variable.h"
#include "core/error.h"
#include "kernels/cpu/elementwise.h"

namespace linattn::ops::detail {

// Inputs must agree on dtype and device; kernels exist on the CPU only for now.
inline void check_inputs(const char* op, std::initializer_list<const Variable*> inputs) {
  const Variable* first = nullptr;
  for (const Variable* v : inputs) {
    if (!v || !v->defined()) continue;
    if (!first) first = v;
    LINATTN_CHECK(v->dtype() == first->dtype(), op, ": dtype mismatch, ", first->value().str(), " vs ",
                  v->value().str());
    LINATTN_CHECK(v->device() == Device::cpu, op, ": no ", device_name(v->device()),
                  " kernel yet; move the tensors to the CPU");
  }
}

// grad(v) += g, for a v that requires a gradient.
inline void accumulate(const Variable& v, const Tensor& g) {
  if (!v.requires_grad()) return;
  const Tensor& dst = v.ensure_grad();
  dispatch_float(dst.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::add_inplace(dst.data<T>(), g.data<T>(), dst.numel());
  });
}

// The gradient buffer of v, or nullptr when v needs none.
template <class T>
T* grad_or_null(const Variable& v) {
  return v.defined() && v.requires_grad() ? v.ensure_grad().template data<T>() : nullptr;
}

template <class T>
const T* data_or_null(const Variable& v) {
  return v.defined() ? v.value().template data<T>() : nullptr;
}

}  // namespace linattn::ops::detail
