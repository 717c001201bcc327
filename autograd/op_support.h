// Helpers shared by the op implementations (not part of the public autograd API).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/segments.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "kernels/backend.h"

namespace linattn::ops::detail {

// Inputs must agree on dtype and device (which kernel runs is the backend table's business).
inline void check_inputs(const char* op, std::initializer_list<const Variable*> inputs) {
  const Variable* first = nullptr;
  for (const Variable* v : inputs) {
    if (!v || !v->defined()) continue;
    if (!first) first = v;
    LINATTN_CHECK(v->dtype() == first->dtype(), op, ": dtype mismatch, ", first->value().str(), " vs ",
                  v->value().str());
    LINATTN_CHECK(v->device() == first->device(), op, ": device mismatch, ", device_name(first->device()), " vs ",
                  device_name(v->device()));
  }
}

// grad(v) += g, for a v that requires a gradient; the first gradient is passed on without a copy.
inline void accumulate(const Variable& v, const Tensor& g) {
  if (v.requires_grad()) v.add_grad(g);
}

// The gradient of v when it needs one, else an undefined tensor (the kernel skips it).
inline Tensor grad_or_none(const Variable& v) { return v.defined() && v.requires_grad() ? v.ensure_grad() : Tensor(); }

// The gradient of v: its real gradient when it needs one, else throw-away zeros, for kernels that
// always write it. The caller holds the tensor until the kernel has written into it.
inline Tensor grad_or_scratch(const Variable& v) {
  return v.requires_grad() ? v.ensure_grad() : Tensor::scratch_zeros(v.shape(), v.dtype(), v.device());
}

// The gradients of `vars` for a kernel that adds into all of them or, with `write` set, writes all
// of them (the first writer, with no zeroed buffer to add into): written when none holds a sum yet
// (one nobody needs is plain scratch), else added into, the new ones zeroed first (two of vars may
// be one Variable).
inline std::vector<Tensor> grads_to_write(std::initializer_list<const Variable*> vars, bool& write) {
  std::vector<Tensor> grads;
  std::vector<bool> fresh;
  for (const Variable* v : vars) {
    bool f = true;
    grads.push_back(v->requires_grad() ? v->grad_to_write(f) : Tensor::scratch(v->shape(), v->dtype(), v->device()));
    fresh.push_back(f);
  }
  write = std::find(fresh.begin(), fresh.end(), false) == fresh.end();
  for (size_t i = 0; i < grads.size(); ++i)
    if (!write && fresh[i]) grads[i].zero_();
  return grads;
}

inline std::pair<Tensor, Tensor> grads_to_write(const Variable& a, const Variable& b, bool& write) {
  const std::vector<Tensor> g = grads_to_write({&a, &b}, write);
  return {g[0], g[1]};
}

// Room for a Variable's bf16 copy: from the arena's part for kept tensors while recording (the
// tape's nodes keep the copies), else plain scratch.
inline Tensor bf16_copy_scratch(const Shape& shape, Device device) {
  return grad_enabled() ? Tensor::scratch_kept(shape, DType::bf16, device)
                        : Tensor::scratch(shape, DType::bf16, device);
}

// v's bfloat16 copy (Variable::bf16): made by one convert on first use, unless the op that made v
// wrote it beside v (rmsnorm, linears), and kept with v, so that every product that reads v (q, k, v
// and gate projections of one normed input) shares it.
inline const Tensor& bf16_value(const Variable& v) {
  if (!v.bf16().defined()) {
    Tensor t = bf16_copy_scratch(v.shape(), v.device());
    backend::convert(v.device(), t, v.value());
    v.set_bf16(std::move(t));
  }
  return v.bf16();
}

// The bf16 operand of the products whose output is `out`, from its gradient: the copy its writer
// wrote beside it (Variable::grad_bf16), else one conversion into new scratch.
inline Tensor bf16_gradient(const Variable& out) {
  if (out.grad_bf16().defined()) return out.grad_bf16();
  Tensor g16 = Tensor::scratch(out.grad().shape(), DType::bf16, out.device());
  backend::convert(out.device(), g16, out.grad());
  return g16;
}

// The value of an optional input, or an undefined tensor.
inline Tensor value_or_none(const Variable& v) { return v.defined() ? v.value() : Tensor(); }

// A [B, T, ...] tensor's positions in segment part p (segments.h), as a [rows, len, ...] view; none
// when x is none.
inline Tensor positions(const Tensor& x, const SegmentPart& p) {
  if (!x.defined()) return x;
  Shape s = x.shape();
  const int64_t n = s[0] * s[1];
  const int64_t per = n ? x.numel() / n : 0;
  s[0] = p.rows, s[1] = p.len;
  return x.view_at(p.start * per, s);
}

}  // namespace linattn::ops::detail
