// Matmul, norms, embedding, convolution and the loss.
#include "autograd/op_support.h"
#include "autograd/ops.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"

namespace linattn::ops {

using detail::check_inputs;
using detail::data_or_null;
using detail::grad_or_null;

static Shape with_last(Shape s, int64_t last) {
  s[-1] = last;
  return s;
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
  Tensor y = Tensor::scratch(with_last(x.shape(), out_features), x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* Y = y.data<T>();
    // y [N, out] = x [N, in] W^T
    cpu::gemm<T>(false, true, N, out_features, in, T(1), x.value().data<T>(), in, weight.value().data<T>(), in, T(0),
                 Y, out_features);
    if (bias.defined()) {
      const T* b = bias.value().data<T>();
#pragma omp parallel for if (N * out_features > (1 << 15))
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < out_features; ++j) Y[i * out_features + j] += b[j];
    }
  });
  Variable out(y, needs_grad({&x, &weight, &bias}));
  if (out.requires_grad())
    record({&x, &weight, &bias}, [x, weight, bias, out, N, in, out_features] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        const T* dY = out.grad().data<T>();
        // forward: y = x W^T + b  =>  dx += dy W, dW += dy^T x, db += sum_rows dy
        if (T* dx = grad_or_null<T>(x))
          cpu::gemm<T>(false, false, N, in, out_features, T(1), dY, out_features, weight.value().data<T>(), in, T(1),
                       dx, in);
        if (T* dW = grad_or_null<T>(weight))
          cpu::gemm<T>(true, false, out_features, in, N, T(1), dY, out_features, x.value().data<T>(), in, T(1), dW,
                       in);
        if (T* db = grad_or_null<T>(bias))
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j < out_features; ++j) db[j] += dY[i * out_features + j];
      });
    });
  return out;
}

Variable rmsnorm(const Variable& x, const Variable& weight, double eps) {
  check_inputs("rmsnorm", {&x, &weight});
  const int64_t D = x.shape().last(), N = x.shape().rows();
  LINATTN_CHECK(weight.shape() == Shape{D}, "rmsnorm: weight ", weight.value().str(), " does not match input ",
                x.value().str(), " (expected [", D, "])");
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  Tensor rstd = Tensor::scratch({N}, x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward(y.data<T>(), rstd.data<T>(), x.value().data<T>(), weight.value().data<T>(), N, D, T(eps));
  });
  Variable out(y, needs_grad({&x, &weight}));
  if (out.requires_grad())
    record({&x, &weight}, [x, weight, rstd, out, N, D] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        Tensor dx = x.requires_grad() ? x.ensure_grad() : Tensor::scratch_zeros(x.shape(), x.dtype());
        cpu::rmsnorm_backward(dx.data<T>(), grad_or_null<T>(weight), x.value().data<T>(), weight.value().data<T>(),
                              rstd.data<T>(), out.grad().data<T>(), N, D);
      });
    });
  return out;
}

Variable l2norm(const Variable& x, double eps) {
  check_inputs("l2norm", {&x});
  const int64_t D = x.shape().last(), N = x.shape().rows();
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  Tensor r = Tensor::scratch({N}, x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::l2norm_forward(y.data<T>(), r.data<T>(), x.value().data<T>(), N, D, T(eps));
  });
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x, r, out, N, D] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        cpu::l2norm_backward(x.ensure_grad().data<T>(), out.value().data<T>(), r.data<T>(), out.grad().data<T>(), N,
                             D);
      });
    });
  return out;
}

Variable embedding(const Tensor& ids, const Variable& table) {
  check_inputs("embedding", {&table});
  LINATTN_CHECK(ids.dtype() == DType::i32, "embedding: ids must be i32, got ", ids.str());
  LINATTN_CHECK(table.shape().ndim() == 2, "embedding: table must be [vocab, dim], got ", table.value().str());
  const int64_t N = ids.numel(), V = table.shape()[0], D = table.shape()[1];
  cpu::check_token_ids(ids.data<int32_t>(), N, V, "embedding");
  Tensor y = Tensor::scratch(ids.shape().appended(D), table.dtype());
  dispatch_float(table.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::embedding_forward(y.data<T>(), ids.data<int32_t>(), table.value().data<T>(), N, V, D);
  });
  Variable out(y, needs_grad({&table}));
  if (out.requires_grad())
    record({&table}, [ids, table, out, N, V, D] {
      if (!out.grad().defined()) return;
      dispatch_float(table.dtype(), [&](auto zero) {
        using T = decltype(zero);
        cpu::embedding_backward(table.ensure_grad().data<T>(), ids.data<int32_t>(), out.grad().data<T>(), N, V, D);
      });
    });
  return out;
}

Variable short_conv(const Variable& x, const Variable& weight, const Variable& bias, const Segments& segments) {
  check_inputs("short_conv", {&x, &weight, &bias});
  LINATTN_CHECK(x.shape().ndim() == 3, "short_conv: input must be [B, T, C], got ", x.value().str());
  const int64_t B = x.shape()[0], T_ = x.shape()[1], C = x.shape()[2];
  LINATTN_CHECK(weight.shape().ndim() == 2 && weight.shape()[0] == C, "short_conv: weight ", weight.value().str(),
                " does not match input ", x.value().str(), " (expected [", C, ", width])");
  const int64_t W = weight.shape()[1];
  if (bias.defined())
    LINATTN_CHECK(bias.shape() == Shape{C}, "short_conv: bias ", bias.value().str(), " should be [", C, "]");
  const std::vector<SegmentPart> parts = segment_parts(segments, B, T_);
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (const SegmentPart& p : parts)
      cpu::short_conv_forward(y.data<T>() + p.start * C, x.value().data<T>() + p.start * C, weight.value().data<T>(),
                              data_or_null<T>(bias), p.rows, p.len, C, W);
  });
  Variable out(y, needs_grad({&x, &weight, &bias}));
  if (out.requires_grad())
    record({&x, &weight, &bias}, [x, weight, bias, out, parts, C, W] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        Tensor dx = x.requires_grad() ? x.ensure_grad() : Tensor::scratch_zeros(x.shape(), x.dtype());
        Tensor dw = weight.requires_grad() ? weight.ensure_grad()
                                           : Tensor::scratch_zeros(weight.shape(), weight.dtype());
        for (const SegmentPart& p : parts)
          cpu::short_conv_backward(dx.data<T>() + p.start * C, dw.data<T>(), grad_or_null<T>(bias),
                                   x.value().data<T>() + p.start * C, weight.value().data<T>(),
                                   out.grad().data<T>() + p.start * C, p.rows, p.len, C, W);
      });
    });
  return out;
}

Variable cross_entropy(const Variable& logits, const Tensor& targets, int32_t ignore_index) {
  check_inputs("cross_entropy", {&logits});
  LINATTN_CHECK(targets.dtype() == DType::i32, "cross_entropy: targets must be i32, got ", targets.str());
  const int64_t V = logits.shape().last(), N = logits.shape().rows();
  LINATTN_CHECK(targets.numel() == N, "cross_entropy: ", targets.str(), " targets for logits ", logits.value().str(),
                " (expected ", N, " targets)");
  Tensor lse = Tensor::scratch({N}, logits.dtype());
  Tensor loss = Tensor::scratch({1}, logits.dtype());
  int64_t count = 0;
  dispatch_float(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    cpu::CrossEntropySum s = cpu::cross_entropy_forward(lse.data<T>(), logits.value().data<T>(),
                                                        targets.data<int32_t>(), N, V, ignore_index);
    count = s.count;
    loss.data<T>()[0] = T(count ? s.loss_sum / double(count) : 0.0);
  });
  Variable out(loss, needs_grad({&logits}));
  if (out.requires_grad() && count > 0)
    record({&logits}, [logits, targets, lse, out, N, V, ignore_index, count] {
      if (!out.grad().defined()) return;
      dispatch_float(logits.dtype(), [&](auto zero) {
        using T = decltype(zero);
        // forward: loss = mean over counted rows  =>  each row's loss gets d(loss) / count
        T scale = out.grad().data<T>()[0] / T(count);
        cpu::cross_entropy_backward(logits.ensure_grad().data<T>(), logits.value().data<T>(), lse.data<T>(),
                                    targets.data<int32_t>(), N, V, ignore_index, scale);
      });
    });
  return out;
}

}  // namespace linattn::ops
