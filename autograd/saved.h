// What a tape node keeps of a value its backward reads. Under train.precision: bf16 the model runs
// its blocks and head inside a SaveInBf16 scope: a node then keeps an activation (a float32 value
// that is not a parameter) as the Variable's bfloat16 copy, half the bytes, shared by every node
// that saves it and by the bf16 matrix products that read it (ops::detail::bf16_value), and widens it
// back to float32 scratch when its backward runs. The forward computes on the float32 values; only
// the backward reads the rounded ones (relative 2^-9 per element). Parameters, and what a node keeps
// of its own (a norm's rstd, attention's log-sum-exp, a chunk form's states), stay float32.
#pragma once

#include <utility>

#include "autograd/variable.h"

namespace linattn::ops {

// While alive, with on = true, nodes keep activations in bf16 as above (on = false: as they are).
// The previous setting is back when it ends. Recomputation's replays run under the setting their
// region was recorded with (autograd/checkpoint.h runs them inside the model's blocks, which open it).
class SaveInBf16 {
 public:
  explicit SaveInBf16(bool on);
  ~SaveInBf16();
  SaveInBf16(const SaveInBf16&) = delete;
  SaveInBf16& operator=(const SaveInBf16&) = delete;

 private:
  bool previous_;
};
bool saving_in_bf16();

// Scratch for what an op's node will keep of its own (a norm's rstd, attention's log-sum-exp): in a
// SaveInBf16 scope, when the op records a node, from the arena's part for kept tensors
// (Tensor::scratch_kept), else plain scratch.
Tensor scratch_for_node(const Shape& shape, DType dtype, Device device, bool recording);

namespace detail {

// A value kept for a backward: v itself, or (in a SaveInBf16 scope, v a float32 activation) v's
// gradient slot and its bf16 copy.
class Saved {
 public:
  Saved() = default;
  explicit Saved(const Variable& v);

  bool defined() const { return var_.defined(); }
  bool in_bf16() const { return bf16_.defined(); }
  // The Variable for its gradient (and, when kept as it is, its value).
  const Variable& var() const { return var_; }
  // The Variable with its value: var() itself, or its slot with the widened value (value()).
  Variable with_value() const { return in_bf16() ? var_.with_value(value()) : var_; }
  // The value as kept, for the kernels that read a float32 value or its bf16 copy alike (what a
  // backward reads of its forward, kernels/backend.def): no conversion.
  Tensor stored() const { return in_bf16() ? bf16_ : value(); }
  // The value: as kept, or widened from its bf16 copy into new float32 scratch (one conversion per
  // call: a backward reads it once); undefined when nothing was kept.
  Tensor value() const;

 private:
  Variable var_;
  Tensor bf16_;
};

// a and b as a kernel that takes one dtype for both reads them: as kept when both or neither are in
// bf16, else both widened.
std::pair<Tensor, Tensor> stored_alike(const Saved& a, const Saved& b);

}  // namespace detail

}  // namespace linattn::ops
