#include "autograd/mamba2.h"

#include "autograd/mixer_op.h"

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

}  // namespace linattn::ops
