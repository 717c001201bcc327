// The tape: Variables hold a value and a gradient; each differentiable op records one node whose
// backward calls a hand-derived backward kernel. backward() walks the tape once in reverse.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace linattn {

// A Variable is a value and a gradient slot. Copies share both; without_value() shares the slot
// only, which is what a tape node keeps of a Variable whose value its backward does not read, so
// that the value is freed as soon as nothing reads it. Gradients of intermediates are allocated when
// first written and freed with the last node that holds their slot (the tape frees each node once
// its backward has run).
class Variable {
 public:
  Variable() = default;
  // A leaf: an input (requires_grad false) or something to differentiate with respect to.
  explicit Variable(Tensor value, bool requires_grad = false);
  // A parameter whose gradient is a preallocated view (into the flat gradient buffer), and, under
  // train.precision: bf16, whose bf16 copy is a view into the bf16 weight buffer (Parameters).
  static Variable parameter(Tensor value, Tensor grad, Tensor bf16 = {});

  bool defined() const { return slot_ != nullptr; }
  // The value; undefined on a without_value() copy.
  const Tensor& value() const { return value_; }
  const Shape& shape() const { return slot_->shape; }
  DType dtype() const { return slot_->dtype; }
  Device device() const { return slot_->device; }
  bool requires_grad() const { return slot_ && slot_->requires_grad; }
  // Made by parameter(): a weight, which the tape never keeps in another precision (autograd/saved.h).
  bool is_parameter() const { return slot_ && slot_->parameter; }
  // The same for every copy of this Variable (copies share one value and one gradient).
  const void* id() const { return slot_.get(); }
  // This Variable's gradient slot without its value (for tape nodes; see above).
  Variable without_value() const;
  // This Variable's gradient slot with another value of its shape and dtype (a value kept in another
  // precision, widened back: autograd/saved.h).
  Variable with_value(Tensor value) const;

  // The gradient; undefined until something flows into it.
  const Tensor& grad() const { return slot_->grad; }
  // The gradient as a buffer to add into (+=): allocated zero-filled (as activation scratch) when
  // nothing was written yet, copied first when it was passed on (add_grad) and another tensor still
  // views it.
  const Tensor& ensure_grad() const;
  // The gradient as a buffer a kernel writes either way: `fresh` is set when nothing was written yet
  // (the buffer's contents are then undefined: write it, e.g. beta = 0), cleared when it holds a
  // gradient to add to.
  const Tensor& grad_to_write(bool& fresh) const;
  // The gradient as a buffer a kernel writes as prior + its own part, which sets `prior` to what to
  // add to: undefined when nothing was written yet (the kernel writes), the buffer itself when it
  // holds a sum of its own (the kernel adds in place), or, when the gradient was passed on (add_grad)
  // and another tensor still views it, that gradient, beside a new buffer (out of place: no copy).
  const Tensor& grad_to_add(Tensor& prior) const;
  // grad += g (same shape). The first gradient is taken as it is, without a copy: g is then shared,
  // and is not written through this Variable while another tensor views it (a later add makes a new
  // buffer). g16: g's bf16 copy, as the kernel that wrote g wrote it beside g (ops::add_rmsnorm's
  // norm backward), kept with the gradient while it is g as it is (grad_bf16).
  void add_grad(const Tensor& g, const Tensor& g16 = {}) const;
  // The gradient's bf16 copy: the bf16 operand of the products whose output this Variable is (their
  // backward reads it instead of converting the gradient). Undefined unless the gradient is a first
  // contribution that came with one (add_grad); dropped as soon as anything is added to or written
  // into the gradient (ensure_grad, grad_to_write, grad_to_add, a second add_grad).
  const Tensor& grad_bf16() const { return slot_->grad_bf16; }

  // A bfloat16 copy of the value for the bf16 matrix products, shared by every copy of this
  // Variable: a parameter's is set when it is made (and rewritten by the optimizer); any other's is
  // made on first use (ops::detail::bf16_value) and kept. Undefined until then.
  const Tensor& bf16() const { return slot_->bf16; }
  void set_bf16(Tensor t) const { slot_->bf16 = std::move(t); }

 private:
  struct Slot {
    Tensor grad;
    Tensor grad_bf16;  // grad rounded, where its writer wrote that beside it (grad_bf16())
    Tensor bf16;
    Shape shape;
    DType dtype = DType::f32;
    Device device = Device::cpu;
    bool requires_grad = false;
    bool parameter = false;
    bool shared = false;  // grad was passed on: written in place only once no other tensor views it
  };
  Tensor value_;
  std::shared_ptr<Slot> slot_;
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

// Seeds d(root) = 1 (root must have one element), runs the tape in reverse, freeing each node (its
// saved tensors and the gradients only it held) once its backward has run.
void backward(const Variable& root);
// Seeds each output's gradient with the given tensor (same shape), runs the tape and frees it.
void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads,
              const BackwardHooks* hooks = nullptr);
// Drops the tape without running it (e.g. after a forward pass whose loss was not finite).
void clear_tape();
size_t tape_size();

}  // namespace linattn
