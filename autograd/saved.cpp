#include "autograd/saved.h"

#include "autograd/op_support.h"

namespace linattn::ops {

namespace {
thread_local bool t_save_in_bf16 = false;
}  // namespace

SaveInBf16::SaveInBf16(bool on) : previous_(t_save_in_bf16) { t_save_in_bf16 = on; }
SaveInBf16::~SaveInBf16() { t_save_in_bf16 = previous_; }
bool saving_in_bf16() { return t_save_in_bf16; }

Tensor scratch_for_node(const Shape& shape, DType dtype, Device device, bool recording) {
  return recording && t_save_in_bf16 ? Tensor::scratch_kept(shape, dtype, device)
                                     : Tensor::scratch(shape, dtype, device);
}

namespace detail {

Saved::Saved(const Variable& v) {
  if (!v.defined()) return;
  if (!t_save_in_bf16 || v.dtype() != DType::f32 || v.is_parameter() || !v.value().defined()) {
    var_ = v;
    return;
  }
  bf16_ = bf16_value(v);
  var_ = v.without_value();
}

Tensor Saved::value() const {
  if (!bf16_.defined()) return var_.defined() ? var_.value() : Tensor();
  return backend::float32_of(bf16_);
}

std::pair<Tensor, Tensor> stored_alike(const Saved& a, const Saved& b) {
  if (a.in_bf16() == b.in_bf16()) return {a.stored(), b.stored()};
  return {a.value(), b.value()};
}

}  // namespace detail

}  // namespace linattn::ops
