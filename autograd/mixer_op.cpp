#include "autograd/mixer_op.h"

#include <algorithm>
#include <cmath>

namespace linattn::ops::detail {

namespace {

// The upstream gradient of the output o: zeros when nothing used o (held like grad_or_scratch's).
Tensor grad_or_zeros(const Variable& o) {
  return o.grad().defined() ? o.grad() : Tensor::scratch_zeros(o.shape(), o.dtype(), o.device());
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
  // The documents go to the kernels as offsets on the device (uploaded once per micro-batch); the
  // table is held until the backward has run.
  Tensor table;
  if (options.segments) {
    check_segments(*options.segments, s.B, s.T);
    r.seqs = options.segments->sequences(dev, table);
  }
  const int64_t saved = r.chunk ? entries.saved_size(dev, r) : 0;
  r.o = Tensor::scratch({s.B, s.T, s.H, s.Dv}, dt, dev);
  r.ht = Tensor::scratch({s.B, s.H, s.Dk, s.Dv}, dt, dev);
  if (normalize) r.zt = Tensor::scratch({s.B, s.H, s.Dk}, dt, dev);
  if (r.chunk) r.saved = Tensor::scratch({saved}, dt, dev);
  r.q = in.q.value(), r.k = in.k.value(), r.v = in.v.value();
  r.gate = value_or_none(in.gate), r.decay = value_or_none(in.decay), r.rate = value_or_none(in.rate);
  r.skip = value_or_none(in.skip);
  r.h0 = value_or_none(in.h0), r.z0 = value_or_none(in.z0);
  entries.forward(dev, r);
  const bool rg = needs_grad(inputs);
  MixerOutput out{Variable(r.o, rg), Variable(r.ht, rg), normalize ? Variable(r.zt, rg) : Variable()};
  if (rg) {
    // Saved: the inputs' values and `saved`; the outputs only where a backward reads them (o of the
    // normalized form, which the CUDA backward divides again). The inputs and outputs are kept for
    // their gradients only.
    backend::MixerArgs kept = r;
    kept.ht = Tensor(), kept.zt = Tensor();
    if (!normalize) kept.o = Tensor();
    const MixerVars grads{in.q.without_value(),    in.k.without_value(),    in.v.without_value(),
                          in.gate.without_value(), in.decay.without_value(), in.rate.without_value(),
                          in.skip.without_value(), in.h0.without_value(),   in.z0.without_value()};
    const MixerOutput outs{out.o.without_value(), out.ht.without_value(), out.zt.without_value()};
    record(inputs, [r = kept, table, in = grads, out = outs, &backward = entries.backward, dev] {
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
      backward(dev, b);
    });
  }
  return out;
}

}  // namespace linattn::ops::detail
