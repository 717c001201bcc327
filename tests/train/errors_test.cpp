// Errors by kind: non-finite numbers raise NonFiniteError (the trainer skips such a step); a finite
// value out of range is a plain Error (the trainer stops on it).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/mixers.h"
#include "autograd/ops.h"
#include "core/error.h"

namespace linattn {
namespace {

Variable filled(const Shape& shape, double value) {
  Tensor t = Tensor::empty(shape, DType::f32);
  t.fill_(value);
  return Variable(t);
}

// "nonfinite", "error" (an Error of another kind) or "none".
template <class F>
std::string kind_of(F&& f) {
  try {
    f();
  } catch (const NonFiniteError&) {
    return "nonfinite";
  } catch (const Error&) {
    return "error";
  }
  return "none";
}

TEST(ErrorKinds, NonFiniteNumbersAreNonFiniteErrors) {
  const Shape s{1, 4, 1, 8};
  Variable q = filled(s, 0.1), k = filled(s, 0.1), v = filled(s, 0.1);
  EXPECT_EQ(kind_of([&] { ops::gla(filled(s, NAN), k, v, filled(s, -0.1), {}); }), "nonfinite");
  EXPECT_EQ(kind_of([&] { ops::gla(q, k, v, filled(s, -INFINITY), {}); }), "nonfinite");
  EXPECT_EQ(kind_of([&] { ops::gla(q, k, v, filled(s, -0.1), {}); }), "none");
  // A finite log-gate above 0 is a bug in the caller, not a diverging model.
  EXPECT_EQ(kind_of([&] { ops::gla(q, k, v, filled(s, 0.5), {}); }), "error");

  Tensor targets = Tensor::zeros({2}, DType::i32);
  EXPECT_EQ(kind_of([&] { ops::cross_entropy(filled({2, 5}, NAN), targets); }), "nonfinite");
  EXPECT_EQ(kind_of([&] { ops::cross_entropy(filled({2, 5}, 0.0), targets); }), "none");
}

}  // namespace
}  // namespace linattn
