// Helpers shared by the op implementations (not part of the public autograd API).
#pragma once

#include "autograd/variable.h"
#include "core/error.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace linattn::ops::detail {

// Inputs must agree on dtype and device. Ops with a CUDA kernel pass cuda_ok; the others run on the CPU only.
inline void check_inputs(const char* op, std::initializer_list<const Variable*> inputs, bool cuda_ok = false) {
  const Variable* first = nullptr;
  for (const Variable* v : inputs) {
    if (!v || !v->defined()) continue;
    if (!first) first = v;
    LINATTN_CHECK(v->dtype() == first->dtype(), op, ": dtype mismatch, ", first->value().str(), " vs ",
                  v->value().str());
    LINATTN_CHECK(v->device() == first->device(), op, ": device mismatch, ", device_name(first->device()), " vs ",
                  device_name(v->device()));
    LINATTN_CHECK(v->device() == Device::cpu || cuda_ok, op, ": no ", device_name(v->device()),
                  " kernel yet; move the tensors to the CPU");
  }
}

// grad(v) += g, for a v that requires a gradient.
inline void accumulate(const Variable& v, const Tensor& g) {
  if (!v.requires_grad()) return;
  const Tensor& dst = v.ensure_grad();
  if (dst.device() == Device::cuda) {
    LINATTN_CHECK(dst.dtype() == DType::f32, "CUDA kernels are float32 only, got ", dst.str());
    cuda::add_inplace(dst.data<float>(), g.data<float>(), dst.numel());
    return;
  }
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
