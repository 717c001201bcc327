#include "autograd/mixers.h"

#include <cmath>
#include <limits>

#include "autograd/op_support.h"

namespace linattn::ops {

using detail::check_inputs;
using detail::grad_or_none;
using detail::grad_or_scratch;
using detail::positions;
using detail::value_or_none;

namespace {

struct Sizes {
  int64_t B, T, H, Dk, Dv;
};

std::string shape_list(std::initializer_list<std::pair<const char*, const Variable*>> named) {
  std::string s;
  for (auto& [name, v] : named)
    if (v->defined()) s += std::string(s.empty() ? "" : ", ") + name + " " + v->value().str();
  return s;
}

// q, k [B, T, H, dk], v [B, T, H, dv], h0 [B, H, dk, dv] (optional).
Sizes check_qkv(const char* op, const Variable& q, const Variable& k, const Variable& v, const Variable& h0) {
  auto shapes = [&] { return shape_list({{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}}); };
  LINATTN_CHECK(q.shape().ndim() == 4 && k.shape() == q.shape() && v.shape().ndim() == 4 &&
                    v.shape()[0] == q.shape()[0] && v.shape()[1] == q.shape()[1] && v.shape()[2] == q.shape()[2],
                op, ": expected q, k [B, T, H, dk] and v [B, T, H, dv], got ", shapes());
  Sizes s{q.shape()[0], q.shape()[1], q.shape()[2], q.shape()[3], v.shape()[3]};
  if (h0.defined())
    LINATTN_CHECK(h0.shape() == (Shape{s.B, s.H, s.Dk, s.Dv}), op, ": initial state h0 should be [", s.B, ", ", s.H,
                  ", ", s.Dk, ", ", s.Dv, "], got ", shapes());
  return s;
}

constexpr double kMaxFinite = std::numeric_limits<double>::max();

// Throws naming the op, the input and the first bad entry when a value is NaN or outside [lo, hi].
// Device tensors are not read back here (that would synchronize every op): on a device, a NaN
// shows in the loss and the gradient norm, which the trainer checks every step.
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

// A mixer op's inputs (undefined when absent): their values go to the kernels, and their gradients
// are what the backward writes.
struct MixerVars {
  Variable q, k, v, gate, decay, h0, z0;
};

// A mixer's entries of the backend table: its forward, its backward, and the size of the `saved`
// buffer of its chunk form on the device's column.
struct MixerEntries {
  const backend::Kernel<void(const backend::MixerArgs&)>& forward;
  const backend::Kernel<void(const backend::MixerArgs&)>& backward;
  const backend::Kernel<int64_t(const backend::MixerArgs&)>& saved_size;
};

// The prologue and epilogue every mixer op shares, after its own shape and range checks: checks the
// `finite` inputs, allocates the outputs and (chunk form) the `saved` elements the device's column
// asks for per segment part, runs the `forward` entry once per segment part, and records one tape
// node over `inputs` whose backward runs the `backward` entry once per part.
MixerOutput mixer_op(const char* op, std::initializer_list<const Variable*> inputs,
                     std::initializer_list<std::pair<const char*, const Variable*>> finite, const Sizes& s,
                     const MixerOptions& options, bool normalize, FeatureMap phi, const MixerVars& in,
                     const MixerEntries& entries) {
  for (auto [name, x] : finite) check_finite(op, name, *x);
  const DType dt = in.q.dtype();
  const Device dev = in.q.device();
  backend::MixerArgs r;
  r.B = s.B, r.T = s.T, r.H = s.H, r.Dk = s.Dk, r.Dv = s.Dv;
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
  r.gate = value_or_none(in.gate), r.decay = value_or_none(in.decay);
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
      b.dh0 = grad_or_none(in.h0);
      if (r.normalize) b.dz0 = grad_or_none(in.z0), b.dzt = out.zt.grad();
      b.dO = grad_or_zeros(out.o);
      b.dht = out.ht.grad();
      for (const Call& c : calls) backward(dev, call_args(b, c));
    });
  return out;
}

}  // namespace

MixerOutput linear_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& h0,
                             FeatureMap phi, bool normalize, const MixerOptions& options, const Variable& z0) {
  const char* op = "linear_attention";
  check_inputs(op, {&q, &k, &v, &h0, &z0});
  const Sizes s = check_qkv(op, q, k, v, h0);
  if (z0.defined()) {
    LINATTN_CHECK(normalize, op, ": z0 is the normalizer state of the normalized form; pass normalize = true");
    LINATTN_CHECK(z0.shape() == (Shape{s.B, s.H, s.Dk}), op, ": z0 should be [", s.B, ", ", s.H, ", ", s.Dk, "], got ",
                  z0.value().str());
  }
  return mixer_op(op, {&q, &k, &v, &h0, &z0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}, {"z0", &z0}}, s,
                  options, normalize, phi, {q, k, v, {}, {}, h0, z0},
                  {backend::linear_attention_forward, backend::linear_attention_backward,
                   backend::linear_attention_saved_size});
}

MixerOutput gla(const Variable& q, const Variable& k, const Variable& v, const Variable& g, const Variable& h0,
                const MixerOptions& options) {
  const char* op = "gla";
  check_inputs(op, {&q, &k, &v, &g, &h0});
  const Sizes s = check_qkv(op, q, k, v, h0);
  LINATTN_CHECK(g.shape() == q.shape(), op, ": the log-gate g should have q's shape [B, T, H, dk] = ",
                q.shape().str(), ", got ", g.value().str());
  check_values(op, "g", g, -kMaxFinite, 0.0, "a finite log-gate <= 0 (make it with logsigmoid)");
  return mixer_op(op, {&q, &k, &v, &g, &h0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}}, s, options, false,
                  FeatureMap::identity, {q, k, v, g, {}, h0, {}},
                  {backend::gla_forward, backend::gla_backward, backend::gla_saved_size});
}

// DeltaNet and Gated DeltaNet share everything but the decay input (a undefined = DeltaNet).
static MixerOutput delta_rule(const char* op, const Variable& q, const Variable& k, const Variable& v,
                              const Variable& beta, const Variable& a, const Variable& h0,
                              const MixerOptions& options) {
  const bool gated = a.defined();
  check_inputs(op, {&q, &k, &v, &beta, &a, &h0});
  const Sizes s = check_qkv(op, q, k, v, h0);
  LINATTN_CHECK(beta.shape() == (Shape{s.B, s.T, s.H}), op, ": beta should be [B, T, H] = [", s.B, ", ", s.T, ", ",
                s.H, "], got ", beta.value().str());
  if (gated)
    LINATTN_CHECK(a.shape() == (Shape{s.B, s.T, s.H}), op, ": the log-decay a should be [B, T, H] = [", s.B, ", ", s.T,
                  ", ", s.H, "], got ", a.value().str());
  // [0, 1] rather than (0, 1): a float32 sigmoid rounds to exactly 1 for inputs above ~17, and the
  // delta rule is well defined there.
  check_values(op, "beta", beta, 0.0, 1.0, "in [0, 1] (make it with a sigmoid)");
  if (gated) check_values(op, "a", a, -kMaxFinite, 0.0, "a finite log-decay <= 0");
  return mixer_op(op, {&q, &k, &v, &beta, &a, &h0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}}, s, options,
                  false, FeatureMap::identity, {q, k, v, beta, a, h0, {}},
                  {backend::delta_rule_forward, backend::delta_rule_backward, backend::delta_rule_saved_size});
}

MixerOutput deltanet(const Variable& q, const Variable& k, const Variable& v, const Variable& beta,
                     const Variable& h0, const MixerOptions& options) {
  return delta_rule("deltanet", q, k, v, beta, Variable(), h0, options);
}

MixerOutput gated_deltanet(const Variable& q, const Variable& k, const Variable& v, const Variable& beta,
                           const Variable& a, const Variable& h0, const MixerOptions& options) {
  LINATTN_CHECK(a.defined(), "gated_deltanet: the log-decay a is required");
  return delta_rule("gated_deltanet", q, k, v, beta, a, h0, options);
}

Variable attention(const Variable& q, const Variable& k, const Variable& v, int64_t window, double scale,
                   const Segments& segments) {
  const char* op = "attention";
  check_inputs(op, {&q, &k, &v});
  auto shapes = [&] { return shape_list({{"q", &q}, {"k", &k}, {"v", &v}}); };
  LINATTN_CHECK(q.shape().ndim() == 4 && k.shape().ndim() == 4 && v.shape().ndim() == 4, op,
                ": expected q [B, T, H, dk], k [B, T, Hkv, dk], v [B, T, Hkv, dv], got ", shapes());
  const int64_t B = q.shape()[0], T_ = q.shape()[1], H = q.shape()[2], dk = q.shape()[3];
  const int64_t Hkv = k.shape()[2], dv = v.shape()[3];
  LINATTN_CHECK(k.shape()[0] == B && k.shape()[1] == T_ && k.shape()[3] == dk && v.shape()[0] == B &&
                    v.shape()[1] == T_ && v.shape()[2] == Hkv,
                op, ": mismatched shapes ", shapes());
  LINATTN_CHECK(Hkv >= 1 && H % Hkv == 0, op, ": the query heads (", H, ") must be a multiple of the key/value heads (",
                Hkv, ")");
  LINATTN_CHECK(window >= 0, op, ": window_size ", window, " must be positive (or 0 for global attention)");
  for (auto [name, x] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}}) check_finite(op, name, *x);
  const double sc = scale != 0 ? scale : 1.0 / std::sqrt(double(dk));
  const Device dev = q.device();
  Tensor o = Tensor::scratch({B, T_, H, dv}, q.dtype(), dev);
  // Per segment part, its row log-sum-exps [rows, H, len] from element start * H.
  Tensor lse = Tensor::scratch({B, H, T_}, q.dtype(), dev);
  const std::vector<SegmentPart> parts = segment_parts(segments, B, T_);
  auto lse_of = [H](const Tensor& lse, const SegmentPart& p) { return lse.view_at(p.start * H, {p.rows, H, p.len}); };
  for (const SegmentPart& p : parts)
    backend::attention_forward(dev, positions(o, p), lse_of(lse, p), positions(q.value(), p), positions(k.value(), p),
                               positions(v.value(), p), window, sc);
  Variable out(o, needs_grad({&q, &k, &v}));
  if (out.requires_grad())
    record({&q, &k, &v}, [q, k, v, out, lse, parts, lse_of, window, sc, dev] {
      if (!out.grad().defined()) return;
      Tensor dq = grad_or_scratch(q), dk_t = grad_or_scratch(k), dv_t = grad_or_scratch(v);
      for (const SegmentPart& p : parts)
        backend::attention_backward(dev, positions(dq, p), positions(dk_t, p), positions(dv_t, p),
                                    positions(q.value(), p), positions(k.value(), p), positions(v.value(), p),
                                    positions(out.value(), p), lse_of(lse, p), positions(out.grad(), p), window, sc);
    });
  return out;
}

Variable rope(const Variable& x, double theta, int64_t offset, const Segments& segments) {
  check_inputs("rope", {&x});
  LINATTN_CHECK(x.shape().ndim() == 4 && x.shape()[3] % 2 == 0, "rope: expected x [B, T, H, d] with d even, got ",
                x.value().str());
  LINATTN_CHECK(theta > 0, "rope: theta must be positive, got ", theta);
  const std::vector<SegmentPart> parts = segment_parts(segments, x.shape()[0], x.shape()[1]);
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  for (const SegmentPart& p : parts)
    backend::rope_forward(x.device(), positions(y, p), positions(x.value(), p), p.first ? offset : 0, theta);
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x, out, parts, offset, theta] {
      if (!out.grad().defined()) return;
      const Tensor dx = x.ensure_grad();
      for (const SegmentPart& p : parts)
        backend::rope_backward(x.device(), positions(dx, p), positions(out.grad(), p), p.first ? offset : 0, theta);
    });
  return out;
}

std::string missing_kernels(const std::string& op, Device device) {
  std::string missing;
  auto check = [&](const auto&... entries) {
    for (const char* name : {(entries.has(device) ? "" : entries.op)...})
      if (*name) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  if (op == "linear_attn")
    check(backend::linear_attention_forward, backend::linear_attention_backward, backend::linear_attention_saved_size);
  else if (op == "gla") check(backend::gla_forward, backend::gla_backward, backend::gla_saved_size);
  else if (op == "deltanet" || op == "gated_deltanet")
    check(backend::delta_rule_forward, backend::delta_rule_backward, backend::delta_rule_saved_size);
  else if (op == "attention") check(backend::attention_forward, backend::attention_backward);
  else LINATTN_FAIL("missing_kernels: unknown op '", op, "'");
  return missing;
}

}  // namespace linattn::ops
