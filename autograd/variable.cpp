#include "autograd/variable.h"

#include "autograd/op_support.h"

namespace linattn {

namespace {
thread_local bool t_grad_enabled = true;
thread_local std::vector<std::function<void()>> t_tape;
}  // namespace

Variable::Variable(Tensor value, bool requires_grad) : impl_(std::make_shared<Impl>()) {
  impl_->value = std::move(value);
  impl_->requires_grad = requires_grad;
}

Variable Variable::parameter(Tensor value, Tensor grad) {
  check_same_shape(value, grad, "Variable::parameter");
  Variable v(std::move(value), true);
  v.impl_->grad = std::move(grad);
  return v;
}

const Tensor& Variable::ensure_grad() const {
  if (!impl_->grad.defined())
    impl_->grad = Tensor::scratch_zeros(impl_->value.shape(), impl_->value.dtype(), impl_->value.device());
  return impl_->grad;
}

bool grad_enabled() { return t_grad_enabled; }
NoGrad::NoGrad() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGrad::~NoGrad() { t_grad_enabled = previous_; }

bool needs_grad(std::initializer_list<const Variable*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Variable* v : inputs)
    if (v && v->requires_grad()) return true;
  return false;
}

void record(std::function<void()> backward) { t_tape.push_back(std::move(backward)); }

static void run_tape() {
  // Move the tape out first: a node that throws must not leave half a tape behind.
  std::vector<std::function<void()>> tape;
  tape.swap(t_tape);
  for (auto it = tape.rbegin(); it != tape.rend(); ++it) (*it)();
}

void backward(const Variable& root) {
  LINATTN_CHECK(root.value().numel() == 1, "backward(root) needs a one-element root, got ", root.value().str(),
                "; pass explicit output gradients for other shapes");
  Tensor seed = Tensor::scratch(root.shape(), root.dtype());
  seed.fill_(1.0);
  backward({root}, {seed});
}

void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads) {
  LINATTN_CHECK(outputs.size() == grads.size(), "backward: ", outputs.size(), " outputs but ", grads.size(),
                " gradients");
  for (size_t i = 0; i < outputs.size(); ++i) {
    LINATTN_CHECK(outputs[i].requires_grad(), "backward: output ", i, " ", outputs[i].value().str(),
                  " does not depend on anything that requires a gradient");
    check_same_shape(outputs[i].value(), grads[i], "backward: output gradient");
    check_same_dtype(outputs[i].value(), grads[i], "backward: output gradient");
    ops::detail::accumulate(outputs[i], grads[i]);
  }
  run_tape();
}

void clear_tape() { t_tape.clear(); }
size_t tape_size() { return t_tape.size(); }

}  // namespace linattn
