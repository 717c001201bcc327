// The tape: Variables hold a value and a gradient; each differentiable op records one node whose
// backward calls a hand-derived backward kernel. backward() walks the tape once in reverse.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace linattn {

class Variable {
 public:
  Variable() = default;
  // A leaf: an input (requires_grad false) or something to differentiate with respect to.
  explicit Variable(Tensor value, bool requires_grad = false);
  // A parameter whose gradient is a preallocated view (into the flat gradient buffer), and, under
  // train.precision: bf16, whose bf16 copy is a view into the bf16 weight buffer (Parameters).
  static Variable parameter(Tensor value, Tensor grad, Tensor bf16 = {});

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const { return impl_->value; }
  const Shape& shape() const { return impl_->value.shape(); }
  DType dtype() const { return impl_->value.dtype(); }
  Device device() const { return impl_->value.device(); }
  bool requires_grad() const { return impl_ && impl_->requires_grad; }
  // The same for every copy of this Variable (copies share one value and one gradient).
  const void* id() const { return impl_.get(); }

  // The gradient; undefined until something flows into it.
  const Tensor& grad() const { return impl_->grad; }
  // The gradient, allocated (zero-filled, as activation scratch) if it was not yet.
  const Tensor& ensure_grad() const;

  // A bfloat16 copy of the value for the bf16 matrix products, shared by every copy of this
  // Variable: a parameter's is set when it is made (and rewritten by the optimizer); any other's is
  // made on first use (ops::detail::bf16_value) and kept. Undefined until then.
  const Tensor& bf16() const { return impl_->bf16; }
  void set_bf16(Tensor t) const { impl_->bf16 = std::move(t); }

 private:
  struct Impl {
    Tensor value;
    Tensor grad;
    Tensor bf16;
    bool requires_grad = false;
  };
  std::shared_ptr<Impl> impl_;
};

// Recording is on by default; a NoGrad scope records nothing (evaluation, optimizer updates).
bool grad_enabled();
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool previous_;
};

// True when an op on these inputs must record a node: recording is on and some input needs a gradient.
bool needs_grad(std::initializer_list<const Variable*> inputs);

// Records a backward step on the current thread's tape. `inputs` are the op's inputs: the step
// accumulates into the gradients of those that require one, and of nothing else.
void record(std::initializer_list<const Variable*> inputs, std::function<void()> backward);
void record(const std::vector<const Variable*>& inputs, std::function<void()> backward);

// While alive, ops record into a tape of its own, with recording on, and backward() runs that tape:
// a checkpointed region (autograd/checkpoint.h) replays its forward and runs its backward this way
// inside a node of the thread's tape. The thread's tape and recording mode are back when it ends
// (what is left on its own tape, after an error, is dropped).
class TapeScope {
 public:
  TapeScope();
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  struct Outer;
  std::unique_ptr<Outer> outer_;
};

// Work that overlaps a backward pass (the data-parallel gradient reduction). final_grad(i) is called
// as soon as the gradient of leaves[i] is final: after the last node to run that accumulates into it
// (before the first node when none does). after_node() is called after every node.
struct BackwardHooks {
  std::vector<Variable> leaves;
  std::function<void(size_t leaf)> final_grad;
  std::function<void()> after_node;
};

// Seeds d(root) = 1 (root must have one element), runs the tape in reverse and frees it.
void backward(const Variable& root);
// Seeds each output's gradient with the given tensor (same shape), runs the tape and frees it.
void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads,
              const BackwardHooks* hooks = nullptr);
// Drops the tape without running it (e.g. after a forward pass whose loss was not finite).
void clear_tape();
size_t tape_size();

}  // namespace linattn
