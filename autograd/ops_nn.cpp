// Matmul, norms, embedding, convolution and the loss.
#include <algorithm>
#include <functional>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/op_support.h"
#include "autograd/ops.h"
#include "autograd/saved.h"

namespace linattn::ops {

using detail::accumulate;
using detail::check_inputs;
using detail::grad_or_none;
using detail::grad_or_scratch;
using detail::Saved;
using detail::value_or_none;

static Shape with_last(Shape s, int64_t last) {
  s[-1] = last;
  return s;
}

// linear under train.precision: bf16 (the weight carries a bf16 copy, Variable::bf16): the three
// products read bf16 operands, each converted once (x: on its first use by any product; the
// weight: by the optimizer, once per step; dy: once for both dx and dW), accumulate in float32, and
// write float32 y, dx and dW.
static Variable linear_bf16(const Variable& x, const Variable& weight, const Variable& bias, int64_t N, int64_t in,
                            int64_t out_features) {
  const Device dev = x.device();
  const Tensor x16 = detail::bf16_value(x);
  Tensor y, y16;  // y16: y's bf16 copy, where selective recomputation keeps one (checkpoint.h)
  if (!detail::take_kept(detail::Kept::product, y, &y16)) {  // selective recomputation keeps products
    y = Tensor::scratch(with_last(x.shape(), out_features), DType::f32, dev);
    // y [N, out] = x [N, in] W^T
    backend::gemm(dev, false, true, N, out_features, in, 1.0, x16, weight.bf16(), 0.0, y);
    if (bias.defined()) backend::bias_forward(dev, y, bias.value());
    detail::keep(detail::Kept::product, y, &y16);
  }
  Variable out(y, needs_grad({&x, &weight, &bias}));
  if (y16.defined()) out.set_bf16(y16);
  // Saved: x's bf16 copy for dW (half of x's bytes), the weight's own bf16 copy (in its slot) for dx;
  // never x's float32 value nor y.
  if (out.requires_grad())
    record({&x, &weight, &bias}, [x = x.without_value(), x16 = weight.requires_grad() ? x16 : Tensor(),
                                  weight = weight.without_value(), bias = bias.without_value(),
                                  out = out.without_value(), N, in, out_features, dev] {
      if (!out.grad().defined()) return;
      const Tensor& dY = out.grad();
      // forward: y = x W^T + b  =>  dx += dy W, dW += dy^T x, db += sum_rows dy (the first dx is
      // written, beta = 0)
      if (x.requires_grad() || weight.requires_grad()) {
        const Tensor dY16 = detail::bf16_gradient(out);
        if (x.requires_grad()) {
          bool fresh = false;
          const Tensor& dx = x.grad_to_write(fresh);
          backend::gemm(dev, false, false, N, in, out_features, 1.0, dY16, weight.bf16(), fresh ? 0.0 : 1.0, dx);
        }
        if (weight.requires_grad())
          backend::gemm(dev, true, false, out_features, in, N, 1.0, dY16, x16, 1.0, weight.ensure_grad());
      }
      if (bias.requires_grad()) backend::bias_backward(dev, bias.ensure_grad(), dY);
    });
  return out;
}

Variable linear(const Variable& x, const Variable& weight, const Variable& bias) {
  check_inputs("linear", {&x, &weight, &bias});
  LINATTN_CHECK(x.shape().ndim() >= 1 && weight.shape().ndim() == 2 && x.shape().last() == weight.shape()[1],
                "linear: input ", x.value().str(), " does not match weight ", weight.value().str(),
                " (expected input [..., in] and weight [out, in])");
  const int64_t N = x.shape().rows(), in = weight.shape()[1], out_features = weight.shape()[0];
  if (bias.defined())
    LINATTN_CHECK(bias.shape() == Shape{out_features}, "linear: bias ", bias.value().str(), " for weight ",
                  weight.value().str(), " should be [", out_features, "]");
  if (weight.bf16().defined() && x.dtype() == DType::f32) return linear_bf16(x, weight, bias, N, in, out_features);
  const Device dev = x.device();
  Tensor y;
  if (!detail::take_kept(detail::Kept::product, y)) {  // selective recomputation keeps products (checkpoint.h)
    y = Tensor::scratch(with_last(x.shape(), out_features), x.dtype(), dev);
    // y [N, out] = x [N, in] W^T
    backend::gemm(dev, false, true, N, out_features, in, 1.0, x.value(), weight.value(), 0.0, y);
    if (bias.defined()) backend::bias_forward(dev, y, bias.value());
    detail::keep(detail::Kept::product, y);
  }
  Variable out(y, needs_grad({&x, &weight, &bias}));
  // Saved: x for dW, W for dx, each only when that gradient is needed; never y.
  if (out.requires_grad())
    record({&x, &weight, &bias}, [x = weight.requires_grad() ? x : x.without_value(),
                                  weight = x.requires_grad() ? weight : weight.without_value(),
                                  bias = bias.without_value(), out = out.without_value(), N, in, out_features, dev] {
      if (!out.grad().defined()) return;
      const Tensor& dY = out.grad();
      // forward: y = x W^T + b  =>  dx += dy W, dW += dy^T x, db += sum_rows dy (the first dx is
      // written, beta = 0)
      if (x.requires_grad()) {
        bool fresh = false;
        const Tensor& dx = x.grad_to_write(fresh);
        backend::gemm(dev, false, false, N, in, out_features, 1.0, dY, weight.value(), fresh ? 0.0 : 1.0, dx);
      }
      if (weight.requires_grad())
        backend::gemm(dev, true, false, out_features, in, N, 1.0, dY, x.value(), 1.0, weight.ensure_grad());
      if (bias.requires_grad()) backend::bias_backward(dev, bias.ensure_grad(), dY);
    });
  return out;
}

Variable linear_activation(const Variable& x, const Variable& weight, const Variable& bias, Activation f, double c) {
  check_inputs("linear_activation", {&x, &weight, &bias});
  LINATTN_CHECK(x.shape().ndim() >= 1 && weight.shape().ndim() == 2 && x.shape().last() == weight.shape()[1] &&
                    bias.defined() && bias.shape() == Shape{weight.shape()[0]},
                "linear_activation: input ", x.value().str(), ", weight ", weight.value().str(), " and bias ",
                bias.defined() ? bias.value().str() : "(none)", " do not fit (expected [..., in], [out, in], [out])");
  const int64_t N = x.shape().rows(), in = weight.shape()[1], out_features = weight.shape()[0];
  const Device dev = x.device();
  const bool bf16 = weight.bf16().defined() && x.dtype() == DType::f32;
  const DType operand = bf16 ? DType::bf16 : x.dtype();  // of the products
  const Tensor xs = bf16 ? detail::bf16_value(x) : x.value(), w = bf16 ? weight.bf16() : weight.value();
  const bool recording = needs_grad({&x, &weight, &bias});
  const Shape shape = with_last(x.shape(), out_features);
  // z = x W^T + b, the activation's input: kept by the node (its bf16 copy, written by the bias pass,
  // in a SaveInBf16 scope) and by selective recomputation, which keeps products
  Tensor z, z16;
  Tensor y = Tensor::scratch(shape, x.dtype(), dev);
  if (detail::take_kept(detail::Kept::product, z, &z16)) {
    backend::activation_forward(dev, f, y, z, c);
  } else {
    // with the copy, z itself is a transient: the pass reads it and writes z + b into the copy only
    const bool copy =
        saving_in_bf16() && x.dtype() == DType::f32 && (recording || detail::keeping(detail::Kept::product));
    z = copy ? Tensor::scratch(shape, x.dtype(), dev) : scratch_for_node(shape, x.dtype(), dev, recording);
    if (copy) z16 = Tensor::scratch_kept(shape, DType::bf16, dev);
    backend::gemm(dev, false, true, N, out_features, in, 1.0, xs, w, 0.0, z);
    backend::bias_activation_forward(dev, f, y, z16, z, bias.value(), c);
    detail::keep(detail::Kept::product, z, &z16);
  }
  Variable out(y, recording);
  if (!recording) return out;
  record({&x, &weight, &bias}, [x = x.without_value(), xs = weight.requires_grad() ? xs : Tensor(),
                                weight = weight.without_value(), w = x.requires_grad() ? w : Tensor(),
                                bias = bias.without_value(), z = z16.defined() ? z16 : z, out = out.without_value(),
                                N, in, out_features, operand, f, c, dev] {
    if (!out.grad().defined()) return;
    // forward: y = c f(z), z = x W^T + b  =>  dz = c dy f'(z), db += sum_rows dz, dx += dz W, dW += dz^T x
    const Tensor dz = Tensor::scratch(z.shape(), operand, dev);
    const Tensor db =
        bias.requires_grad() ? bias.ensure_grad() : Tensor::scratch_zeros(bias.shape(), bias.dtype(), dev);
    backend::bias_activation_backward(dev, f, dz, db, z, out.grad(), c);
    if (x.requires_grad()) {
      bool fresh = false;
      const Tensor& dx = x.grad_to_write(fresh);
      backend::gemm(dev, false, false, N, in, out_features, 1.0, dz, w, fresh ? 0.0 : 1.0, dx);
    }
    if (weight.requires_grad())
      backend::gemm(dev, true, false, out_features, in, N, 1.0, dz, xs, 1.0, weight.ensure_grad());
  });
  return out;
}

// Whether `part` is the block of `whole` [C, in] that starts at row `row` (for an undefined whole:
// whether part is undefined too).
static bool is_block(const Tensor& part, const Tensor& whole, int64_t row) {
  if (!whole.defined() || !part.defined()) return whole.defined() == part.defined();
  const size_t at = size_t(row * whole.shape()[1]) * dtype_size(whole.dtype());
  return part.dtype() == whole.dtype() && part.raw() == static_cast<const char*>(whole.raw()) + at;
}

std::vector<Variable> linears(const Variable& x, const std::vector<Variable>& weights, const Variable& joined) {
  check_inputs("linears", {&x, &joined});
  LINATTN_CHECK(joined.shape().ndim() == 2 && x.shape().last() == joined.shape()[1], "linears: input ",
                x.value().str(), " does not match the joined weights ", joined.value().str());
  const int64_t N = x.shape().rows(), in = joined.shape()[1], C = joined.shape()[0];
  std::vector<int64_t> widths;
  int64_t row = 0;
  for (const Variable& w : weights) {
    LINATTN_CHECK(w.shape().ndim() == 2 && w.shape()[1] == in && row + w.shape()[0] <= C &&
                      is_block(w.value(), joined.value(), row) && is_block(w.grad(), joined.grad(), row) &&
                      is_block(w.bf16(), joined.bf16(), row),
                  "linears: weight ", w.value().str(), " is not rows ", row, "... of the joined weights ",
                  joined.value().str(), " (Parameters::joined)");
    widths.push_back(w.shape()[0]);
    row += w.shape()[0];
  }
  LINATTN_CHECK(row == C && !weights.empty() && weights.size() <= 8, "linears: ", weights.size(), " weights of ", row,
                " rows for the joined ", joined.value().str(), " (1 to 8 weights, all of its rows)");
  const Device dev = x.device();
  const bool bf16 = joined.bf16().defined() && x.dtype() == DType::f32;
  const Tensor xs = bf16 ? detail::bf16_value(x) : x.value();  // the products' operands
  const Tensor ws = bf16 ? joined.bf16() : joined.value();
  // copies: the outputs' bf16 copies, where the split writes them or selective recomputation kept them
  std::vector<Tensor> ys(weights.size()), copies(weights.size());
  if (!detail::take_kept(detail::Kept::product, ys[0], &copies[0])) {  // selective recomputation keeps products
    // y [N, C] = x [N, in] W^T, W = [W_0; W_1; ...] [C, in]: the outputs side by side, in bf16 with
    // bf16 products (the split widens them into the float32 outputs)
    Tensor y = Tensor::scratch({N, C}, bf16 ? DType::bf16 : x.dtype(), dev);
    backend::gemm(dev, false, true, N, C, in, 1.0, xs, ws, 0.0, y);
    // In a SaveInBf16 scope the split writes each output's bf16 copy too: the copy the nodes that
    // keep an output and the products that read one take (autograd/saved.h), with no conversion.
    const bool split_copies = bf16 && saving_in_bf16();
    for (size_t i = 0; i < ys.size(); ++i) {
      ys[i] = Tensor::scratch(with_last(x.shape(), widths[i]), x.dtype(), dev);
      if (split_copies) copies[i] = detail::bf16_copy_scratch(ys[i].shape(), dev);
    }
    backend::split_columns(dev, ys, split_copies ? copies : std::vector<Tensor>{}, y);
    for (size_t i = 0; i < ys.size(); ++i) detail::keep(detail::Kept::product, ys[i], &copies[i]);
  } else {
    for (size_t i = 1; i < ys.size(); ++i) detail::take_kept(detail::Kept::product, ys[i], &copies[i]);
  }
  const bool grad = needs_grad({&x, &joined});
  std::vector<Variable> outs, outs_grad;
  for (size_t i = 0; i < ys.size(); ++i) {
    outs.emplace_back(ys[i], grad);
    if (copies[i].defined()) outs.back().set_bf16(copies[i]);
    outs_grad.push_back(outs.back().without_value());
  }
  if (!grad) return outs;
  // The tape sees the weights themselves (their gradients are final once this node has run).
  std::vector<const Variable*> inputs{&x};
  for (const Variable& w : weights) inputs.push_back(&w);
  // Saved: x's product operand for dW (its bf16 copy under bf16), the joined weights for dx.
  record(inputs, [x = x.without_value(), xs = joined.requires_grad() ? xs : Tensor(), joined, ws,
                  outs = std::move(outs_grad), N, in, C, dev, bf16] {
    std::vector<Tensor> dys;
    bool any = false;
    for (const Variable& o : outs) {
      any = any || o.grad().defined();
      dys.push_back(o.grad().defined() ? o.grad() : Tensor::scratch_zeros(o.shape(), o.dtype(), dev));
    }
    if (!any) return;
    // forward: y_i = x W_i^T  =>  dy = [dy_0 | dy_1 | ...], dx += dy W, dW += dy^T x (the first dx
    // is written, beta = 0); dy joined in the products' dtype
    Tensor dY = Tensor::scratch({N, C}, bf16 ? DType::bf16 : dys[0].dtype(), dev);
    backend::join_columns(dev, dY, dys);
    if (x.requires_grad()) {
      bool fresh = false;
      const Tensor& dx = x.grad_to_write(fresh);
      backend::gemm(dev, false, false, N, in, C, 1.0, dY, ws, fresh ? 0.0 : 1.0, dx);
    }
    if (joined.requires_grad()) backend::gemm(dev, true, false, C, in, N, 1.0, dY, xs, 1.0, joined.ensure_grad());
  });
  return outs;
}

namespace {

// The backward of y = h W^T (h [N, in], W [out, in]) for an operand h its node does not keep: dW +=
// dy^T h, h made again by `remake` into scratch of the products' operand dtype, then dh = dy W,
// shaped and typed like `like` (undefined unless want_dh). dy: the gradient of `out`, which with bf16
// products the products read in bf16 (its copy, or converted once: detail::bf16_gradient).
Tensor product_backward_remaking(const Variable& out, const Variable& weight, bool bf16, DType operand_dtype, int64_t N,
                                 const Variable& like, bool want_dh,
                                 const std::function<void(const Tensor& h)>& remake) {
  const Tensor& dy = out.grad();
  const Device dev = dy.device();
  const int64_t in = weight.shape()[1], out_features = weight.shape()[0];
  const Tensor dY = bf16 ? detail::bf16_gradient(out) : dy;
  // dW first: the remade h goes before dh is made
  if (weight.requires_grad()) {
    const Tensor h = Tensor::scratch({N, in}, operand_dtype, dev);
    remake(h);
    backend::gemm(dev, true, false, out_features, in, N, 1.0, dY, h, 1.0, weight.ensure_grad());
  }
  if (!want_dh) return Tensor();
  Tensor dh = Tensor::scratch(like.shape(), like.dtype(), dev);
  backend::gemm(dev, false, false, N, in, out_features, 1.0, dY, bf16 ? weight.bf16() : weight.value(), 0.0, dh);
  return dh;
}

}  // namespace

Variable swiglu_linear(const Variable& gate, const Variable& up, const Variable& weight) {
  check_inputs("swiglu_linear", {&gate, &up, &weight});
  check_same_shape(gate.value(), up.value(), "swiglu_linear");
  LINATTN_CHECK(weight.shape().ndim() == 2 && gate.shape().last() == weight.shape()[1], "swiglu_linear: input ",
                gate.value().str(), " does not match weight ", weight.value().str(),
                " (expected input [..., in] and weight [out, in])");
  const int64_t N = gate.shape().rows(), in = weight.shape()[1], out_features = weight.shape()[0];
  const Device dev = gate.device();
  const bool bf16 = weight.bf16().defined() && gate.dtype() == DType::f32;
  // The product's operand h = silu(gate) * up: float32, or with bf16 products written as bf16 by the
  // swiglu kernel itself (no float32 h, no conversion).
  const DType operand_dtype = bf16 ? DType::bf16 : gate.dtype();
  auto weight_operand = [bf16](const Variable& w) { return bf16 ? w.bf16() : w.value(); };
  Tensor y, y16;  // y16: y's bf16 copy, where selective recomputation keeps one (checkpoint.h)
  if (!detail::take_kept(detail::Kept::product, y, &y16)) {  // selective recomputation keeps products
    y = Tensor::scratch(with_last(gate.shape(), out_features), gate.dtype(), dev);
    Tensor h = Tensor::scratch(gate.shape(), operand_dtype, dev);
    backend::swiglu_forward(dev, h, gate.value(), up.value());
    // y [N, out] = h [N, in] W^T
    backend::gemm(dev, false, true, N, out_features, in, 1.0, h, weight_operand(weight), 0.0, y);
    detail::keep(detail::Kept::product, y, &y16);
  }
  Variable out(y, needs_grad({&gate, &up, &weight}));
  if (y16.defined()) out.set_bf16(y16);
  // Saved: gate and up (as swiglu's node keeps them, in bf16 in a SaveInBf16 scope) and the weight;
  // never h, which the backward recomputes. The kernels read bf16 gate and up as they are.
  if (out.requires_grad())
    record({&gate, &up, &weight}, [gate = Saved(gate), up = Saved(up), weight, out = out.without_value(), N, dev,
                                   bf16, operand_dtype] {
      if (!out.grad().defined()) return;
      const auto [g, u] = detail::stored_alike(gate, up);
      // forward: y = h W^T, h = silu(gate) * up  =>  dW += dy^T h (h recomputed), dh = dy W, then
      // swiglu's backward
      const Tensor dh = product_backward_remaking(out, weight, bf16, operand_dtype, N, gate.var(),
                                                  gate.var().requires_grad() || up.var().requires_grad(),
                                                  [&](const Tensor& h) { backend::swiglu_forward(dev, h, g, u); });
      if (!dh.defined()) return;
      bool write = false;
      const auto [dgate, dup] = detail::grads_to_write(gate.var(), up.var(), write);
      backend::swiglu_backward(dev, dgate, dup, g, u, dh, write);
    });
  return out;
}

Variable rmsnorm_gate_linear(const Variable& gate, const Variable& x, const Variable& norm_weight, double eps,
                             const Variable& weight) {
  check_inputs("rmsnorm_gate_linear", {&gate, &x, &norm_weight, &weight});
  const int64_t D = x.shape().last(), R = x.shape().rows();
  LINATTN_CHECK(norm_weight.shape() == Shape{D} && weight.shape().ndim() == 2 &&
                    gate.shape().last() == weight.shape()[1] && gate.value().numel() == x.value().numel(),
                "rmsnorm_gate_linear: gate ", gate.value().str(), ", x ", x.value().str(), ", norm weight ",
                norm_weight.value().str(), " and weight ", weight.value().str(),
                " do not fit (expected gate [..., in], x of as many elements in rows of D, [D] and [out, in])");
  const int64_t N = gate.shape().rows(), in = weight.shape()[1], out_features = weight.shape()[0];
  const Device dev = gate.device();
  const bool bf16 = weight.bf16().defined() && gate.dtype() == DType::f32;
  // The product's operand h = silu(gate) * rmsnorm(x): float32, or with bf16 products written as bf16
  // by the norm's pass itself (no float32 h, no conversion, no normed x).
  const DType operand_dtype = bf16 ? DType::bf16 : gate.dtype();
  auto weight_operand = [bf16](const Variable& w) { return bf16 ? w.bf16() : w.value(); };
  const bool recording = needs_grad({&gate, &x, &norm_weight, &weight});
  Tensor rstd = scratch_for_node({R}, x.dtype(), dev, recording);
  // In a SaveInBf16 scope the pass writes x's bf16 copy too (what the node keeps), as rmsnorm's does.
  Tensor x16;
  if (recording && saving_in_bf16() && x.dtype() == DType::f32 && !x.bf16().defined() && !x.is_parameter())
    x16 = detail::bf16_copy_scratch(x.shape(), dev);
  Tensor y, y16;  // y16: y's bf16 copy, where selective recomputation keeps one (checkpoint.h)
  if (!detail::take_kept(detail::Kept::product, y, &y16)) {  // selective recomputation keeps products
    y = Tensor::scratch(with_last(gate.shape(), out_features), gate.dtype(), dev);
    Tensor h = Tensor::scratch(gate.shape(), operand_dtype, dev);
    backend::rmsnorm_gate_forward(dev, h, x16, rstd, x.value(), gate.value(), norm_weight.value(), eps, false);
    // y [N, out] = h [N, in] W^T
    backend::gemm(dev, false, true, N, out_features, in, 1.0, h, weight_operand(weight), 0.0, y);
    detail::keep(detail::Kept::product, y, &y16);
  } else if (recording) {
    backend::rmsnorm_gate_forward(dev, Tensor(), x16, rstd, x.value(), gate.value(), norm_weight.value(), eps, false);
  }
  if (x16.defined()) x.set_bf16(x16);
  Variable out(y, recording);
  if (y16.defined()) out.set_bf16(y16);
  // Saved: x and gate (in bf16 in a SaveInBf16 scope), rstd and the weights; never h or the normed x,
  // which the backward recomputes in one pass. The kernels read bf16 x and gate as they are.
  if (recording)
    record({&gate, &x, &norm_weight, &weight},
           [gate = Saved(gate), x = Saved(x), norm_weight, weight, rstd, out = out.without_value(), N, dev, bf16,
            operand_dtype, eps] {
             if (!out.grad().defined()) return;
             const auto [xs, gs] = detail::stored_alike(x, gate);
             // forward: y = h W^T, h = silu(gate) rmsnorm(x)  =>  dW += dy^T h (h made again from the kept
             // x, gate and rstd), dh = dy W, then the gated norm's backward
             const bool want_dh = gate.var().requires_grad() || x.var().requires_grad() || norm_weight.requires_grad();
             const Tensor dh = product_backward_remaking(
                 out, weight, bf16, operand_dtype, N, gate.var(), want_dh, [&](const Tensor& h) {
                   backend::rmsnorm_gate_forward(dev, h, Tensor(), rstd, xs, gs, norm_weight.value(), eps, true);
                 });
             if (!dh.defined()) return;
             bool write = false;
             const auto [dgate, dx] = detail::grads_to_write(gate.var(), x.var(), write);
             backend::rmsnorm_gate_backward(dev, dx, dgate, grad_or_none(norm_weight), xs, gs, norm_weight.value(),
                                            rstd, dh, write);
           });
  return out;
}

Variable swiglu_mlp(const Variable& x, const Variable& gate, const Variable& up, const Variable& gate_up,
                    const Variable& down) {
  check_inputs("swiglu_mlp", {&x, &gate, &up, &gate_up, &down});
  const int64_t I = gate.shape()[0], in = x.shape().last(), out_features = down.shape()[0], N = x.shape().rows();
  LINATTN_CHECK(gate.shape() == (Shape{I, in}) && up.shape() == gate.shape() && gate_up.shape() == (Shape{2 * I, in}) &&
                    down.shape() == (Shape{out_features, I}),
                "swiglu_mlp: input ", x.value().str(), ", gate ", gate.value().str(), ", up ", up.value().str(),
                ", gate_up ", gate_up.value().str(), " and down ", down.value().str(),
                " do not fit (expected [..., in], [I, in] twice, [2 I, in] and [out, I])");
  for (const auto& [w, row] : {std::pair{&gate, int64_t(0)}, {&up, I}})
    LINATTN_CHECK(is_block(w->value(), gate_up.value(), row) && is_block(w->grad(), gate_up.grad(), row) &&
                      is_block(w->bf16(), gate_up.bf16(), row),
                  "swiglu_mlp: weight ", w->value().str(), " is not rows ", row, "... of the joined weights ",
                  gate_up.value().str(), " (Parameters::joined)");
  const Device dev = x.device();
  const bool bf16 = gate_up.bf16().defined() && down.bf16().defined() && x.dtype() == DType::f32;
  const DType operand = bf16 ? DType::bf16 : x.dtype();  // of the products
  const Tensor xs = bf16 ? detail::bf16_value(x) : x.value();
  const Tensor w_gu = bf16 ? gate_up.bf16() : gate_up.value(), w_down = bf16 ? down.bf16() : down.value();
  const bool grad = needs_grad({&x, &gate_up, &down});
  // gu [N, 2 I], which the node keeps: float32, or with bf16 products bf16, as the product writes it
  // (SwiGLU and its backward read it so; no float32 gu and no conversion)
  Tensor gu, y, y16;  // y16: y's bf16 copy, where selective recomputation keeps one
  // selective recomputation keeps both products, gu as it was made
  if (detail::take_kept(detail::Kept::product, gu, nullptr, false)) {
    detail::take_kept(detail::Kept::product, y, &y16);
  } else {
    y = Tensor::scratch(with_last(x.shape(), out_features), x.dtype(), dev);  // first: below the transients
    const bool kept = grad || detail::keeping(detail::Kept::product);
    gu = bf16 && kept ? Tensor::scratch_kept(with_last(x.shape(), 2 * I), operand, dev)
                      : Tensor::scratch(with_last(x.shape(), 2 * I), operand, dev);
    // gu [N, 2 I] = x [N, in] [gate; up]^T: gate's outputs, then up's
    backend::gemm(dev, false, true, N, 2 * I, in, 1.0, xs, w_gu, 0.0, gu);
    const Tensor h = Tensor::scratch(with_last(x.shape(), I), operand, dev);
    backend::swiglu_joined_forward(dev, h, Tensor(), gu);
    detail::keep_exact(detail::Kept::product, gu);
    // y [N, out] = h [N, I] down^T
    backend::gemm(dev, false, true, N, out_features, I, 1.0, h, w_down, 0.0, y);
    detail::keep(detail::Kept::product, y, &y16);
  }
  const Tensor& kept = gu;
  Variable out(y, grad);
  if (y16.defined()) out.set_bf16(y16);
  if (!grad) return out;
  record({&x, &gate, &up, &down}, [x = x.without_value(), xs = gate_up.requires_grad() ? xs : Tensor(), gate_up,
                                   down, w_gu, w_down, kept, out = out.without_value(), N, in, I, out_features,
                                   operand, dev, bf16] {
    if (!out.grad().defined()) return;
    const Tensor dY = bf16 ? detail::bf16_gradient(out) : out.grad();
    // forward: y = h down^T, h = silu(g) u, [g | u] = x [gate; up]^T  =>  d down += dy^T h, dh = dy down,
    // [dg | du] from SwiGLU's rule, dx += [dg | du] [gate; up], d[gate; up] += [dg | du]^T x.
    // [dg | du] first, then the recomputed h in the place dh leaves.
    const bool below = x.requires_grad() || gate_up.requires_grad();
    Tensor dgu;
    if (below) {
      Tensor dh = Tensor::scratch({N, I}, out.dtype(), dev);
      backend::gemm(dev, false, false, N, I, out_features, 1.0, dY, w_down, 0.0, dh);
      dgu = Tensor::scratch(kept.shape(), operand, dev);
      backend::swiglu_joined_backward(dev, dgu, kept, dh);
    }
    if (down.requires_grad()) {
      const Tensor h = Tensor::scratch({N, I}, operand, dev);  // the product's operand, recomputed
      backend::swiglu_joined_forward(dev, h, Tensor(), kept);
      backend::gemm(dev, true, false, out_features, I, N, 1.0, dY, h, 1.0, down.ensure_grad());
    }
    if (!below) return;
    if (x.requires_grad()) {
      bool fresh = false;
      const Tensor& dx = x.grad_to_write(fresh);
      backend::gemm(dev, false, false, N, in, 2 * I, 1.0, dgu, w_gu, fresh ? 0.0 : 1.0, dx);
    }
    if (gate_up.requires_grad()) backend::gemm(dev, true, false, 2 * I, in, N, 1.0, dgu, xs, 1.0, gate_up.ensure_grad());
  });
  return out;
}

Variable rmsnorm(const Variable& x, const Variable& weight, double eps, int64_t groups) {
  check_inputs("rmsnorm", {&x, &weight});
  const int64_t D = x.shape().last(), N = x.shape().rows();
  LINATTN_CHECK(weight.shape() == Shape{D}, "rmsnorm: weight ", weight.value().str(), " does not match input ",
                x.value().str(), " (expected [", D, "])");
  LINATTN_CHECK(groups >= 1 && D % groups == 0, "rmsnorm: ", groups, " groups do not split the last dim ", D,
                " of ", x.value().str());
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  // One rstd per group of each row: its shape tells the kernels the groups (kernels/backend.def).
  const bool recording = needs_grad({&x, &weight});
  Tensor rstd = groups == 1 ? scratch_for_node({N}, x.dtype(), x.device(), recording)
                            : scratch_for_node({N, groups}, x.dtype(), x.device(), recording);
  // In a SaveInBf16 scope the kernel writes, in the same pass, y's bf16 copy (what the bf16 products
  // reading y take, detail::bf16_value) and, when recording, x's (what the node keeps, Saved): no
  // conversion launches of their own.
  Tensor y16, x16;
  if (saving_in_bf16() && x.dtype() == DType::f32) {
    y16 = detail::bf16_copy_scratch(x.shape(), x.device());
    if (recording && !x.bf16().defined() && !x.is_parameter()) x16 = detail::bf16_copy_scratch(x.shape(), x.device());
  }
  backend::rmsnorm_forward(x.device(), y, y16, x16, rstd, x.value(), weight.value(), eps);
  if (x16.defined()) x.set_bf16(x16);
  Variable out(y, needs_grad({&x, &weight}));
  if (y16.defined()) out.set_bf16(y16);
  if (out.requires_grad())
    record({&x, &weight}, [x = Saved(x), weight, rstd, out = out.without_value()] {
      if (!out.grad().defined()) return;
      // dx = prior + the norm's part: a residual stream's gradient passed on is read, not copied
      Tensor prior;
      const Tensor dx = x.var().requires_grad() ? x.var().grad_to_add(prior)
                                                : Tensor::scratch(x.var().shape(), x.var().dtype(), x.var().device());
      backend::rmsnorm_backward(weight.device(), dx, Tensor(), grad_or_none(weight), x.stored(), weight.value(),
                                rstd, out.grad(), prior);
    });
  return out;
}

std::pair<Variable, Variable> add_rmsnorm(const Variable& a, const Variable& b, const Variable& weight, double eps) {
  check_inputs("add_rmsnorm", {&a, &b, &weight});
  check_same_shape(a.value(), b.value(), "add_rmsnorm");
  const int64_t D = a.shape().last(), N = a.shape().rows();
  LINATTN_CHECK(weight.shape() == Shape{D}, "add_rmsnorm: weight ", weight.value().str(), " does not match input ",
                a.value().str(), " (expected [", D, "])");
  const Device dev = a.device();
  const bool recording = needs_grad({&a, &b, &weight});
  Tensor s = Tensor::scratch(a.shape(), a.dtype(), dev), y = Tensor::scratch(a.shape(), a.dtype(), dev);
  Tensor rstd = scratch_for_node({N}, a.dtype(), dev, recording);
  // In a SaveInBf16 scope the kernel writes y's bf16 copy (the products' operand) and, when
  // recording, s's (what the node keeps), as rmsnorm does.
  Tensor y16, s16;
  if (saving_in_bf16() && a.dtype() == DType::f32) {
    y16 = detail::bf16_copy_scratch(a.shape(), dev);
    if (recording) s16 = detail::bf16_copy_scratch(a.shape(), dev);
  }
  backend::add_rmsnorm_forward(dev, s, y, y16, s16, rstd, a.value(), b.value(), weight.value(), eps);
  Variable sum(s, recording), out(y, recording);
  if (s16.defined()) sum.set_bf16(s16);
  if (y16.defined()) out.set_bf16(y16);
  // Under bf16 products the backward writes ds's bf16 copy in its pass, for b (the branch: a
  // product's output, whose backward reads the gradient in bf16) to take with ds.
  const bool ds_copy = y16.defined() && b.requires_grad();
  if (recording)
    record({&a, &b, &weight}, [a = a.without_value(), b = b.without_value(), kept = Saved(sum), weight,
                               rstd, out = out.without_value(), ds_copy] {
      // forward: s = a + b, y = rmsnorm(s)  =>  ds = (ds from s's other readers) + rmsnorm'(dy),
      // da += ds, db += ds (passed on, as add's)
      const Variable& sv = kept.var();
      Tensor ds16;
      if (out.grad().defined()) {
        Tensor prior;
        const Tensor& ds = sv.grad_to_add(prior);
        if (ds_copy) ds16 = Tensor::scratch(ds.shape(), DType::bf16, ds.device());
        backend::rmsnorm_backward(weight.device(), ds, ds16, grad_or_none(weight), kept.stored(), weight.value(),
                                  rstd, out.grad(), prior);
      }
      if (!sv.grad().defined()) return;
      accumulate(a, sv.grad());
      if (b.requires_grad()) b.add_grad(sv.grad(), ds16);
    });
  return {sum, out};
}

Variable l2norm(const Variable& x, double eps) {
  check_inputs("l2norm", {&x});
  const int64_t N = x.shape().rows();
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  Tensor r = scratch_for_node({N}, x.dtype(), x.device(), needs_grad({&x}));
  backend::l2norm_forward(x.device(), y, r, x.value(), eps);
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), r, out = Saved(out)] {  // dx from y and r, not x
      if (!out.var().grad().defined()) return;
      backend::l2norm_backward(x.device(), x.ensure_grad(), out.stored(), r, out.var().grad());
    });
  return out;
}

Variable embedding(const Tensor& ids, const Variable& table) {
  check_inputs("embedding", {&table});
  LINATTN_CHECK(ids.dtype() == DType::i32, "embedding: ids must be i32, got ", ids.str());
  LINATTN_CHECK(table.shape().ndim() == 2, "embedding: table must be [vocab, dim], got ", table.value().str());
  // Host ids are fine for a device table: the entry checks them on the host and copies them over
  // without waiting (a batch comes from the host).
  LINATTN_CHECK(ids.device() == table.device() || ids.device() == Device::cpu, "embedding: ids on the ",
                device_name(ids.device()), " but the table on the ", device_name(table.device()),
                "; move the batch to the model's device");
  Tensor y = Tensor::scratch(ids.shape().appended(table.shape()[1]), table.dtype(), table.device());
  backend::embedding_forward(table.device(), y, ids, table.value());
  Variable out(y, needs_grad({&table}));
  if (out.requires_grad())
    record({&table}, [ids, table = table.without_value(), out = out.without_value()] {
      if (!out.grad().defined()) return;
      backend::embedding_backward(table.device(), table.ensure_grad(), ids, out.grad());
    });
  return out;
}

Variable short_conv(const Variable& x, const Variable& weight, const Variable& bias, const Segments& segments) {
  check_inputs("short_conv", {&x, &weight, &bias});
  LINATTN_CHECK(x.shape().ndim() == 3, "short_conv: input must be [B, T, C], got ", x.value().str());
  const int64_t C = x.shape()[2];
  LINATTN_CHECK(weight.shape().ndim() == 2 && weight.shape()[0] == C, "short_conv: weight ", weight.value().str(),
                " does not match input ", x.value().str(), " (expected [", C, ", width])");
  if (bias.defined())
    LINATTN_CHECK(bias.shape() == Shape{C}, "short_conv: bias ", bias.value().str(), " should be [", C, "]");
  check_segments(segments, x.shape()[0], x.shape()[1]);
  Tensor table;  // holds the offsets on the device while the kernels run (forward and backward)
  const Sequences seqs = segments.sequences(x.device(), table);
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  backend::short_conv_forward(x.device(), y, x.value(), weight.value(), value_or_none(bias), seqs);
  Variable out(y, needs_grad({&x, &weight, &bias}));
  if (out.requires_grad())
    record({&x, &weight, &bias},
           [x = Saved(x), weight, bias = bias.without_value(), out = out.without_value(), table, seqs] {
             if (!out.grad().defined()) return;
             backend::short_conv_backward(weight.device(), grad_or_scratch(x.var()), grad_or_scratch(weight),
                                          grad_or_none(bias), x.value(), weight.value(), out.grad(), seqs);
           });
  return out;
}

Variable cross_entropy(const Variable& logits, const Tensor& targets, int32_t ignore_index) {
  check_inputs("cross_entropy", {&logits});
  LINATTN_CHECK(targets.dtype() == DType::i32, "cross_entropy: targets must be i32, got ", targets.str());
  const int64_t N = logits.shape().rows();
  LINATTN_CHECK(targets.numel() == N, "cross_entropy: ", targets.str(), " targets for logits ", logits.value().str(),
                " (expected ", N, " targets)");
  // Host targets are fine for device logits: the entry copies them over without waiting.
  LINATTN_CHECK(targets.device() == logits.device() || targets.device() == Device::cpu, "cross_entropy: targets on the ",
                device_name(targets.device()), " but the logits on the ", device_name(logits.device()),
                "; move the batch to the model's device");
  Tensor lse = Tensor::scratch({N}, logits.dtype(), logits.device());
  Tensor loss = Tensor::scratch({1}, logits.dtype(), logits.device());
  const int64_t count =
      backend::cross_entropy_forward(logits.device(), loss, lse, logits.value(), targets, ignore_index);
  Variable out(loss, needs_grad({&logits}));
  if (out.requires_grad() && count > 0)
    record({&logits}, [logits, targets, lse, out = out.without_value(), ignore_index, count] {
      if (!out.grad().defined()) return;
      backend::cross_entropy_backward(logits.device(), logits.ensure_grad(), logits.value(), lse, targets, out.grad(),
                                      count, ignore_index, false);
    });
  return out;
}

// The logits of rows [r0, r0 + rows) of x [N, in] (float32 or its bf16 copy) against w [V, in].
static Tensor logits_of_rows(const Tensor& x, const Tensor& w, int64_t r0, int64_t rows, DType dtype) {
  const int64_t in = w.size(1), V = w.size(0);
  Tensor logits = Tensor::scratch({rows, V}, dtype, x.device());
  backend::gemm(x.device(), false, true, rows, V, in, 1.0, x.view_at(r0 * in, {rows, in}), w, 0.0, logits);
  return logits;
}

// The head's products' backward for the logits' gradient dY of rows [r0, r0 + rows) (the products'
// operand: bf16 with bf16 products): dx's rows = dY W (written when `fresh`, else added to; dx
// undefined: not wanted) and dW += dY^T x. xs and ws: x and the weight as the forward's products read
// them.
static void head_products_backward(const Tensor& dY, const Tensor& xs, const Variable& weight, const Tensor& ws,
                                   const Tensor& dx, bool fresh, int64_t r0) {
  const Device dev = dY.device();
  const int64_t rows = dY.size(0), V = dY.size(1), in = ws.size(1);
  if (dx.defined())
    backend::gemm(dev, false, false, rows, in, V, 1.0, dY, ws, fresh ? 0.0 : 1.0, dx.view_at(r0 * in, {rows, in}));
  if (weight.requires_grad())
    backend::gemm(dev, true, false, V, in, rows, 1.0, dY, xs.view_at(r0 * in, {rows, in}), 1.0, weight.ensure_grad());
}

// The rows of `targets` that take a loss, where the host knows it without waiting for the device:
// host targets are counted here, device targets checked before their upload
// (backend::CheckedDeviceTokens) all count; -1 for device targets the host has not checked.
static int64_t counted_rows(const Tensor& targets, int32_t ignore_index) {
  if (targets.device() != Device::cpu) return backend::CheckedDeviceTokens::active() ? targets.numel() : -1;
  const int32_t* t = targets.data<int32_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) count += t[i] != ignore_index;
  return count;
}

Variable linear_cross_entropy(const Variable& x, const Variable& weight, const Tensor& targets, int32_t ignore_index,
                              size_t chunk_bytes, const Tensor& seed) {
  check_inputs("linear_cross_entropy", {&x, &weight});
  LINATTN_CHECK(x.shape().ndim() >= 1 && weight.shape().ndim() == 2 && x.shape().last() == weight.shape()[1],
                "linear_cross_entropy: input ", x.value().str(), " does not match weight ", weight.value().str(),
                " (expected input [..., in] and weight [vocab, in])");
  LINATTN_CHECK(targets.dtype() == DType::i32, "linear_cross_entropy: targets must be i32, got ", targets.str());
  const int64_t N = x.shape().rows(), V = weight.shape()[0];
  LINATTN_CHECK(targets.numel() == N, "linear_cross_entropy: ", targets.str(), " targets for input ", x.value().str(),
                " (expected ", N, " targets)");
  LINATTN_CHECK(targets.device() == x.device() || targets.device() == Device::cpu,
                "linear_cross_entropy: targets on the ", device_name(targets.device()), " but the input on the ",
                device_name(x.device()), "; move the batch to the model's device");
  const Device dev = x.device();
  const DType dt = x.dtype();
  if (seed.defined())
    LINATTN_CHECK(seed.numel() == 1 && seed.dtype() == dt && seed.device() == dev, "linear_cross_entropy: the seed ",
                  seed.str(), " on the ", device_name(seed.device()), " is not the loss's gradient (one ",
                  dtype_name(dt), " on the ", device_name(dev), ")");
  const bool bf16 = weight.bf16().defined() && dt == DType::f32;
  // The products' operands: x (or its bf16 copy, which the node keeps) and the weight (or its copy).
  const Tensor xs = bf16 ? detail::bf16_value(x) : x.value();
  auto weight_operand = [bf16](const Variable& w) { return bf16 ? w.bf16() : w.value(); };
  const int64_t chunk = std::clamp<int64_t>(int64_t(chunk_bytes / (size_t(V) * dtype_size(dt))), 1,
                                            std::max<int64_t>(N, 1));
  const bool grad = needs_grad({&x, &weight});
  // With the seed known and the rows that count too, the backward runs here, on each chunk's logits
  // as they are made: no second product of the logits in backward and no lse kept.
  const int64_t ahead_count = grad && seed.defined() ? counted_rows(targets, ignore_index) : -1;
  const bool ahead = ahead_count > 0;
  Tensor lse = ahead ? Tensor::scratch({N}, dt, dev) : scratch_for_node({N}, dt, dev, grad);
  const Tensor dx = ahead && x.requires_grad() ? Tensor::scratch(x.shape(), dt, dev) : Tensor();
  std::vector<std::pair<Tensor, int64_t>> parts;  // each chunk's mean loss and counted rows
  int64_t count = 0;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t rows = std::min(chunk, N - r0);
    Tensor part = Tensor::scratch({1}, dt, dev);
    const Tensor logits = logits_of_rows(xs, weight_operand(weight), r0, rows, dt);
    const Tensor lse_rows = lse.view_at(r0, {rows}), target_rows = targets.view_at(r0, {rows});
    int64_t c = 0;
    if (ahead) {
      // the loss's backward on these logits as they are made, for the seed: dlogits in the products' dtype
      const Tensor dY = Tensor::scratch({rows, V}, bf16 ? DType::bf16 : dt, dev);
      c = backend::cross_entropy_forward_backward(dev, part, lse_rows, dY, logits, target_rows, seed, ahead_count,
                                                  ignore_index);
      head_products_backward(dY, xs, weight, weight_operand(weight), dx, true, r0);
    } else {
      c = backend::cross_entropy_forward(dev, part, lse_rows, logits, target_rows, ignore_index);
    }
    parts.emplace_back(part, c);
    count += c;
  }
  LINATTN_CHECK(!ahead || count == ahead_count, "linear_cross_entropy: ", count, " rows took a loss, ", ahead_count,
                " were counted ahead");
  Tensor loss;
  if (parts.size() == 1) {
    loss = parts[0].first;  // the single call's mean, as cross_entropy(linear(x, weight)) gives it
  } else {
    loss = Tensor::scratch({1}, dt, dev);
    loss.zero_();
    for (const auto& [part, c] : parts)
      if (c > 0) backend::axpy(dev, loss, double(c) / double(count), part);  // the mean over every counted row
  }
  Variable out(loss, grad);
  if (!out.requires_grad() || count == 0) return out;
  if (ahead) {
    // The weight's gradient is added to already; x's is passed on, for the seed it was made with.
    record({&x, &weight}, [x = x.without_value(), dx, seed, out = out.without_value()] {
      if (!out.grad().defined()) return;
      LINATTN_CHECK(out.grad().raw() == seed.raw(), "linear_cross_entropy: its backward ran ahead for the seed ",
                    seed.str(), ", but the loss was given another gradient (pass that tensor as the seed, or none)");
      if (dx.defined()) x.add_grad(dx);
    });
    return out;
  }
  // Saved: x (as the products read it), lse and the targets; the logits are made again, a chunk at a
  // time, in backward.
  record({&x, &weight}, [x = bf16 ? x.without_value() : x, xs = bf16 ? xs : Tensor(), weight, targets, lse,
                         out = out.without_value(), N, V, chunk, count, ignore_index, dev, dt, bf16, weight_operand] {
    if (!out.grad().defined()) return;
    const Tensor xin = bf16 ? xs : x.value();
    bool fresh = false;
    const Tensor dx = x.requires_grad() ? x.grad_to_write(fresh) : Tensor();
    for (int64_t r0 = 0; r0 < N; r0 += chunk) {
      const int64_t rows = std::min(chunk, N - r0);
      // forward: loss = mean cross-entropy of logits = x W^T  =>  dlogits by the loss's backward (the
      // logits made again), then the products' backward; dlogits written as the products' operand
      // (in bf16 with bf16 products: no float32 copy, no conversion)
      const Tensor dY = Tensor::scratch({rows, V}, bf16 ? DType::bf16 : dt, dev);
      backend::cross_entropy_backward(dev, dY, logits_of_rows(xin, weight_operand(weight), r0, rows, dt),
                                      lse.view_at(r0, {rows}), targets.view_at(r0, {rows}), out.grad(), count,
                                      ignore_index, true);
      head_products_backward(dY, xin, weight, weight_operand(weight), dx, fresh, r0);
    }
  });
  return out;
}

}  // namespace linattn::ops
