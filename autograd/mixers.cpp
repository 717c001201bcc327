#include "autograd/mixers.h"

#include <cmath>
#include <limits>

#include "autograd/op_support.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/deltanet.h"
#include "kernels/cpu/gla.h"
#include "kernels/cpu/rope.h"

namespace linattn::ops {

using detail::check_inputs;
using detail::data_or_null;
using detail::grad_or_null;

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
void check_values(const char* op, const char* name, const Variable& x, double lo, double hi, const char* range) {
  if (!x.defined()) return;
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

// The gradient of v: its real gradient when it needs one, else throw-away zeros. The caller holds
// the tensor until the kernel has written into it (without an arena, scratch memory is freed with it).
Tensor grad_or_scratch(const Variable& v) {
  return v.requires_grad() ? v.ensure_grad() : Tensor::scratch_zeros(v.shape(), v.dtype());
}

template <class T>
const T* grad_data_or_null(const Variable& v) {
  return v.defined() && v.grad().defined() ? v.grad().template data<T>() : nullptr;
}

// The upstream gradient of the output o: zeros when nothing used o (held like grad_or_scratch's).
Tensor grad_or_zeros(const Variable& o) {
  return o.grad().defined() ? o.grad() : Tensor::scratch_zeros(o.shape(), o.dtype());
}

// One kernel call of a mixer op: the rows of a segment part (segments.h) in every [B, T, ...] tensor, by
// offset, and its share of `saved`. Initial states go to the first part of a row, final states come
// from its last part (nullptr elsewhere: zeros in, nothing out).
struct Call {
  SegmentPart p;
  Sizes s;
  int64_t saved;  // offset of the part's saved elements
  template <class T>
  T* qk(T* x) const { return x + p.start * s.H * s.Dk; }  // q, k, g: [B, T, H, dk]
  template <class T>
  T* vo(T* x) const { return x + p.start * s.H * s.Dv; }  // v, o: [B, T, H, dv]
  template <class T>
  T* scalar(T* x) const { return x ? x + p.start * s.H : nullptr; }  // beta, a: [B, T, H]
  template <class T>
  T* h0(T* x) const { return p.first && x ? x + p.row * s.H * s.Dk * s.Dv : nullptr; }  // [B, H, dk, dv]
  template <class T>
  T* ht(T* x) const { return p.last && x ? x + p.row * s.H * s.Dk * s.Dv : nullptr; }
  template <class T>
  T* z0(T* x) const { return p.first && x ? x + p.row * s.H * s.Dk : nullptr; }  // [B, H, dk]
  template <class T>
  T* zt(T* x) const { return p.last && x ? x + p.row * s.H * s.Dk : nullptr; }
};

// What a mixer op's kernels write and read besides its inputs.
struct MixerRun {
  Sizes s;
  double scale;
  bool chunk;  // the chunk form, else the recurrent one
  int64_t chunk_size;
  Tensor o, ht, zt, saved;  // zt: normalized linear attention only; saved: chunk form only
  std::vector<Call> calls;  // one per segment part
};

// The prologue and epilogue every mixer op shares, after its own shape and range checks: checks the
// `finite` inputs, allocates the outputs and (chunk form) saved_size(rows, len) elements per segment
// part for the backward, runs forward(T(0), run, call) per part for the inputs' float type, and
// records one tape node over `inputs` whose backward runs backward(T(0), run, out, dO), dO the
// upstream gradient of o (zeros when unused), which runs the backward kernel of every run.calls.
template <class SavedSize, class Forward, class Backward>
MixerOutput mixer_op(const char* op, std::initializer_list<const Variable*> inputs,
                     std::initializer_list<std::pair<const char*, const Variable*>> finite, const Sizes& s,
                     const MixerOptions& options, bool normalize, SavedSize saved_size, Forward forward,
                     Backward backward) {
  for (auto [name, x] : finite) check_finite(op, name, *x);
  const DType dt = inputs.begin()[0]->dtype();
  const bool chunk = options.form == MixerForm::chunk;
  std::vector<Call> calls;
  int64_t saved = 0;
  for (const SegmentPart& p : segment_parts(options.segments ? *options.segments : Segments{}, s.B, s.T)) {
    calls.push_back({p, s, saved});
    if (chunk) saved += saved_size(p.rows, p.len);
  }
  const MixerRun run{s,
                     options.scale != 0 ? options.scale : 1.0 / std::sqrt(double(s.Dk)),
                     chunk,
                     options.chunk_size,
                     Tensor::scratch({s.B, s.T, s.H, s.Dv}, dt),
                     Tensor::scratch({s.B, s.H, s.Dk, s.Dv}, dt),
                     normalize ? Tensor::scratch({s.B, s.H, s.Dk}, dt) : Tensor(),
                     chunk ? Tensor::scratch({saved}, dt) : Tensor(),
                     std::move(calls)};
  dispatch_float(dt, [&](auto zero) {
    for (const Call& c : run.calls) forward(zero, run, c);
  });
  const bool rg = needs_grad(inputs);
  MixerOutput out{Variable(run.o, rg), Variable(run.ht, rg), normalize ? Variable(run.zt, rg) : Variable()};
  if (rg)
    record(inputs, [run, out, backward, dt] {
      dispatch_float(dt, [&](auto zero) { backward(zero, run, out, grad_or_zeros(out.o)); });
    });
  return out;
}

// The saved elements of a part's call: saved(rows, len).
template <class T>
T* saved_of(const MixerRun& r, const Call& c) {
  return r.saved.defined() ? r.saved.data<T>() + c.saved : nullptr;
}

}  // namespace

MixerOutput linear_attention(const Variable& q, const Variable& k, const Variable& v, const Variable& h0,
                             cpu::FeatureMap phi, bool normalize, const MixerOptions& options, const Variable& z0) {
  const char* op = "linear_attention";
  check_inputs(op, {&q, &k, &v, &h0, &z0});
  const Sizes s = check_qkv(op, q, k, v, h0);
  if (z0.defined()) {
    LINATTN_CHECK(normalize, op, ": z0 is the normalizer state of the normalized form; pass normalize = true");
    LINATTN_CHECK(z0.shape() == (Shape{s.B, s.H, s.Dk}), op, ": z0 should be [", s.B, ", ", s.H, ", ", s.Dk, "], got ",
                  z0.value().str());
  }
  return mixer_op(
      op, {&q, &k, &v, &h0, &z0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}, {"z0", &z0}}, s, options, normalize,
      [&](int64_t rows, int64_t len) {
        return cpu::linear_attn_chunk_saved_size(rows, len, s.H, s.Dk, s.Dv, normalize, options.chunk_size);
      },
      [&](auto zero, const MixerRun& r, const Call& c) {
        using T = decltype(zero);
        T* zt = normalize ? c.zt(r.zt.data<T>()) : nullptr;
        const T* Z0 = normalize ? c.z0(data_or_null<T>(z0)) : nullptr;
        const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
        if (r.chunk)
          cpu::linear_attn_chunk_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), zt, saved_of<T>(r, c), Q, K, V,
                                            c.h0(data_or_null<T>(h0)), Z0, c.p.rows, c.p.len, s.H, s.Dk, s.Dv,
                                            T(r.scale), phi, normalize, r.chunk_size);
        else
          cpu::linear_attn_recurrent_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), zt, Q, K, V,
                                                c.h0(data_or_null<T>(h0)), Z0, c.p.rows, c.p.len, s.H, s.Dk, s.Dv,
                                                T(r.scale), phi, normalize);
      },
      [q, k, v, h0, z0, phi, normalize](auto zero, const MixerRun& r, const MixerOutput& out, const Tensor& dO_t) {
        using T = decltype(zero);
        Tensor dq = grad_or_scratch(q), dk = grad_or_scratch(k), dv = grad_or_scratch(v);
        const Sizes& s = r.s;
        for (const Call& c : r.calls) {
          T* dz0 = normalize ? c.z0(grad_or_null<T>(z0)) : nullptr;
          const T* dzt = normalize ? c.zt(grad_data_or_null<T>(out.zt)) : nullptr;
          const T* Z0 = normalize ? c.z0(data_or_null<T>(z0)) : nullptr;
          const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
          const T *dO = c.vo(dO_t.data<T>()), *dht = c.ht(grad_data_or_null<T>(out.ht));
          T *dQ = c.qk(dq.data<T>()), *dK = c.qk(dk.data<T>()), *dV = c.vo(dv.data<T>());
          T* dh0 = c.h0(grad_or_null<T>(h0));
          if (r.chunk)
            cpu::linear_attn_chunk_backward<T>(dQ, dK, dV, dh0, dz0, saved_of<T>(r, c), Q, K, V, dO, dht, dzt,
                                               c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale), phi, normalize,
                                               r.chunk_size);
          else
            cpu::linear_attn_recurrent_backward<T>(dQ, dK, dV, dh0, dz0, Q, K, V, c.h0(data_or_null<T>(h0)), Z0, dO,
                                                   dht, dzt, c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale), phi,
                                                   normalize);
        }
      });
}

MixerOutput gla(const Variable& q, const Variable& k, const Variable& v, const Variable& g, const Variable& h0,
                const MixerOptions& options) {
  const char* op = "gla";
  check_inputs(op, {&q, &k, &v, &g, &h0});
  const Sizes s = check_qkv(op, q, k, v, h0);
  LINATTN_CHECK(g.shape() == q.shape(), op, ": the log-gate g should have q's shape [B, T, H, dk] = ",
                q.shape().str(), ", got ", g.value().str());
  check_values(op, "g", g, -kMaxFinite, 0.0, "a finite log-gate <= 0 (make it with logsigmoid)");
  return mixer_op(
      op, {&q, &k, &v, &g, &h0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}}, s, options, false,
      [&](int64_t rows, int64_t len) {
        return cpu::gla_chunk_saved_size(rows, len, s.H, s.Dk, s.Dv, options.chunk_size);
      },
      [&](auto zero, const MixerRun& r, const Call& c) {
        using T = decltype(zero);
        const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
        const T* G = c.qk(g.value().data<T>());
        if (r.chunk)
          cpu::gla_chunk_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), saved_of<T>(r, c), Q, K, V, G,
                                    c.h0(data_or_null<T>(h0)), c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale),
                                    r.chunk_size);
        else
          cpu::gla_recurrent_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), Q, K, V, G,
                                        c.h0(data_or_null<T>(h0)), c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale));
      },
      [q, k, v, g, h0](auto zero, const MixerRun& r, const MixerOutput& out, const Tensor& dO_t) {
        using T = decltype(zero);
        // RetNet's constant gate g needs no gradient: its throw-away one lives in dg.
        Tensor dq = grad_or_scratch(q), dk = grad_or_scratch(k), dv = grad_or_scratch(v), dg = grad_or_scratch(g);
        const Sizes& s = r.s;
        for (const Call& c : r.calls) {
          const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
          const T *G = c.qk(g.value().data<T>()), *dO = c.vo(dO_t.data<T>());
          const T* dht = c.ht(grad_data_or_null<T>(out.ht));
          T *dQ = c.qk(dq.data<T>()), *dK = c.qk(dk.data<T>()), *dV = c.vo(dv.data<T>()), *dG = c.qk(dg.data<T>());
          T* dh0 = c.h0(grad_or_null<T>(h0));
          if (r.chunk)
            cpu::gla_chunk_backward<T>(dQ, dK, dV, dG, dh0, saved_of<T>(r, c), Q, K, V, G, dO, dht, c.p.rows, c.p.len,
                                       s.H, s.Dk, s.Dv, T(r.scale), r.chunk_size);
          else
            cpu::gla_recurrent_backward<T>(dQ, dK, dV, dG, dh0, Q, K, V, G, c.h0(data_or_null<T>(h0)), dO, dht,
                                           c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale));
        }
      });
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
  return mixer_op(
      op, {&q, &k, &v, &beta, &a, &h0}, {{"q", &q}, {"k", &k}, {"v", &v}, {"h0", &h0}}, s, options, false,
      [&](int64_t rows, int64_t len) {
        return cpu::deltanet_chunk_saved_size(rows, len, s.H, s.Dk, s.Dv, options.chunk_size);
      },
      [&](auto zero, const MixerRun& r, const Call& c) {
        using T = decltype(zero);
        const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
        const T *Bt = c.scalar(beta.value().data<T>()), *A = c.scalar(data_or_null<T>(a));
        const T* H0 = c.h0(data_or_null<T>(h0));
        if (r.chunk)
          cpu::deltanet_chunk_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), saved_of<T>(r, c), Q, K, V, Bt, A,
                                         H0, c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale), r.chunk_size);
        else
          cpu::deltanet_recurrent_forward<T>(c.vo(r.o.data<T>()), c.ht(r.ht.data<T>()), Q, K, V, Bt, A, H0, c.p.rows,
                                             c.p.len, s.H, s.Dk, s.Dv, T(r.scale));
      },
      [q, k, v, beta, a, h0](auto zero, const MixerRun& r, const MixerOutput& out, const Tensor& dO_t) {
        using T = decltype(zero);
        Tensor dq_t = grad_or_scratch(q), dk_t = grad_or_scratch(k), dv_t = grad_or_scratch(v);
        Tensor dbeta_t = grad_or_scratch(beta), da_t = a.defined() ? grad_or_scratch(a) : Tensor();
        const Sizes& s = r.s;
        for (const Call& c : r.calls) {
          T *dq = c.qk(dq_t.data<T>()), *dk = c.qk(dk_t.data<T>()), *dv = c.vo(dv_t.data<T>());
          T *dbeta = c.scalar(dbeta_t.data<T>()), *da = a.defined() ? c.scalar(da_t.data<T>()) : nullptr;
          T* dh0 = c.h0(grad_or_null<T>(h0));
          const T *Q = c.qk(q.value().data<T>()), *K = c.qk(k.value().data<T>()), *V = c.vo(v.value().data<T>());
          const T *Bt = c.scalar(beta.value().data<T>()), *A = c.scalar(data_or_null<T>(a));
          const T *H0 = c.h0(data_or_null<T>(h0)), *dO = c.vo(dO_t.data<T>()), *dHt = c.ht(grad_data_or_null<T>(out.ht));
          if (r.chunk)
            cpu::deltanet_chunk_backward<T>(dq, dk, dv, dbeta, da, dh0, saved_of<T>(r, c), Q, K, V, Bt, A, H0, dO, dHt,
                                            c.p.rows, c.p.len, s.H, s.Dk, s.Dv, T(r.scale), r.chunk_size);
          else
            cpu::deltanet_recurrent_backward<T>(dq, dk, dv, dbeta, da, dh0, Q, K, V, Bt, A, H0, dO, dHt, c.p.rows,
                                                c.p.len, s.H, s.Dk, s.Dv, T(r.scale));
        }
      });
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
  DType dt = q.dtype();
  Tensor o = Tensor::scratch({B, T_, H, dv}, dt);
  // Per segment part, its row log-sum-exps [rows, H, len] from element start * H.
  Tensor lse = Tensor::scratch({B, H, T_}, dt);
  const std::vector<SegmentPart> parts = segment_parts(segments, B, T_);
  dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    for (const SegmentPart& p : parts)
      cpu::attention_forward<T>(o.data<T>() + p.start * H * dv, lse.data<T>() + p.start * H,
                                q.value().data<T>() + p.start * H * dk, k.value().data<T>() + p.start * Hkv * dk,
                                v.value().data<T>() + p.start * Hkv * dv, p.rows, p.len, H, Hkv, dk, dv, window, T(sc));
  });
  Variable out(o, needs_grad({&q, &k, &v}));
  if (out.requires_grad())
    record({&q, &k, &v}, [q, k, v, out, lse, parts, H, Hkv, dk, dv, window, sc] {
      if (!out.grad().defined()) return;
      dispatch_float(q.dtype(), [&](auto zero) {
        using T = decltype(zero);
        Tensor dq = grad_or_scratch(q), dk_t = grad_or_scratch(k), dv_t = grad_or_scratch(v);
        for (const SegmentPart& p : parts)
          cpu::attention_backward<T>(dq.data<T>() + p.start * H * dk, dk_t.data<T>() + p.start * Hkv * dk,
                                     dv_t.data<T>() + p.start * Hkv * dv, q.value().data<T>() + p.start * H * dk,
                                     k.value().data<T>() + p.start * Hkv * dk, v.value().data<T>() + p.start * Hkv * dv,
                                     out.value().data<T>() + p.start * H * dv, lse.data<T>() + p.start * H,
                                     out.grad().data<T>() + p.start * H * dv, p.rows, p.len, H, Hkv, dk, dv, window,
                                     T(sc));
      });
    });
  return out;
}

Variable rope(const Variable& x, double theta, int64_t offset, const Segments& segments) {
  check_inputs("rope", {&x});
  LINATTN_CHECK(x.shape().ndim() == 4 && x.shape()[3] % 2 == 0, "rope: expected x [B, T, H, d] with d even, got ",
                x.value().str());
  LINATTN_CHECK(theta > 0, "rope: theta must be positive, got ", theta);
  const int64_t B = x.shape()[0], T_ = x.shape()[1], H = x.shape()[2], d = x.shape()[3];
  const std::vector<SegmentPart> parts = segment_parts(segments, B, T_);
  Tensor y = Tensor::scratch(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (const SegmentPart& p : parts)
      cpu::rope_forward<T>(y.data<T>() + p.start * H * d, x.value().data<T>() + p.start * H * d, p.rows, p.len, H, d,
                           p.first ? offset : 0, theta);
  });
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x, out, parts, H, d, offset, theta] {
      if (!out.grad().defined()) return;
      dispatch_float(x.dtype(), [&](auto zero) {
        using T = decltype(zero);
        for (const SegmentPart& p : parts)
          cpu::rope_backward<T>(x.ensure_grad().data<T>() + p.start * H * d, out.grad().data<T>() + p.start * H * d,
                                p.rows, p.len, H, d, p.first ? offset : 0, theta);
      });
    });
  return out;
}

}  // namespace linattn::ops
