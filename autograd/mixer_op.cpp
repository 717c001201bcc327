#include "autograd/mixer_op.h"

#include <algorithm>
#include <cmath>

namespace linattn::ops::detail {

namespace {

// The upstream gradient of the output o: zeros when nothing used o (held like grad_or_scratch's).
Tensor grad_or_zeros(const Variable& o) {
  return o.grad().defined() ? o.grad() : Tensor::scratch_zeros(o.shape(), o.dtype(), o.device());
}

// A [B, ...] state's rows in segment part p, as a [rows, ...] view, when `take`; else none.
Tensor state_rows(const Tensor& x, const SegmentPart& p, bool take) {
  if (!take || !x.defined()) return Tensor();
  Shape s = x.shape();
  const int64_t per = s[0] ? x.numel() / s[0] : 0;
  s[0] = p.rows;
  return x.view_at(p.row * per, s);
}

// One backend call of a mixer op: a segment part and its share [saved_at, saved_at + saved_n) of
// the saved buffer.
struct Call {
  SegmentPart p;
  int64_t saved_at, saved_n;
};

// The share of call c in the whole-batch arguments a: views of every [B, T, ...] tensor at the
// part's positions; the initial states of its rows when the part begins them and the final states
// when it ends them (none elsewhere: zeros in, nothing out); its share of `saved`. A batch without
// document boundaries is one call whose views are the whole tensors.
backend::MixerArgs call_args(const backend::MixerArgs& a, const Call& c) {
  backend::MixerArgs r = a;
  r.B = c.p.rows, r.T = c.p.len;
  for (Tensor* x : {&r.o, &r.q, &r.k, &r.v, &r.gate, &r.decay, &r.dq, &r.dk, &r.dv, &r.dgate, &r.ddecay, &r.dO})
    *x = positions(*x, c.p);
  for (Tensor* x : {&r.h0, &r.z0, &r.dh0, &r.dz0}) *x = state_rows(*x, c.p, c.p.first);
  for (Tensor* x : {&r.ht, &r.zt, &r.dht, &r.dzt}) *x = state_rows(*x, c.p, c.p.last);
  if (r.saved.defined()) r.saved = r.saved.view_at(c.saved_at, {c.saved_n});
  return r;
}

}  // namespace

std::string shape_list(std::initializer_list<std::pair<const char*, const Variable*>> named) {
  std::string s;
  for (auto& [name, v] : named)
    if (v->defined()) s += std::string(s.empty() ? "" : ", ") + name + " " + v->value().str();
  return s;
}

void check_values(const char* op, const char* name, const Variable& x, double lo, double hi, const char* range) {
  if (!x.defined() || x.device() != Device::cpu) return;
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.value().data<T>();
    const int64_t n = x.value().numel();
    int64_t bad = n;
#pragma omp parallel for reduction(min : bad) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i)
      if (!(p[i] >= lo && p[i] <= hi)) bad = std::min(bad, i);
    if (bad < n && !std::isfinite(double(p[bad])))
      throw NonFiniteError(std::string(op) + ": " + name + " " + x.value().str() + " has the value " +
                           std::to_string(double(p[bad])) + " at flat index " + std::to_string(bad) + "; " + name +
                           " must be " + range);
    if (bad < n)
      LINATTN_FAIL(op, ": ", name, " ", x.value().str(), " has the value ", double(p[bad]), " at flat index ", bad,
                   "; ", name, " must be ", range);
  });
}

void check_finite(const char* op, const char* name, const Variable& x) {
  check_values(op, name, x, -kMaxFinite, kMaxFinite, "finite (a NaN or Inf reached the mixer)");
}

MixerOutput mixer_op(const char* op, std::initializer_list<const Variable*> inputs,
                     std::initializer_list<std::pair<const char*, const Variable*>> finite, const Sizes& s,
                     const MixerOptions& options, bool normalize, FeatureMap phi, const MixerVars& in,
                     const MixerEntries& entries) {
  for (auto [name, x] : finite) check_finite(op, name, *x);
  const DType dt = in.q.dtype();
  const Device dev = in.q.device();
  backend::MixerArgs r;
  r.B = s.B, r.T = s.T, r.H = s.H, r.Dk = s.Dk, r.Dv = s.Dv, r.G = s.G;
  r.scale = options.scale != 0 ? options.scale : 1.0 / std::sqrt(double(s.Dk));
  r.chunk = options.form == MixerForm::chunk;
  r.chunk_size = options.chunk_size;
  r.phi = phi;
  r.normalize = normalize;
  std::vector<Call> calls;
  int64_t saved = 0;
  for (const SegmentPart& p : segment_parts(options.segments ? *options.segments : Segments{}, s.B, s.T)) {
    backend::MixerArgs part = r;
    part.B = p.rows, part.T = p.len;
    const int64_t n = r.chunk ? entries.saved_size(dev, part) : 0;
    calls.push_back({p, saved, n});
    saved += n;
  }
  r.o = Tensor::scratch({s.B, s.T, s.H, s.Dv}, dt, dev);
  r.ht = Tensor::scratch({s.B, s.H, s.Dk, s.Dv}, dt, dev);
  if (normalize) r.zt = Tensor::scratch({s.B, s.H, s.Dk}, dt, dev);
  if (r.chunk) r.saved = Tensor::scratch({saved}, dt, dev);
  r.q = in.q.value(), r.k = in.k.value(), r.v = in.v.value();
  r.gate = value_or_none(in.gate), r.decay = value_or_none(in.decay), r.rate = value_or_none(in.rate);
  r.skip = value_or_none(in.skip);
  r.h0 = value_or_none(in.h0), r.z0 = value_or_none(in.z0);
  for (const Call& c : calls) entries.forward(dev, call_args(r, c));
  const bool rg = needs_grad(inputs);
  MixerOutput out{Variable(r.o, rg), Variable(r.ht, rg), normalize ? Variable(r.zt, rg) : Variable()};
  if (rg)
    record(inputs, [r, calls, in, out, &backward = entries.backward, dev] {
      backend::MixerArgs b = r;
      // Kernels write dq, dk, dv and the gate's gradient always (a gate nobody differentiates, such as
      // RetNet's constant one, gets throw-away zeros); the rest only when needed.
      b.dq = grad_or_scratch(in.q), b.dk = grad_or_scratch(in.k), b.dv = grad_or_scratch(in.v);
      if (in.gate.defined()) b.dgate = grad_or_scratch(in.gate);
      if (in.decay.defined()) b.ddecay = grad_or_scratch(in.decay);
      if (in.rate.defined()) b.drate = grad_or_scratch(in.rate);
      if (in.skip.defined()) b.dskip = grad_or_scratch(in.skip);
      b.dh0 = grad_or_none(in.h0);
      if (r.normalize) b.dz0 = grad_or_none(in.z0), b.dzt = out.zt.grad();
      b.dO = grad_or_zeros(out.o);
      b.dht = out.ht.grad();
      for (const Call& c : calls) backward(dev, call_args(b, c));
    });
  return out;
}

}  // namespace linattn::ops::detail
