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

// A bf16 tensor widened into new float32 scratch.
static Tensor widened(const Tensor& b) {
  Tensor wide = Tensor::scratch(b.shape(), DType::f32, b.device());
  backend::convert(wide.device(), wide, b);
  return wide;
}

Tensor Saved::value() const {
  if (!bf16_.defined()) return var_.defined() ? var_.value() : Tensor();
  return widened(bf16_);
}

Tensor Saved::value_rows(int64_t begin, int64_t count) const {
  const int64_t last = var_.shape().last();
  if (!bf16_.defined()) return var_.value().view_at(begin * last, {count, last});
  return widened(bf16_.view_at(begin * last, {count, last}));
}

}  // namespace detail

}  // namespace linattn::ops
