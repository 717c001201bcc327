#include "autograd/mixer_op.h"

#include <algorithm>
#include <cmath>

#include "autograd/saved.h"

namespace linattn::ops::detail {

namespace {

// What a mixer's node keeps of its inputs (MixerVars' fields), and o where its backward reads it.
struct SavedVars {
  Saved q, k, v, gate, decay, rate, skip, h0, z0, o;
};

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
    int outside = 0;  // a vectorized pass finds whether any value is outside; only then is it looked for
#pragma omp parallel for simd reduction(| : outside) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) outside |= !(p[i] >= lo && p[i] <= hi);
    int64_t bad = n;
    for (int64_t i = 0; i < n && outside; ++i)
      if (!(p[i] >= lo && p[i] <= hi)) {
        bad = i;
        break;
      }
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
  r.final_state = options.final_state;
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
  // `saved` stays with the node until its backward (in the arena's kept part under bf16 saving).
  if (r.chunk)
    r.saved = scratch_for_node({saved}, dt, dev, needs_grad(inputs));
  r.q = in.q.value(), r.k = in.k.value(), r.v = in.v.value();
  r.gate = value_or_none(in.gate), r.decay = value_or_none(in.decay), r.rate = value_or_none(in.rate);
  r.skip = value_or_none(in.skip);
  r.h0 = value_or_none(in.h0), r.z0 = value_or_none(in.z0);
  entries.forward(dev, r);
  const bool rg = needs_grad(inputs);
  MixerOutput out{Variable(r.o, rg), options.final_state ? Variable(r.ht, rg) : Variable(),
                  normalize && options.final_state ? Variable(r.zt, rg) : Variable()};
  if (rg) {
    // Saved: the inputs' values (in bf16 in a SaveInBf16 scope, autograd/saved.h) and `saved`; the
    // outputs only where a backward reads them (o of the normalized form, which the CUDA backward
    // divides again). The inputs and outputs are kept for their gradients.
    backend::MixerArgs kept = r;
    kept.q = kept.k = kept.v = kept.gate = kept.decay = kept.rate = kept.skip = kept.h0 = kept.z0 = Tensor();
    kept.o = kept.ht = kept.zt = Tensor();
    const SavedVars in_saved{Saved(in.q),    Saved(in.k),    Saved(in.v),  Saved(in.gate), Saved(in.decay),
                             Saved(in.rate), Saved(in.skip), Saved(in.h0), Saved(in.z0),   Saved(normalize ? out.o : Variable())};
    const MixerOutput outs{out.o.without_value(), out.ht.without_value(), out.zt.without_value()};
    record(inputs, [r = kept, table, in = in_saved, out = outs, &backward = entries.backward, dev] {
      backend::MixerArgs b = r;
      // q, k, v and the gate as kept (bf16 copies: the entries read or widen them, kernels/backend.def)
      b.q = in.q.stored(), b.k = in.k.stored(), b.v = in.v.stored(), b.gate = in.gate.stored();
      b.decay = in.decay.value(), b.rate = in.rate.value(), b.skip = in.skip.value();
      b.h0 = in.h0.value(), b.z0 = in.z0.value();
      if (r.normalize) b.o = in.o.value();
      // Kernels write dq, dk, dv and the gate's gradient always (a gate nobody differentiates, such as
      // RetNet's constant one, gets throw-away scratch): written when none of them holds a sum yet
      // (MixerArgs::write: no zeroed buffers), else added into; the rest only when needed.
      const std::vector<Tensor> g =
          in.gate.defined() ? grads_to_write({&in.q.var(), &in.k.var(), &in.v.var(), &in.gate.var()}, b.write)
                            : grads_to_write({&in.q.var(), &in.k.var(), &in.v.var()}, b.write);
      b.dq = g[0], b.dk = g[1], b.dv = g[2];
      if (in.gate.defined()) b.dgate = g[3];
      if (in.decay.defined()) b.ddecay = grad_or_scratch(in.decay.var());
      if (in.rate.defined()) b.drate = grad_or_scratch(in.rate.var());
      if (in.skip.defined()) b.dskip = grad_or_scratch(in.skip.var());
      b.dh0 = grad_or_none(in.h0.var());
      if (r.normalize) b.dz0 = grad_or_none(in.z0.var());
      if (out.zt.defined()) b.dzt = out.zt.grad();
      b.dO = grad_or_zeros(out.o);
      if (out.ht.defined()) b.dht = out.ht.grad();
      backward(dev, b);
    });
  }
  return out;
}

}  // namespace linattn::ops::detail
