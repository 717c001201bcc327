#include "autograd/variable.h"

#include <unordered_map>

#include "autograd/op_support.h"

namespace linattn {

namespace {

struct Node {
  std::function<void()> backward;
  std::vector<const void*> writes;  // id() of every input whose gradient the node accumulates into
};

thread_local bool t_grad_enabled = true;
thread_local std::vector<Node> t_tape;

}  // namespace

Variable::Variable(Tensor value, bool requires_grad) : value_(std::move(value)), slot_(std::make_shared<Slot>()) {
  slot_->shape = value_.shape();
  slot_->dtype = value_.dtype();
  slot_->device = value_.device();
  slot_->requires_grad = requires_grad;
}

Variable Variable::parameter(Tensor value, Tensor grad, Tensor bf16) {
  check_same_shape(value, grad, "Variable::parameter");
  if (bf16.defined()) check_same_shape(value, bf16, "Variable::parameter");
  Variable v(std::move(value), true);
  v.slot_->grad = std::move(grad);
  v.slot_->bf16 = std::move(bf16);
  v.slot_->parameter = true;
  return v;
}

Variable Variable::without_value() const {
  Variable v;
  v.slot_ = slot_;
  return v;
}

Variable Variable::with_value(Tensor value) const {
  LINATTN_CHECK(value.shape() == slot_->shape && value.dtype() == slot_->dtype, "Variable::with_value: ", value.str(),
                " for a ", dtype_name(slot_->dtype), slot_->shape.str(), " variable");
  Variable v;
  v.value_ = std::move(value);
  v.slot_ = slot_;
  return v;
}

// A shared gradient that no other tensor views any more (its other holders are gone) is ours again.
static bool held_elsewhere(const Tensor& grad) { return grad.storage().use_count() > 1; }

const Tensor& Variable::ensure_grad() const {
  Slot& s = *slot_;
  s.grad_bf16 = Tensor();  // the caller writes into the gradient
  if (!s.grad.defined()) {
    s.grad = Tensor::scratch_zeros(s.shape, s.dtype, s.device);
  } else if (s.shared && held_elsewhere(s.grad)) {
    Tensor own = Tensor::scratch(s.shape, s.dtype, s.device);
    own.copy_from(s.grad);
    s.grad = own;
  }
  s.shared = false;
  return s.grad;
}

const Tensor& Variable::grad_to_write(bool& fresh) const {
  Slot& s = *slot_;
  s.grad_bf16 = Tensor();
  fresh = !s.grad.defined();
  if (fresh) {
    s.grad = Tensor::scratch(s.shape, s.dtype, s.device);
    s.shared = false;
    return s.grad;
  }
  return ensure_grad();
}

const Tensor& Variable::grad_to_add(Tensor& prior) const {
  Slot& s = *slot_;
  s.grad_bf16 = Tensor();
  prior = s.grad;
  if (!s.grad.defined() || (s.shared && held_elsewhere(s.grad))) s.grad = Tensor::scratch(s.shape, s.dtype, s.device);
  s.shared = false;
  return s.grad;
}

void Variable::add_grad(const Tensor& g, const Tensor& g16) const {
  Slot& s = *slot_;
  LINATTN_CHECK(g.shape() == s.shape && g.dtype() == s.dtype, "add_grad: a gradient ", g.str(), " for a ",
                dtype_name(s.dtype), s.shape.str(), " variable");
  LINATTN_CHECK(!g16.defined() || (g16.dtype() == DType::bf16 && g16.shape() == s.shape), "add_grad: the copy ",
                g16.str(), " of a gradient ", g.str());
  if (!s.grad.defined()) {
    s.grad = g;  // forward: the first contribution  =>  taken as it is
    s.grad_bf16 = g16;
    s.shared = true;
    return;
  }
  s.grad_bf16 = Tensor();  // a sum now
  if (s.shared && held_elsewhere(s.grad)) {
    Tensor sum = Tensor::scratch(s.shape, s.dtype, s.device);  // out of place: the old buffer is not ours
    backend::add(s.device, sum, s.grad, g);
    s.grad = sum;
    s.shared = false;
  } else {
    backend::add_inplace(s.device, s.grad, g);
    s.shared = false;
  }
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

template <class Inputs>
static void record_node(const Inputs& inputs, std::function<void()> backward) {
  Node node{std::move(backward), {}};
  for (const Variable* v : inputs)
    if (v && v->requires_grad()) node.writes.push_back(v->id());
  t_tape.push_back(std::move(node));
}

void record(std::initializer_list<const Variable*> inputs, std::function<void()> backward) {
  record_node(inputs, std::move(backward));
}
void record(const std::vector<const Variable*>& inputs, std::function<void()> backward) {
  record_node(inputs, std::move(backward));
}

struct TapeScope::Outer {
  std::vector<Node> tape;
  bool grad_enabled;
};

TapeScope::TapeScope() : outer_(new Outer{{}, t_grad_enabled}) {
  outer_->tape.swap(t_tape);
  t_grad_enabled = true;
}

TapeScope::~TapeScope() {
  t_tape.swap(outer_->tape);  // the scope's own tape goes with outer_
  t_grad_enabled = outer_->grad_enabled;
}

static void run_tape(const BackwardHooks* hooks) {
  // Move the tape out first: a node that throws must not leave half a tape behind.
  std::vector<Node> tape;
  tape.swap(t_tape);
  // A leaf's gradient is final after the node that accumulates into it last in reverse order, i.e.
  // the first such node in recording order: final_after[j] lists the leaves node j completes.
  std::vector<std::vector<size_t>> final_after(hooks ? tape.size() : 0);
  if (hooks) {
    std::unordered_map<const void*, size_t> leaf_of;
    for (size_t i = 0; i < hooks->leaves.size(); ++i) leaf_of.emplace(hooks->leaves[i].id(), i);
    std::vector<bool> written(hooks->leaves.size(), false);
    for (size_t j = 0; j < tape.size(); ++j)
      for (const void* id : tape[j].writes)
        if (auto it = leaf_of.find(id); it != leaf_of.end() && !written[it->second]) {
          written[it->second] = true;
          final_after[j].push_back(it->second);
        }
    for (size_t i = 0; i < written.size(); ++i)
      if (!written[i]) hooks->final_grad(i);
  }
  for (size_t j = tape.size(); j-- > 0;) {
    tape[j].backward();
    // The node's saved tensors and the gradients only it still holds (its output's, and its inputs'
    // once their producers have run too) go now, not at the end of the pass.
    tape[j] = Node{};
    if (!hooks) continue;
    for (size_t i : final_after[j]) hooks->final_grad(i);
    if (hooks->after_node) hooks->after_node();
  }
}

void backward(const Variable& root) {
  LINATTN_CHECK(root.value().numel() == 1, "backward(root) needs a one-element root, got ", root.value().str(),
                "; pass explicit output gradients for other shapes");
  Tensor seed = Tensor::scratch(root.shape(), root.dtype(), root.device());
  seed.fill_(1.0);
  backward({root}, {seed});
}

void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads, const BackwardHooks* hooks) {
  LINATTN_CHECK(outputs.size() == grads.size(), "backward: ", outputs.size(), " outputs but ", grads.size(),
                " gradients");
  for (size_t i = 0; i < outputs.size(); ++i) {
    LINATTN_CHECK(outputs[i].requires_grad(), "backward: output ", i, " ", outputs[i].value().str(),
                  " does not depend on anything that requires a gradient");
    check_same_shape(outputs[i].value(), grads[i], "backward: output gradient");
    check_same_dtype(outputs[i].value(), grads[i], "backward: output gradient");
    ops::detail::accumulate(outputs[i], grads[i]);
  }
  run_tape(hooks);
}

void clear_tape() { t_tape.clear(); }
size_t tape_size() { return t_tape.size(); }

}  // namespace linattn
