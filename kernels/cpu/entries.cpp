#include "kernels/cpu/entries.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/columns.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/deltanet.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gla.h"
#include "kernels/cpu/linear_attn.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sequence_calls.h"
#include "kernels/deltanet_args.h"

namespace linattn::cpu::entry {

namespace {

// The data of an optional tensor: nullptr when undefined.
template <class T>
T* ptr(In t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// rmsnorm's groups per row: rstd holds one value per group of each of x's rows (backend.def).
int64_t norm_groups(In x, In rstd) { return x.shape().rows() ? rstd.numel() / x.shape().rows() : 1; }

// Calls f(T{}) for the floating type of t (see dispatch_float).
template <class F>
decltype(auto) floating(In t, F&& f) {
  return dispatch_float(t.dtype(), std::forward<F>(f));
}

// Calls f(T{}, X{}): T the floating type of `arith`, X the element type of `kept`, which a backward
// reads of its forward: T too, or bfloat16 when T is float and a tape node kept it in bf16
// (autograd/saved.h, stored.h).
template <class F>
void floating_kept(const char* op, In arith, In kept, F&& f) {
  if (arith.dtype() == DType::f32 && kept.dtype() == DType::bf16) return f(float{}, bfloat16{});
  LINATTN_CHECK(kept.dtype() == arith.dtype(), op, ": ", kept.str(), " does not match ", arith.str(),
                " (a float32 op reads float32 or its bf16 copy)");
  floating(arith, [&](auto zero) { f(zero, zero); });
}

}  // namespace

// ---- pointwise ----

void add(In y, In a, In b) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::add_forward(y.data<T>(), a.data<T>(), b.data<T>(), y.numel());
  });
}

void add_inplace(In y, In x) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::add_inplace(y.data<T>(), x.data<T>(), y.numel());
  });
}

void mul_forward(In y, In a, In b) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::mul_forward(y.data<T>(), a.data<T>(), b.data<T>(), y.numel());
  });
}

void mul_backward(In da, In db, In a, In b, In dy) {
  floating(a, [&](auto zero) {
    using T = decltype(zero);
    cpu::mul_backward(ptr<T>(da), ptr<T>(db), a.data<T>(), b.data<T>(), dy.data<T>(), a.numel());
  });
}

void scale_forward(In y, In x, double c) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::scale_forward(y.data<T>(), x.data<T>(), T(c), y.numel());
  });
}

void axpy(In y, double c, In x) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::axpy(y.data<T>(), T(c), x.data<T>(), x.numel());
  });
}

void activation_forward(Activation f, In y, In x, double c) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    cpu::activation_forward(f, y.data<T>(), x.data<T>(), y.numel(), T(c));
  });
}

void activation_backward(Activation f, In dx, In x, In dy, double c, bool write) {
  floating_kept(activation_name(f), dx, x, [&](auto t, auto kept) {
    using T = decltype(t);
    using X = decltype(kept);
    cpu::activation_backward<T, X>(f, dx.data<T>(), x.data<X>(), dy.data<T>(), x.numel(), T(c), write);
  });
}

// y and the inputs each float32 or bf16 (a product's operand; what swiglu_linear's node keeps), or all f64.
void swiglu_forward(In y, In gate, In up) {
  LINATTN_CHECK(gate.dtype() == up.dtype(), "swiglu: gate ", gate.str(), " and up ", up.str(), " differ in dtype");
  if (y.dtype() == DType::f64 || gate.dtype() == DType::f64) {
    LINATTN_CHECK(y.dtype() == gate.dtype(), "swiglu: ", y.str(), " does not match ", gate.str());
    return cpu::swiglu_forward(y.data<double>(), gate.data<double>(), up.data<double>(), y.numel());
  }
  auto run = [&](auto out, auto in) {
    using Y = decltype(out);
    using X = decltype(in);
    cpu::swiglu_forward(y.data<Y>(), gate.data<X>(), up.data<X>(), y.numel());
  };
  const bool y16 = y.dtype() == DType::bf16, in16 = gate.dtype() == DType::bf16;
  if (y16 && in16) return run(bfloat16{}, bfloat16{});
  if (y16) return run(bfloat16{}, float{});
  if (in16) return run(float{}, bfloat16{});
  run(float{}, float{});
}

void swiglu_backward(In dgate, In dup, In gate, In up, In dy, bool write) {
  LINATTN_CHECK(gate.dtype() == up.dtype(), "swiglu: gate ", gate.str(), " and up ", up.str(), " differ in dtype");
  floating_kept("swiglu", dy, gate, [&](auto t, auto kept) {
    using T = decltype(t);
    using X = decltype(kept);
    cpu::swiglu_backward<T, X>(dgate.data<T>(), dup.data<T>(), gate.data<X>(), up.data<X>(), dy.data<T>(),
                               gate.numel(), write);
  });
}

// x [N, 2 C] float32 or bf16 (the kept copy) or f64; y [N, C] float32 or bf16 (a product's operand) or f64.
void swiglu_joined_forward(In y, In copy, In x) {
  const int64_t rows = y.shape().rows(), cols = y.shape().last();
  LINATTN_CHECK(x.shape().rows() == rows && x.shape().last() == 2 * cols && (!copy.defined() || copy.shape() == x.shape()),
                "swiglu_joined: x ", x.str(), " should be [", rows, ", ", 2 * cols, "] for y ", y.str(),
                copy.defined() ? ", as its copy " + copy.str() : "");
  bfloat16* copy16 = copy.defined() ? copy.data<bfloat16>() : nullptr;
  if (y.dtype() == DType::f64 || x.dtype() == DType::f64) {
    LINATTN_CHECK(y.dtype() == x.dtype() && !copy.defined(), "swiglu_joined: ", y.str(), " does not match ", x.str());
    return cpu::swiglu_joined_forward(y.data<double>(), nullptr, x.data<double>(), rows, cols);
  }
  const bool y16 = y.dtype() == DType::bf16, in16 = x.dtype() == DType::bf16;
  if (y16 && in16) return cpu::swiglu_joined_forward(y.data<bfloat16>(), copy16, x.data<bfloat16>(), rows, cols);
  if (y16) return cpu::swiglu_joined_forward(y.data<bfloat16>(), copy16, x.data<float>(), rows, cols);
  if (in16) return cpu::swiglu_joined_forward(y.data<float>(), copy16, x.data<bfloat16>(), rows, cols);
  cpu::swiglu_joined_forward(y.data<float>(), copy16, x.data<float>(), rows, cols);
}

// dx [N, 2 C] written: float32 or bf16 (a product's operand) or f64; x as kept; dy [N, C] float32 or f64.
void swiglu_joined_backward(In dx, In x, In dy) {
  const int64_t rows = dy.shape().rows(), cols = dy.shape().last();
  LINATTN_CHECK(x.shape().rows() == rows && x.shape().last() == 2 * cols && dx.shape() == x.shape(),
                "swiglu_joined: x ", x.str(), " and dx ", dx.str(), " should be [", rows, ", ", 2 * cols,
                "] for dy ", dy.str());
  if (dy.dtype() == DType::f64) {
    LINATTN_CHECK(x.dtype() == DType::f64 && dx.dtype() == DType::f64, "swiglu_joined: ", dx.str(), " and ", x.str(),
                  " do not match ", dy.str());
    return cpu::swiglu_joined_backward(dx.data<double>(), x.data<double>(), dy.data<double>(), rows, cols);
  }
  const bool dx16 = dx.dtype() == DType::bf16, in16 = x.dtype() == DType::bf16;
  if (dx16 && in16) return cpu::swiglu_joined_backward(dx.data<bfloat16>(), x.data<bfloat16>(), dy.data<float>(), rows, cols);
  if (dx16) return cpu::swiglu_joined_backward(dx.data<bfloat16>(), x.data<float>(), dy.data<float>(), rows, cols);
  if (in16) return cpu::swiglu_joined_backward(dx.data<float>(), x.data<bfloat16>(), dy.data<float>(), rows, cols);
  cpu::swiglu_joined_backward(dx.data<float>(), x.data<float>(), dy.data<float>(), rows, cols);
}

void gdn_decay_forward(In a, In x, In A_log, In dt_bias) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::gdn_decay_forward(a.data<T>(), x.data<T>(), A_log.data<T>(), dt_bias.data<T>(), x.shape().rows(),
                           x.shape().last());
  });
}

void gdn_decay_backward(In dx, In dA_log, In ddt_bias, In x, In A_log, In dt_bias, In da) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::gdn_decay_backward(ptr<T>(dx), ptr<T>(dA_log), ptr<T>(ddt_bias), x.data<T>(), A_log.data<T>(),
                            dt_bias.data<T>(), da.data<T>(), x.shape().rows(), x.shape().last());
  });
}

// ---- matrix products ----

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B, double beta, In C) {
  backend::check_gemm_dtypes(A, B, beta, C);
  if (C.dtype() == DType::bf16) {
    cpu::gemm_bf16(trans_a, trans_b, M, N, K, float(alpha), A.data<bfloat16>(), trans_a ? M : K, B.data<bfloat16>(),
                   trans_b ? K : N, C.data<bfloat16>(), N);
    return;
  }
  if (A.dtype() == DType::bf16) {
    cpu::gemm_bf16(trans_a, trans_b, M, N, K, float(alpha), A.data<bfloat16>(), trans_a ? M : K, B.data<bfloat16>(),
                   trans_b ? K : N, float(beta), C.data<float>(), N);
    return;
  }
  floating(C, [&](auto zero) {
    using T = decltype(zero);
    cpu::gemm<T>(trans_a, trans_b, M, N, K, T(alpha), A.data<T>(), trans_a ? M : K, B.data<T>(), trans_b ? K : N,
                 T(beta), C.data<T>(), N);
  });
}

void convert(In y, In x) {
  backend::check_convert(y, x);
  if (y.dtype() == DType::bf16) cpu::to_bf16(y.data<bfloat16>(), x.data<float>(), x.numel());
  else cpu::from_bf16(y.data<float>(), x.data<bfloat16>(), x.numel());
}

void split_columns(Ins parts, Ins copies, In x) {
  const std::vector<int64_t> widths = backend::check_columns(parts, copies, x);
  std::vector<bfloat16*> copy_ptrs;
  for (const Tensor& c : copies) copy_ptrs.push_back(ptr<bfloat16>(c));
  if (x.dtype() == DType::bf16) {  // a product written in bf16: the parts float32
    std::vector<float*> part_ptrs;
    for (const Tensor& p : parts) part_ptrs.push_back(p.data<float>());
    return cpu::split_columns(part_ptrs, copy_ptrs, widths, x.data<bfloat16>(), x.shape().rows());
  }
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T*> part_ptrs;
    for (const Tensor& p : parts) part_ptrs.push_back(p.data<T>());
    cpu::split_columns(part_ptrs, copy_ptrs, widths, x.data<T>(), x.shape().rows());
  });
}

void join_columns(In y, Ins parts) {
  const std::vector<int64_t> widths = backend::check_columns(parts, {}, y);
  floating(parts[0], [&](auto zero) {
    using T = decltype(zero);
    std::vector<const T*> part_ptrs;
    for (const Tensor& p : parts) part_ptrs.push_back(p.data<T>());
    if constexpr (std::is_same_v<T, float>)
      if (y.dtype() == DType::bf16) return cpu::join_columns(y.data<bfloat16>(), part_ptrs, widths, y.shape().rows());
    cpu::join_columns(y.data<T>(), part_ptrs, widths, y.shape().rows());
  });
}

void bias_forward(In y, In bias) {
  floating(y, [&](auto zero) {
    using T = decltype(zero);
    T* Y = y.data<T>();
    const T* b = bias.data<T>();
    const int64_t cols = bias.numel(), N = y.numel() / cols;
#pragma omp parallel for if (N * cols > (1 << 15))
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < cols; ++j) Y[i * cols + j] += b[j];
  });
}

void bias_activation_forward(Activation f, In y, In z16, In z, In bias, double c) {
  if (!z16.defined()) {
    bias_forward(z, bias);
    activation_forward(f, y, z, c);
    return;
  }
  LINATTN_CHECK(z.dtype() == DType::f32, "bias_activation: a bf16 copy is made of a float32 input only, got ",
                z.str());
  // z is only read: y holds z + b first (rounded into the copy), then the activation of it, in place
  float* Y = y.data<float>();
  const float *Z = z.data<float>(), *b = bias.data<float>();
  const int64_t cols = bias.numel(), N = z.numel() / cols;
#pragma omp parallel for if (N * cols > (1 << 15))
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < cols; ++j) Y[i * cols + j] = Z[i * cols + j] + b[j];
  cpu::to_bf16(z16.data<bfloat16>(), Y, z.numel());
  activation_forward(f, y, y, c);
}

void bias_activation_backward(Activation f, In dz, In dbias, In z, In dy, double c) {
  if (dz.dtype() == dy.dtype()) {
    activation_backward(f, dz, z, dy, c, true);
    bias_backward(dbias, dz);
    return;
  }
  LINATTN_CHECK(dz.dtype() == DType::bf16 && dy.dtype() == DType::f32, "bias_activation: dz ", dz.str(),
                " for dy ", dy.str(), " (dz is dy's dtype, or bf16 for a float32 dy)");
  const Tensor g = Tensor::scratch(dy.shape(), DType::f32);  // the gradient before its rounding
  activation_backward(f, g, z, dy, c, true);
  bias_backward(dbias, g);
  cpu::to_bf16(dz.data<bfloat16>(), g.data<float>(), g.numel());
}

void bias_backward(In dbias, In dy) {
  floating(dy, [&](auto zero) {
    using T = decltype(zero);
    T* db = dbias.data<T>();
    const T* dY = dy.data<T>();
    const int64_t cols = dbias.numel(), N = dy.numel() / cols;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < cols; ++j) db[j] += dY[i * cols + j];
  });
}

// ---- norms ----

void rmsnorm_forward(In y, In y16, In x16, In rstd, In x, In w, double eps) {
  LINATTN_CHECK((!y16.defined() && !x16.defined()) || x.dtype() == DType::f32, "rmsnorm: bf16 copies are made of ",
                "a float32 input only, got ", x.str());
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward(y.data<T>(), ptr<bfloat16>(y16), ptr<bfloat16>(x16), rstd.data<T>(), x.data<T>(),
                         w.data<T>(), x.shape().rows(), x.shape().last(), T(eps), norm_groups(x, rstd));
  });
}

void add_rmsnorm_forward(In s, In y, In y16, In s16, In rstd, In a, In b, In w, double eps) {
  LINATTN_CHECK((!y16.defined() && !s16.defined()) || a.dtype() == DType::f32, "add_rmsnorm: bf16 copies are made ",
                "of float32 inputs only, got ", a.str());
  floating(a, [&](auto zero) {
    using T = decltype(zero);
    cpu::add_rmsnorm_forward(s.data<T>(), y.data<T>(), ptr<bfloat16>(y16), ptr<bfloat16>(s16), rstd.data<T>(),
                             a.data<T>(), b.data<T>(), w.data<T>(), a.shape().rows(), a.shape().last(), T(eps));
  });
}

void rmsnorm_backward(In dx, In dx16, In dw, In x, In w, In rstd, In dy, In prior) {
  LINATTN_CHECK(!dx16.defined() ||
                    (dx16.dtype() == DType::bf16 && dx.dtype() == DType::f32 && dx16.numel() == dx.numel()),
                "rmsnorm_backward: the copy ", dx16.str(), " of dx ", dx.str(), " must be bf16 of a float32 dx");
  floating_kept("rmsnorm", dy, x, [&](auto t, auto kept) {
    using T = decltype(t);
    using X = decltype(kept);
    cpu::rmsnorm_backward<T, X>(dx.data<T>(), ptr<bfloat16>(dx16), ptr<T>(dw), x.data<X>(), w.data<T>(),
                                rstd.data<T>(), dy.data<T>(), ptr<T>(prior), x.shape().rows(), x.shape().last(),
                                norm_groups(x, rstd));
  });
}

void rmsnorm_gate_forward(In h, In x16, In rstd, In x, In gate, In w, double eps, bool rstd_given) {
  LINATTN_CHECK(x.dtype() == gate.dtype() && x.numel() == gate.numel(), "rmsnorm_gate: x ", x.str(), " and gate ",
                gate.str(), " differ");
  const int64_t R = x.shape().rows(), D = x.shape().last();
  if (rstd.dtype() == DType::f64) {
    LINATTN_CHECK(x.dtype() == DType::f64 && (!h.defined() || h.dtype() == DType::f64), "rmsnorm_gate: ", x.str(),
                  " does not match rstd ", rstd.str());
    LINATTN_CHECK(!x16.defined(), "rmsnorm_gate: a bf16 copy of a float64 x");
    return cpu::rmsnorm_gate_forward(ptr<double>(h), nullptr, rstd.data<double>(), x.data<double>(),
                                     gate.data<double>(), w.data<double>(), R, D, eps, rstd_given);
  }
  auto run = [&](auto out, auto in) {
    using Y = decltype(out);
    using X = decltype(in);
    cpu::rmsnorm_gate_forward(ptr<Y>(h), ptr<bfloat16>(x16), rstd.data<float>(), x.data<X>(), gate.data<X>(),
                              w.data<float>(), R, D, float(eps), rstd_given);
  };
  const bool h16 = h.defined() && h.dtype() == DType::bf16, in16 = x.dtype() == DType::bf16;
  LINATTN_CHECK(!x16.defined() || !in16, "rmsnorm_gate: a bf16 copy of a bf16 x");
  if (h16 && in16) return run(bfloat16{}, bfloat16{});
  if (h16) return run(bfloat16{}, float{});
  if (in16) return run(float{}, bfloat16{});
  run(float{}, float{});
}

void rmsnorm_gate_backward(In dx, In dgate, In dw, In x, In gate, In w, In rstd, In dh, bool write) {
  LINATTN_CHECK(x.dtype() == gate.dtype(), "rmsnorm_gate: x ", x.str(), " and gate ", gate.str(), " differ in dtype");
  floating_kept("rmsnorm_gate", dh, x, [&](auto t, auto kept) {
    using T = decltype(t);
    using X = decltype(kept);
    cpu::rmsnorm_gate_backward<T, X>(dx.data<T>(), dgate.data<T>(), ptr<T>(dw), x.data<X>(), gate.data<X>(),
                                     w.data<T>(), rstd.data<T>(), dh.data<T>(), x.shape().rows(), x.shape().last(),
                                     write);
  });
}

void l2norm_forward(In y, In r, In x, double eps) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::l2norm_forward(y.data<T>(), r.data<T>(), x.data<T>(), x.shape().rows(), x.shape().last(), T(eps));
  });
}

void l2norm_backward(In dx, In y, In r, In dy) {
  floating_kept("l2norm", dy, y, [&](auto t, auto kept) {
    using T = decltype(t);
    using Y = decltype(kept);
    cpu::l2norm_backward<T, Y>(dx.data<T>(), y.data<Y>(), r.data<T>(), dy.data<T>(), y.shape().rows(),
                               y.shape().last());
  });
}

// ---- embedding, convolution, loss ----

void embedding_forward(In y, In ids, In table) {
  const int64_t N = ids.numel(), V = table.size(0), D = table.size(1);
  check_token_ids(ids.data<int32_t>(), N, V, "embedding");
  floating(table, [&](auto zero) {
    using T = decltype(zero);
    cpu::embedding_forward(y.data<T>(), ids.data<int32_t>(), table.data<T>(), N, V, D);
  });
}

void embedding_backward(In dtable, In ids, In dy) {
  floating(dtable, [&](auto zero) {
    using T = decltype(zero);
    cpu::embedding_backward(dtable.data<T>(), ids.data<int32_t>(), dy.data<T>(), ids.numel(), dtable.size(0),
                            dtable.size(1));
  });
}

void short_conv_forward(In y, In x, In w, In bias, Sequences seqs) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::short_conv_forward(y.data<T>(), x.data<T>(), w.data<T>(), ptr<T>(bias), x.size(0), x.size(1), x.size(2),
                            w.size(1), seqs);
  });
}

void short_conv_backward(In dx, In dw, In dbias, In x, In w, In dy, Sequences seqs) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::short_conv_backward(dx.data<T>(), dw.data<T>(), ptr<T>(dbias), x.data<T>(), w.data<T>(), dy.data<T>(),
                             x.size(0), x.size(1), x.size(2), w.size(1), seqs);
  });
}

int64_t cross_entropy_forward(In loss, In lse, In logits, In targets, int32_t ignore_index) {
  return floating(logits, [&](auto zero) {
    using T = decltype(zero);
    cpu::CrossEntropySum s = cpu::cross_entropy_forward(lse.data<T>(), logits.data<T>(), targets.data<int32_t>(),
                                                        logits.shape().rows(), logits.shape().last(), ignore_index);
    loss.data<T>()[0] = T(s.count ? s.loss_sum / double(s.count) : 0.0);
    return s.count;
  });
}

void cross_entropy_backward(In dlogits, In logits, In lse, In targets, In dloss, int64_t count, int32_t ignore_index,
                            bool write) {
  LINATTN_CHECK(dlogits.dtype() == logits.dtype() || (write && dlogits.dtype() == DType::bf16 && logits.dtype() == DType::f32),
                "cross_entropy: the gradient ", dlogits.str(), " of ", logits.str(),
                ": the logits' dtype, or bf16 when written");
  if (count == 0) {  // no row counts: no gradient
    if (write) dlogits.zero_();
    return;
  }
  floating(logits, [&](auto zero) {
    using T = decltype(zero);
    // forward: loss = mean over counted rows  =>  each row's loss gets d(loss) / count
    T scale = dloss.data<T>()[0] / T(count);
    const int64_t N = logits.shape().rows(), V = logits.shape().last();
    if constexpr (std::is_same_v<T, float>)
      if (dlogits.dtype() == DType::bf16)
        return cpu::cross_entropy_backward(dlogits.data<bfloat16>(), logits.data<T>(), lse.data<T>(),
                                           targets.data<int32_t>(), N, V, ignore_index, scale, write);
    cpu::cross_entropy_backward(dlogits.data<T>(), logits.data<T>(), lse.data<T>(), targets.data<int32_t>(), N, V,
                                ignore_index, scale, write);
  });
}

// The two kernels in turn: the backward reads the logits the forward has just read, from cache.
int64_t cross_entropy_forward_backward(In loss, In lse, In dlogits, In logits, In targets, In dloss, int64_t count,
                                       int32_t ignore_index) {
  const int64_t counted = cross_entropy_forward(loss, lse, logits, targets, ignore_index);
  cross_entropy_backward(dlogits, logits, lse, targets, dloss, count, ignore_index, true);
  return counted;
}

// ---- attention and positions ----

void attention_forward(In o, In lse, In q, In k, In v, int64_t window, double scale, Sequences seqs) {
  floating(q, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_forward<T>(o.data<T>(), ptr<T>(lse), q.data<T>(), k.data<T>(), v.data<T>(), q.size(0), q.size(1),
                              q.size(2), k.size(2), q.size(3), v.size(3), window, T(scale), seqs);
  });
}

void attention_backward(In dq, In dk, In dv, In q_kept, In k_kept, In v_kept, In o_kept, In lse, In dO,
                        int64_t window, double scale, Sequences seqs, bool write) {
  if (write)  // the kernel adds into them
    for (const Tensor* g : {&dq, &dk, &dv}) g->zero_();
  const Tensor q = backend::float32_of(q_kept), k = backend::float32_of(k_kept), v = backend::float32_of(v_kept);
  const Tensor o = backend::float32_of(o_kept);
  floating(q, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_backward<T>(dq.data<T>(), dk.data<T>(), dv.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(),
                               o.data<T>(), lse.data<T>(), dO.data<T>(), q.size(0), q.size(1), q.size(2), k.size(2),
                               q.size(3), v.size(3), window, T(scale), seqs);
  });
}

int64_t attention_scratch_bytes(DType dtype) {
  return int64_t(omp_get_max_threads()) * int64_t(cpu::attention_workspace_bytes_per_thread(dtype_size(dtype)));
}

void kv_cache_write(In k_cache, In v_cache, In k, In v, int64_t pos) {
  floating(k, [&](auto zero) {
    using T = decltype(zero);
    cpu::kv_cache_write<T>(k_cache.data<T>(), v_cache.data<T>(), k.data<T>(), v.data<T>(), k.size(0), k.size(1),
                           k.size(2), k.size(3), v.size(3), k_cache.size(1), pos);
  });
}

void attention_decode(In o, In q, In k_cache, In v_cache, int64_t pos, int64_t window, double scale) {
  floating(q, [&](auto zero) {
    using T = decltype(zero);
    cpu::attention_decode<T>(o.data<T>(), q.data<T>(), k_cache.data<T>(), v_cache.data<T>(), q.size(0), q.size(1),
                             q.size(2), k_cache.size(2), q.size(3), v_cache.size(3), k_cache.size(1), pos, window,
                             T(scale));
  });
}

void rope_forward(In y, In x, int64_t offset, double theta, Sequences seqs) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_forward<T>(y.data<T>(), x.data<T>(), x.size(0), x.size(1), x.size(2), x.size(3), offset, theta,
                          seqs);
  });
}

void rope_backward(In dx, In dy, int64_t offset, double theta, Sequences seqs) {
  floating(dx, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_backward<T>(dx.data<T>(), dy.data<T>(), dx.size(0), dx.size(1), dx.size(2), dx.size(3), offset,
                           theta, seqs);
  });
}

// ---- token mixers ----

static void linear_attention_forward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk)
      cpu::linear_attn_chunk_forward<T>(r.o.data<T>(), ptr<T>(r.ht), ptr<T>(r.zt), r.saved.data<T>(), r.q.data<T>(),
                                        r.k.data<T>(), r.v.data<T>(), ptr<T>(r.h0), ptr<T>(r.z0), r.B, r.T, r.H, r.Dk,
                                        r.Dv, T(r.scale), r.phi, r.normalize, r.chunk_size);
    else
      cpu::linear_attn_recurrent_forward<T>(r.o.data<T>(), ptr<T>(r.ht), ptr<T>(r.zt), r.q.data<T>(), r.k.data<T>(),
                                            r.v.data<T>(), ptr<T>(r.h0), ptr<T>(r.z0), r.B, r.T, r.H, r.Dk, r.Dv,
                                            T(r.scale), r.phi, r.normalize);
  });
}

static void linear_attention_backward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk)
      cpu::linear_attn_chunk_backward<T>(r.dq.data<T>(), r.dk.data<T>(), r.dv.data<T>(), ptr<T>(r.dh0), ptr<T>(r.dz0),
                                         r.saved.data<T>(), r.q.data<T>(), r.k.data<T>(), r.v.data<T>(),
                                         r.dO.data<T>(), ptr<T>(r.dht), ptr<T>(r.dzt), r.B, r.T, r.H, r.Dk, r.Dv,
                                         T(r.scale), r.phi, r.normalize, r.chunk_size);
    else
      cpu::linear_attn_recurrent_backward<T>(r.dq.data<T>(), r.dk.data<T>(), r.dv.data<T>(), ptr<T>(r.dh0),
                                             ptr<T>(r.dz0), r.q.data<T>(), r.k.data<T>(), r.v.data<T>(), ptr<T>(r.h0),
                                             ptr<T>(r.z0), r.dO.data<T>(), ptr<T>(r.dht), ptr<T>(r.dzt), r.B, r.T,
                                             r.H, r.Dk, r.Dv, T(r.scale), r.phi, r.normalize);
  });
}

static int64_t linear_attention_saved_size_rows(const MixerArgs& r) {
  return cpu::linear_attn_chunk_saved_size(r.B, r.T, r.H, r.Dk, r.Dv, r.normalize, r.chunk_size);
}

static void gla_forward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk)
      cpu::gla_chunk_forward<T>(r.o.data<T>(), ptr<T>(r.ht), r.saved.data<T>(), r.q.data<T>(), r.k.data<T>(),
                                r.v.data<T>(), r.gate.data<T>(), ptr<T>(r.h0), r.B, r.T, r.H, r.Dk, r.Dv, T(r.scale),
                                r.chunk_size);
    else
      cpu::gla_recurrent_forward<T>(r.o.data<T>(), ptr<T>(r.ht), r.q.data<T>(), r.k.data<T>(), r.v.data<T>(),
                                    r.gate.data<T>(), ptr<T>(r.h0), r.B, r.T, r.H, r.Dk, r.Dv, T(r.scale));
  });
}

static void gla_backward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk)
      cpu::gla_chunk_backward<T>(r.dq.data<T>(), r.dk.data<T>(), r.dv.data<T>(), r.dgate.data<T>(), ptr<T>(r.dh0),
                                 r.saved.data<T>(), r.q.data<T>(), r.k.data<T>(), r.v.data<T>(), r.gate.data<T>(),
                                 r.dO.data<T>(), ptr<T>(r.dht), r.B, r.T, r.H, r.Dk, r.Dv, T(r.scale), r.chunk_size);
    else
      cpu::gla_recurrent_backward<T>(r.dq.data<T>(), r.dk.data<T>(), r.dv.data<T>(), r.dgate.data<T>(), ptr<T>(r.dh0),
                                     r.q.data<T>(), r.k.data<T>(), r.v.data<T>(), r.gate.data<T>(), ptr<T>(r.h0),
                                     r.dO.data<T>(), ptr<T>(r.dht), r.B, r.T, r.H, r.Dk, r.Dv, T(r.scale));
  });
}

static int64_t gla_saved_size_rows(const MixerArgs& r) {
  return cpu::gla_chunk_saved_size(r.B, r.T, r.H, r.Dk, r.Dv, r.chunk_size);
}

static void delta_rule_forward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk) cpu::deltanet_chunk_forward(backend::deltanet_args<T>(r));
    else cpu::deltanet_recurrent_forward(backend::deltanet_args<T>(r));
  });
}

static void delta_rule_backward_rows(const MixerArgs& r) {
  floating(r.q, [&](auto zero) {
    using T = decltype(zero);
    if (r.chunk) cpu::deltanet_chunk_backward(backend::deltanet_args<T>(r));
    else cpu::deltanet_recurrent_backward(backend::deltanet_args<T>(r));
  });
}

static int64_t delta_rule_saved_size_rows(const MixerArgs& r) {
  return deltanet_chunk_saved_size(r.B, r.T, r.H, r.Dk, r.Dv, r.chunk_size);
}

// The entries: the kernels above once per document (kernels/cpu/sequence_calls.h). The backwards
// read float32 (or float64) and add into the gradients: bf16 copies a node kept are widened first,
// and gradients to be written are zeroed (backend::for_float32_adding_kernels).
void linear_attention_forward(const MixerArgs& r) {
  call_per_sequence(r, linear_attention_forward_rows, linear_attention_saved_size_rows);
}
void linear_attention_backward(const MixerArgs& r) {
  call_per_sequence(backend::for_float32_adding_kernels(r), linear_attention_backward_rows,
                    linear_attention_saved_size_rows);
}
int64_t linear_attention_saved_size(const MixerArgs& r) {
  return saved_size_per_sequence(r, linear_attention_saved_size_rows);
}
void gla_forward(const MixerArgs& r) { call_per_sequence(r, gla_forward_rows, gla_saved_size_rows); }
void gla_backward(const MixerArgs& r) {
  call_per_sequence(backend::for_float32_adding_kernels(r), gla_backward_rows, gla_saved_size_rows);
}
int64_t gla_saved_size(const MixerArgs& r) { return saved_size_per_sequence(r, gla_saved_size_rows); }
void delta_rule_forward(const MixerArgs& r) {
  call_per_sequence(r, delta_rule_forward_rows, delta_rule_saved_size_rows);
}
void delta_rule_backward(const MixerArgs& r) {
  call_per_sequence(backend::for_float32_adding_kernels(r), delta_rule_backward_rows, delta_rule_saved_size_rows);
}
int64_t delta_rule_saved_size(const MixerArgs& r) { return saved_size_per_sequence(r, delta_rule_saved_size_rows); }

// ---- optimizer ----

void step_loss(In control, In losses) {
  double* c = control.data<double>();
  double loss = 0;
  floating(losses, [&](auto zero) {
    using T = decltype(zero);
    const T* l = losses.data<T>();
    const int64_t n = losses.numel();
    for (int64_t i = 0; i < n; ++i) loss += double(l[i]) / double(n);
  });
  c[step_control::loss] = loss;
  c[step_control::bad] = std::isfinite(loss) ? 0.0 : 1.0;  // a non-finite term leaves a non-finite sum
}

void step_control(In control, In g, double max_norm) {
  double* c = control.data<double>();
  const double sum_sq = sum_squares(g), norm = std::sqrt(sum_sq);
  c[step_control::sum_squares] = sum_sq;
  c[step_control::norm] = norm;
  c[step_control::clip] = max_norm > 0 && norm > max_norm ? max_norm / norm : 1.0;
  c[step_control::skip] = c[step_control::bad] != 0 || !std::isfinite(norm) ? 1.0 : 0.0;
}

void adamw_step(In w_, In w16_, In g_, In m_, In v_, In decay_ranges, In control, const AdamWStep& s) {
  LINATTN_CHECK(!w16_.defined() || (w_.dtype() == DType::f32 && w16_.dtype() == DType::bf16 &&
                                    w16_.numel() == w_.numel()),
                "adamw: the weights' copy ", w16_.str(), " is not a bf16 copy of ", w_.str());
  const double* c = control.data<double>();
  if (c[step_control::skip] != 0) return;
  const double clip = c[step_control::clip];
  const double* bounds = decay_ranges.data<double>();
  const int64_t count = decay_ranges.numel();
  floating(w_, [&](auto zero) {
    using T = decltype(zero);
    T *w = w_.data<T>(), *m = m_.data<T>(), *v = v_.data<T>();
    bfloat16* w16 = w16_.defined() ? w16_.data<bfloat16>() : nullptr;
    const T* g = g_.data<T>();
    const int64_t n = w_.numel();
    const T b1 = T(s.beta1), b2 = T(s.beta2), step_size = T(c[step_control::step_size]),
            rbc2 = T(c[step_control::rbc2]), eps = T(s.eps), scale = T(clip);
    const bool clipping = clip != 1.0;
    // [begin, end): one stretch of equal decay; with the bf16 copy written in the same loop.
    auto update = [&](int64_t begin, int64_t end, T decay) {
      auto loop = [&](auto with_copy) {
#pragma omp simd
        for (int64_t j = begin; j < end; ++j) {
          const T gj = clipping ? g[j] * scale : g[j];
          m[j] = b1 * m[j] + (T(1) - b1) * gj;
          v[j] = b2 * v[j] + (T(1) - b2) * gj * gj;
          w[j] -= step_size * m[j] / (std::sqrt(v[j] * rbc2) + eps) + decay * w[j];
          if constexpr (decltype(with_copy)::value) w16[j] = from_float(float(w[j]));
        }
      };
      if (w16) loop(std::true_type{});
      else loop(std::false_type{});
    };
    // One pass: each thread takes a contiguous share of the buffer and walks the decay ranges across it.
#pragma omp parallel if (n > (1 << 15))
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t hi = n * (t + 1) / threads;
      int64_t k = std::upper_bound(bounds, bounds + count, double(n * t / threads)) - bounds;
      for (int64_t begin = n * t / threads; begin < hi; ++k) {
        const int64_t end = k < count ? std::min(hi, int64_t(bounds[k])) : hi;
        update(begin, end, k % 2 == 1 ? T(c[step_control::decay]) : T(0));  // inside a range after an odd number of bounds
        begin = end;
      }
    }
  });
}

double sum_squares(In x) {
  double sum = 0;
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data<T>();
    const int64_t n = x.numel();
#pragma omp parallel for reduction(+ : sum) if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) sum += double(p[i]) * double(p[i]);
  });
  return sum;
}

void scale_inplace(In x, double c) {
  floating(x, [&](auto zero) {
    using T = decltype(zero);
    T* p = x.data<T>();
    const int64_t n = x.numel();
#pragma omp parallel for simd if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) p[i] *= T(c);
  });
}

}  // namespace linattn::cpu::entry
