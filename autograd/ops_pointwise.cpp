// Pointwise ops and views.
#include "autograd/op_support.h"
#include "autograd/ops.h"
#include "autograd/saved.h"

namespace linattn::ops {

using detail::accumulate;
using detail::check_inputs;
using detail::grad_or_none;
using detail::grad_or_scratch;
using detail::Saved;

Variable add(const Variable& a, const Variable& b) {
  check_inputs("add", {&a, &b});
  check_same_shape(a.value(), b.value(), "add");
  Tensor y = Tensor::scratch(a.shape(), a.dtype(), a.device());
  backend::add(a.device(), y, a.value(), b.value());
  Variable out(y, needs_grad({&a, &b}));
  if (out.requires_grad())
    record({&a, &b}, [a = a.without_value(), b = b.without_value(), out = out.without_value()] {
      if (!out.grad().defined()) return;
      // forward: y = a + b  =>  da += dy, db += dy (passed on: a first gradient is dy itself, no copy)
      accumulate(a, out.grad());
      accumulate(b, out.grad());
    });
  return out;
}

Variable mul(const Variable& a, const Variable& b) {
  check_inputs("mul", {&a, &b});
  check_same_shape(a.value(), b.value(), "mul");
  Tensor y = Tensor::scratch(a.shape(), a.dtype(), a.device());
  backend::mul_forward(a.device(), y, a.value(), b.value());
  Variable out(y, needs_grad({&a, &b}));
  if (out.requires_grad())
    record({&a, &b}, [a = Saved(a), b = Saved(b), out = out.without_value()] {
      if (!out.grad().defined()) return;
      backend::mul_backward(out.device(), grad_or_none(a.var()), grad_or_none(b.var()), a.value(), b.value(),
                            out.grad());
    });
  return out;
}

Variable scale(const Variable& x, double c) {
  check_inputs("scale", {&x});
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  backend::scale_forward(x.device(), y, x.value(), c);
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), out = out.without_value(), c] {
      if (!out.grad().defined()) return;
      // forward: y = c x  =>  dx += c dy (the first dx is written: dx = c dy)
      bool fresh = false;
      const Tensor& dx = x.grad_to_write(fresh);
      if (fresh) backend::scale_forward(x.device(), dx, out.grad(), c);
      else backend::axpy(x.device(), dx, c, out.grad());
    });
  return out;
}

Variable activation(Activation f, const Variable& x, double scale) {
  check_inputs(activation_name(f), {&x});
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  backend::activation_forward(x.device(), f, y, x.value(), scale);
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [f, scale, x = Saved(x), out = out.without_value()] {
      if (!out.grad().defined()) return;
      bool fresh = false;  // the first writer of dx writes it
      const Tensor& dx = x.var().grad_to_write(fresh);
      backend::activation_backward(out.device(), f, dx, x.stored(), out.grad(), scale, fresh);
    });
  return out;
}

Variable swiglu(const Variable& gate, const Variable& up) {
  check_inputs("swiglu", {&gate, &up});
  check_same_shape(gate.value(), up.value(), "swiglu");
  Tensor y = Tensor::scratch(gate.shape(), gate.dtype(), gate.device());
  backend::swiglu_forward(gate.device(), y, gate.value(), up.value());
  Variable out(y, needs_grad({&gate, &up}));
  if (out.requires_grad())
    record({&gate, &up}, [gate = Saved(gate), up = Saved(up), out = out.without_value()] {
      if (!out.grad().defined()) return;
      // The kernel writes both gradients; a gradient nobody needs goes into scratch.
      const auto [g, u] = detail::stored_alike(gate, up);
      bool write = false;
      const auto [dgate, dup] = detail::grads_to_write(gate.var(), up.var(), write);
      backend::swiglu_backward(out.device(), dgate, dup, g, u, out.grad(), write);
    });
  return out;
}

Variable gdn_decay(const Variable& x, const Variable& A_log, const Variable& dt_bias) {
  check_inputs("gdn_decay", {&x, &A_log, &dt_bias});
  const int64_t H = x.shape().last();
  LINATTN_CHECK(A_log.shape() == Shape({H}) && dt_bias.shape() == Shape({H}), "gdn_decay: A_log ", A_log.value().str(),
                " and dt_bias ", dt_bias.value().str(), " must be [H] for x ", x.value().str());
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  backend::gdn_decay_forward(x.device(), y, x.value(), A_log.value(), dt_bias.value());
  Variable out(y, needs_grad({&x, &A_log, &dt_bias}));
  if (out.requires_grad())
    record({&x, &A_log, &dt_bias}, [x = Saved(x), A_log, dt_bias, out = out.without_value()] {
      if (!out.grad().defined()) return;
      backend::gdn_decay_backward(out.device(), grad_or_none(x.var()), grad_or_none(A_log), grad_or_none(dt_bias),
                                  x.value(), A_log.value(), dt_bias.value(), out.grad());
    });
  return out;
}

Variable view(const Variable& x, const Shape& shape) {
  Variable out(x.value().view(shape), needs_grad({&x}));
  if (x.bf16().defined()) out.set_bf16(x.bf16().view(shape));  // the bf16 copy, viewed alike
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), out = out.without_value()] {
      if (!out.grad().defined()) return;
      accumulate(x, out.grad().view(x.shape()));  // forward: y = x reshaped  =>  dx += dy reshaped back (no copy)
    });
  return out;
}

Variable rows(const Variable& x, int64_t begin, int64_t count) {
  LINATTN_CHECK(x.shape().ndim() >= 1 && begin >= 0 && count >= 1 && begin + count <= x.shape()[0], "rows: rows [",
                begin, ", ", begin + count, ") of ", x.value().str());
  Shape s = x.shape();
  const int64_t per = x.value().numel() / s[0];
  s[0] = count;
  Variable out(x.value().view_at(begin * per, s), needs_grad({&x}));
  if (x.bf16().defined()) out.set_bf16(x.bf16().view_at(begin * per, s));  // the bf16 copy, viewed alike
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), out = out.without_value(), begin, per, s] {
      if (!out.grad().defined()) return;
      // forward: y = x[begin : begin + count]  =>  dx[begin : begin + count] += dy
      const Tensor dx = x.ensure_grad().view_at(begin * per, s);
      backend::add_inplace(dx.device(), dx, out.grad());
    });
  return out;
}

}  // namespace linattn::ops
