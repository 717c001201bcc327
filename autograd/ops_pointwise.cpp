// Pointwise ops and views.
#include "autograd/op_support.h"
#include "autograd/ops.h"

namespace linattn::ops {

using detail::accumulate;
using detail::check_inputs;
using detail::grad_or_null;

Variable add(const Variable& a, const Variable& b) {
  check_inputs("add", {&a, &b}, /*cuda_ok=*/true);
  check_same_shape(a.value(), b.value(), "add");
  Tensor y = Tensor::scratch(a.shape(), a.dtype(), a.device());
  if (a.device() == Device::cuda) {
    LINATTN_CHECK(a.dtype() == DType::f32, "add: CUDA kernels are float32 only, got ", a.value().str());
    cuda::add_forward(y.data<float>(), a.value().data<float>(), b.value().data<float>(), y.numel());
  } else {
    dispatch_float(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      cpu::add_forward(y.data<T>(), a.value().data<T>(), b.value().data<T>(), y.numel());
    });
  }
  Variable out(y, needs_grad({&a, &b}));
  if (out.requires_grad())
    record({&a, &b}, [a, b, out] {
      if (!out.grad().defined()) return;
      accumulate(a, out.grad());  // forward: y = a + b  =>  da += dy, db += dy
      accumulate(b, out.grad());
    });
  return out;
}

Variable mul(const Variable& a, const Variable& b) {
  check_inputs("mul", {&a, &b});
  check_same_shape(a.value(), b.value(), "mul");
  Tensor y = Tensor::scratch(a.shape(), a.dtype());
  dispatch_float(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::mul_forward(y.data<T>(), a.value().data<T>(), b.value().data<T>(), y.numel());
  });
  Variable out(y, needs_grad({&a, &b}));
  if (out.requires_grad())
    record({&a, &b}, [a, b, out] {
      if (!out.grad().defined()) return;
      dispatch_float(a.dtype(), [&](auto zero) {
        using T = decltype(zero);
        cpu::mul_backward(grad_or_null<T>(a), grad_or_null<T>(b), a.value().data<T>(), b.value().data<T>(),
                          out.grad().data<T>(), out.value().numel());
      });
    });
  return out;
}

Variable scale(const Variable& x, double c) {
  check_inputs("scale", {&x});
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::scale_forward(y.data<T>(), x.value().data<T>(), T(c), y.numel());
  });
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x, out, c] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {  // forward: y = c x  =>  dx += c dy
        using T = decltype(zero);
        cpu::axpy(x.ensure_grad().data<T>(), T(c), out.grad().data<T>(), x.value().numel());
      });
    });
  return out;
}

Variable activation(cpu::Activation f, const Variable& x) {
  check_inputs(cpu::activation_name(f), {&x});
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::activation_forward(f, y.data<T>(), x.value().data<T>(), y.numel());
  });
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [f, x, out] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        cpu::activation_backward(f, x.ensure_grad().data<T>(), x.value().data<T>(), out.grad().data<T>(),
                                 x.value().numel());
      });
    });
  return out;
}

Variable swiglu(const Variable& gate, const Variable& up) {
  check_inputs("swiglu", {&gate, &up});
  check_same_shape(gate.value(), up.value(), "swiglu");
  Tensor y = Tensor::scratch(gate.shape(), gate.dtype());
  dispatch_float(gate.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::swiglu_forward(y.data<T>(), gate.value().data<T>(), up.value().data<T>(), y.numel());
  });
  Variable out(y, needs_grad({&gate, &up}));
  if (out.requires_grad())
    record({&gate, &up}, [gate, up, out] {
      if (!out.grad().defined()) return;
      dispatch_float(gate.dtype(), [&](auto zero) {
        using T = decltype(zero);
        // The kernel writes both gradients; route a gradient nobody needs into scratch.
        Tensor dgate = gate.requires_grad() ? gate.ensure_grad() : Tensor::scratch_zeros(gate.shape(), gate.dtype());
        Tensor dup = up.requires_grad() ? up.ensure_grad() : Tensor::scratch_zeros(up.shape(), up.dtype());
        cpu::swiglu_backward(dgate.data<T>(), dup.data<T>(), gate.value().data<T>(), up.value().data<T>(),
                             out.grad().data<T>(), out.value().numel());
      });
    });
  return out;
}

Variable gdn_decay(const Variable& x, const Variable& A_log, const Variable& dt_bias) {
  check_inputs("gdn_decay", {&x, &A_log, &dt_bias});
  const int64_t H = x.shape().last();
  LINATTN_CHECK(A_log.shape() == Shape({H}) && dt_bias.shape() == Shape({H}), "gdn_decay: A_log ", A_log.value().str(),
                " and dt_bias ", dt_bias.value().str(), " must be [H] for x ", x.value().str());
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  const int64_t rows = x.shape().rows();
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::gdn_decay_forward(y.data<T>(), x.value().data<T>(), A_log.value().data<T>(), dt_bias.value().data<T>(), rows, H);
  });
  Variable out(y, needs_grad({&x, &A_log, &dt_bias}));
  if (out.requires_grad())
    record({&x, &A_log, &dt_bias}, [x, A_log, dt_bias, out, rows, H] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        cpu::gdn_decay_backward(grad_or_null<T>(x), grad_or_null<T>(A_log), grad_or_null<T>(dt_bias),
                                x.value().data<T>(), A_log.value().data<T>(), dt_bias.value().data<T>(),
                                out.grad().data<T>(), rows, H);
      });
    });
  return out;
}

Variable view(const Variable& x, const Shape& shape) {
  Variable out(x.value().view(shape), needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x, out] {
      if (!out.grad().defined()) return;
      accumulate(x, out.grad().view(x.shape()));  // forward: y = x reshaped  =>  dx += dy reshaped back
    });
  return out;
}

}  // namespace linattn::ops
