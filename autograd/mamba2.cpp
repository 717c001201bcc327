#include "autograd/mamba2.h"

#include <cmath>
#include <limits>

#include "autograd/mixer_op.h"
#include "autograd/mixer_ops.h"

namespace linattn::ops {

using detail::check_finite;
using detail::check_inputs;
using detail::shape_list;

MixerOutput mamba2(const Variable& x, const Variable& dt, const Variable& A_log, const Variable& B, const Variable& C,
                   const Variable& D, const Variable& h0, const MixerOptions& options) {
  const char* op = "mamba2";
  check_inputs(op, {&x, &dt, &A_log, &B, &C, &D, &h0});
  auto shapes = [&] {
    return shape_list({{"x", &x}, {"dt", &dt}, {"A_log", &A_log}, {"B", &B}, {"C", &C}, {"D", &D}, {"h0", &h0}});
  };
  LINATTN_CHECK(x.shape().ndim() == 4 && B.shape().ndim() == 4 && C.shape() == B.shape() &&
                    B.shape()[0] == x.shape()[0] && B.shape()[1] == x.shape()[1],
                op, ": expected x [B, T, H, P] and B, C [B, T, G, N], got ", shapes());
  detail::Sizes s{x.shape()[0], x.shape()[1], x.shape()[2], B.shape()[3], x.shape()[3], B.shape()[2]};
  LINATTN_CHECK(s.H % s.G == 0, op, ": the ", s.H, " heads of x do not split into the ", s.G, " groups of B and C");
  LINATTN_CHECK(dt.shape() == (Shape{s.B, s.T, s.H}), op, ": dt should be [B, T, H] = [", s.B, ", ", s.T, ", ", s.H,
                "], got ", shapes());
  LINATTN_CHECK(A_log.shape() == Shape{s.H} && D.shape() == Shape{s.H}, op, ": A_log and D should be [H] = [", s.H,
                "], got ", shapes());
  if (h0.defined())
    LINATTN_CHECK(h0.shape() == (Shape{s.B, s.H, s.Dk, s.Dv}), op, ": initial state h0 should be [", s.B, ", ", s.H,
                  ", ", s.Dk, ", ", s.Dv, "], got ", shapes());
  for (auto [name, v] : {std::pair{"dt", &dt}, {"A_log", &A_log}, {"D", &D}}) check_finite(op, name, *v);
  return detail::mixer_op(op, {&x, &dt, &A_log, &B, &C, &D, &h0},
                          {{"x", &x}, {"B", &B}, {"C", &C}, {"h0", &h0}}, s, options, false, FeatureMap::identity,
                          {C, B, x, dt, {}, A_log, D, h0, {}},
                          {backend::mamba2_forward, backend::mamba2_backward, backend::mamba2_saved_size});
}

// ---- the op's descriptor (autograd/mixer_ops.h) ----

namespace {

// y = f(x) elementwise, with the tape node dx += f'(x) dy; computed on the host.
Variable pointwise(const Variable& x, double (*f)(double), double (*df)(double)) {
  const Tensor xs = x.value().device() == Device::cpu ? x.value() : x.value().to(Device::cpu);
  Tensor y = Tensor::empty(xs.shape(), xs.dtype());
  dispatch_float(xs.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < xs.numel(); ++i) y.data<T>()[i] = T(f(double(xs.data<T>()[i])));
  });
  Variable out(x.device() == Device::cpu ? y : y.to(x.device()), needs_grad({&x}));
  if (out.requires_grad())
    record({&x}, [x = x.without_value(), out = out.without_value(), xs, df] {
      if (!out.grad().defined()) return;
      const Tensor dy = out.grad().device() == Device::cpu ? out.grad() : out.grad().to(Device::cpu);
      Tensor dx = Tensor::empty(xs.shape(), xs.dtype());
      dispatch_float(xs.dtype(), [&](auto zero) {
        using T = decltype(zero);
        for (int64_t i = 0; i < xs.numel(); ++i) dx.data<T>()[i] = T(df(double(xs.data<T>()[i])) * double(dy.data<T>()[i]));
      });
      detail::accumulate(x, x.device() == Device::cpu ? dx : dx.to(x.device()));
    });
  return out;
}

// The time step before its softplus: u = softplus^-1(dt) = log(expm1(dt)); du/ddt = 1 / (1 - exp(-dt)).
double softplus_inverse(double dt) { return std::log(std::expm1(dt)); }
double softplus_inverse_derivative(double dt) { return -1 / std::expm1(-dt); }
// A_log = log(-A); dA_log/dA = 1 / A.
double log_of_negative(double A) { return std::log(-A); }
double log_of_negative_derivative(double A) { return 1 / A; }

}  // namespace

extern const MixerOpDescriptor mamba2_op = [] {
  MixerOpDescriptor d;
  d.name = "mamba2";
  d.summary = "Mamba2's SSD scan: a decay exp(dt A) per head, B and C shared by groups of heads, the D skip";
  d.inputs = {op_input("x", {"B", "T", "H", "dv"}, "the heads' inputs"),
              op_input("dt", {"B", "T", "H"}, "time step after its softplus, > 0").values(0.05, 1),
              op_input("A", {"H"}, "A = -exp(A_log), < 0").values(-2, -0.2),
              op_input("B", {"B", "T", "G", "dk"}, "input projection, head h reads group h / (H / G)"),
              op_input("C", {"B", "T", "G", "dk"}, "output projection, head h reads group h / (H / G)"),
              op_input("D", {"H"}, "skip, o += D x").optional().values(0.5, 1.5),
              op_input("h0", {"B", "H", "dk", "dv"}, "initial state").optional()};
  d.run = [](const OpCall& c) {
    const Variable dt = c.input("dt"), A = c.input("A");
    constexpr double tiny = std::numeric_limits<double>::denorm_min();
    detail::check_values("mamba2", "dt", dt, tiny, detail::kMaxFinite, "a finite time step > 0 (after its softplus)");
    detail::check_values("mamba2", "A", A, -detail::kMaxFinite, -tiny, "a finite A < 0");
    const Variable D = c.input("D").defined() ? c.input("D") : Variable(Tensor::zeros(A.shape(), A.dtype(), A.device()));
    const MixerOutput r = mamba2(c.input("x"), pointwise(dt, softplus_inverse, softplus_inverse_derivative),
                                 pointwise(A, log_of_negative, log_of_negative_derivative), c.input("B"), c.input("C"), D,
                                 c.input("h0"), c.options);
    return std::map<std::string, Variable>{{"o", r.o}, {"ht", r.ht}};
  };
  d.entries = {entry(backend::mamba2_forward), entry(backend::mamba2_backward), entry(backend::mamba2_saved_size)};
  return d;
}();

}  // namespace linattn::ops
