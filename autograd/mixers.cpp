#include "autograd/mixers.h"

#include <cmath>
#include <limits>

#include "autograd/checkpoint.h"
#include "autograd/mixer_op.h"
#include "autograd/mixer_ops.h"
#include "autograd/op_support.h"
#include "autograd/saved.h"

namespace linattn::ops {

using detail::check_finite;
using detail::check_inputs;
using detail::check_values;
using detail::grad_or_scratch;
using detail::kMaxFinite;
using detail::Saved;
using detail::mixer_op;
using detail::shape_list;
using detail::Sizes;

namespace {

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
                  options, normalize, phi, {q, k, v, {}, {}, {}, {}, h0, z0},
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
                  FeatureMap::identity, {q, k, v, g, {}, {}, {}, h0, {}},
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
                  false, FeatureMap::identity, {q, k, v, beta, a, {}, {}, h0, {}},
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
  check_segments(segments, B, T_);
  Tensor table;  // holds the offsets on dev while the kernels run (forward and backward)
  const Sequences seqs = segments.sequences(dev, table);
  Tensor o, o16, lse;  // o16: o's bf16 copy, where selective recomputation keeps one
  // Selective recomputation keeps softmax attention's output (checkpoint.h): recomputing it costs a
  // forward over every key in reach, saving it [T, H, dv] plus [H, T].
  if (detail::take_kept(detail::Kept::attention, o, &o16)) {
    detail::take_kept(detail::Kept::attention, lse);
  } else {
    o = Tensor::scratch({B, T_, H, dv}, q.dtype(), dev);
    // each sequence's [H, len] at start * H
    lse = scratch_for_node({B, H, T_}, q.dtype(), dev, needs_grad({&q, &k, &v}));
    backend::attention_forward(dev, o, lse, q.value(), k.value(), v.value(), window, sc, seqs);
    detail::keep(detail::Kept::attention, o, &o16);
    detail::keep_exact(detail::Kept::attention, lse);  // lse in float32 always
  }
  Variable out(o, needs_grad({&q, &k, &v}));
  if (o16.defined()) out.set_bf16(o16);
  if (out.requires_grad())
    record({&q, &k, &v}, [q = Saved(q), k = Saved(k), v = Saved(v), out = Saved(out), lse, table, seqs, window, sc,
                          dev] {
      if (!out.var().grad().defined()) return;
      // q, k, v and o as kept (bf16 copies: the entries read or widen them, kernels/backend.def);
      // dq, dk and dv written when none holds a sum yet
      bool write = false;
      const std::vector<Tensor> g = detail::grads_to_write({&q.var(), &k.var(), &v.var()}, write);
      backend::attention_backward(dev, g[0], g[1], g[2], q.stored(), k.stored(), v.stored(), out.stored(), lse,
                                  out.var().grad(), window, sc, seqs, write);
    });
  return out;
}

Variable rope(const Variable& x, double theta, int64_t offset, const Segments& segments) {
  check_inputs("rope", {&x});
  LINATTN_CHECK(x.shape().ndim() == 4 && x.shape()[3] % 2 == 0, "rope: expected x [B, T, H, d] with d even, got ",
                x.value().str());
  LINATTN_CHECK(theta > 0, "rope: theta must be positive, got ", theta);
  check_segments(segments, x.shape()[0], x.shape()[1]);
  Tensor table;
  const Sequences seqs = segments.sequences(x.device(), table);
  Tensor y = Tensor::scratch(x.shape(), x.dtype(), x.device());
  backend::rope_forward(x.device(), y, x.value(), offset, theta, seqs);
  Variable out(y, needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), out = out.without_value(), table, seqs, offset, theta] {
      if (!out.grad().defined()) return;
      backend::rope_backward(x.device(), x.ensure_grad(), out.grad(), offset, theta, seqs);
    });
  return out;
}


// ---- the ops' descriptors (autograd/mixer_ops.h) ----

namespace {

OpInput q_input() { return op_input("q", {"B", "T", "H", "dk"}, "queries"); }
OpInput k_input() { return op_input("k", {"B", "T", "H", "dk"}, "keys"); }
OpInput v_input() { return op_input("v", {"B", "T", "H", "dv"}, "values"); }
OpInput h0_input() { return op_input("h0", {"B", "H", "dk", "dv"}, "initial state").optional(); }
// The DeltaNets' inputs: q and k with unit rows (their layer L2-normalizes them), beta.
std::vector<OpInput> delta_inputs() {
  return {op_input("q", {"B", "T", "H", "dk"}, "queries, used as given (the layer L2-normalizes them)").unit_norm_rows(),
          op_input("k", {"B", "T", "H", "dk"}, "keys, used as given (the layer L2-normalizes them)").unit_norm_rows(),
          v_input(),
          op_input("beta", {"B", "T", "H"}, "in [0, 1]").values(0.1, 0.9)};
}

std::map<std::string, Variable> outputs(const MixerOutput& r) {
  std::map<std::string, Variable> out{{"o", r.o}, {"ht", r.ht}};
  if (r.zt.defined()) out["zt"] = r.zt;
  return out;
}

FeatureMap feature_map_named(const std::string& name) {
  return name == "elu1" ? FeatureMap::elu1 : name == "relu" ? FeatureMap::relu : FeatureMap::identity;
}

}  // namespace

extern const MixerOpDescriptor linear_attn_op = [] {
  MixerOpDescriptor d;
  d.name = "linear_attn";
  d.summary = "linear attention with a feature map, optionally normalized";
  d.inputs = {q_input(), k_input(), v_input(), h0_input(),
              op_input("z0", {"B", "H", "dk"}, "initial normalizer state (normalize only)").optional().values(0.5, 1.5)};
  d.attributes = {{"feature_map", {"identity", "elu1", "relu"}, "phi on q and k"},
                  {"normalize", {}, "1 = the normalized form"}};
  d.run = [](const OpCall& c) {
    const bool normalize = c.number.at("normalize") != 0;
    LINATTN_CHECK(!c.input("z0").defined() || normalize, "linear_attn: 'z0' is the normalizer state of the "
                  "normalized form; set the attribute normalize = 1 or drop z0");
    return outputs(linear_attention(c.input("q"), c.input("k"), c.input("v"), c.input("h0"),
                                    feature_map_named(c.text.at("feature_map")), normalize, c.options, c.input("z0")));
  };
  d.entries = {entry(backend::linear_attention_forward), entry(backend::linear_attention_backward),
               entry(backend::linear_attention_saved_size)};
  return d;
}();

extern const MixerOpDescriptor gla_op = [] {
  MixerOpDescriptor d;
  d.name = "gla";
  d.summary = "gated linear attention: a data-dependent decay per key channel";
  d.inputs = {q_input(), k_input(), v_input(),
              op_input("g", {"B", "T", "H", "dk"}, "log-gate, <= 0").values(-1, -0.01), h0_input()};
  d.run = [](const OpCall& c) {
    return outputs(gla(c.input("q"), c.input("k"), c.input("v"), c.input("g"), c.input("h0"), c.options));
  };
  d.entries = {entry(backend::gla_forward), entry(backend::gla_backward), entry(backend::gla_saved_size)};
  return d;
}();

extern const MixerOpDescriptor deltanet_op = [] {
  MixerOpDescriptor d;
  d.name = "deltanet";
  d.summary = "DeltaNet: the delta rule";
  d.inputs = delta_inputs();
  d.inputs.push_back(h0_input());
  d.run = [](const OpCall& c) {
    return outputs(deltanet(c.input("q"), c.input("k"), c.input("v"), c.input("beta"), c.input("h0"), c.options));
  };
  d.entries = {entry(backend::delta_rule_forward), entry(backend::delta_rule_backward),
               entry(backend::delta_rule_saved_size)};
  return d;
}();

extern const MixerOpDescriptor gated_deltanet_op = [] {
  MixerOpDescriptor d;
  d.name = "gated_deltanet";
  d.summary = "Gated DeltaNet: the delta rule with a decay per head";
  d.inputs = delta_inputs();
  d.inputs.push_back(op_input("a", {"B", "T", "H"}, "log-decay, <= 0").values(-0.5, 0));
  d.inputs.push_back(h0_input());
  d.run = [](const OpCall& c) {
    return outputs(gated_deltanet(c.input("q"), c.input("k"), c.input("v"), c.input("beta"), c.input("a"),
                                  c.input("h0"), c.options));
  };
  d.entries = {entry(backend::delta_rule_forward), entry(backend::delta_rule_backward),
               entry(backend::delta_rule_saved_size)};
  return d;
}();

extern const MixerOpDescriptor attention_op = [] {
  MixerOpDescriptor d;
  d.name = "attention";
  d.summary = "causal softmax attention, global or windowed, grouped-query";
  d.inputs = {q_input(), op_input("k", {"B", "T", "Hkv", "dk"}, "keys (Hkv divides H)"),
              op_input("v", {"B", "T", "Hkv", "dv"}, "values")};
  d.attributes = {{"window_size", {}, "the window; 0 = global"}};
  d.recurrent = false;
  d.run = [](const OpCall& c) {
    const Segments none;
    return std::map<std::string, Variable>{
        {"o", attention(c.input("q"), c.input("k"), c.input("v"), c.number.at("window_size"), c.options.scale,
                        c.options.segments ? *c.options.segments : none)}};
  };
  d.entries = {entry(backend::attention_forward), entry(backend::attention_backward)};
  return d;
}();

}  // namespace linattn::ops
