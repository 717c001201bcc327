// Float64 gradient checks through the tape: the hand-derived backward of an op (or a chain of
// ops) against central finite differences of the same forward, with a random upstream gradient.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"
#include "testing.h"

namespace linattn::testing {

using OpFn = std::function<Variable(const std::vector<Variable>&)>;

// Returns {analytic, numeric} gradients of <f(inputs), R> for every input, R random.
inline std::vector<std::pair<Tensor, Tensor>> tape_and_numeric_gradients(const OpFn& f,
                                                                         const std::vector<Tensor>& inputs, Rng& rng) {
  std::vector<Variable> vars;
  for (const Tensor& t : inputs) vars.emplace_back(t, true);
  Variable out = f(vars);
  Tensor upstream = random_tensor(out.shape(), rng);
  backward({out}, {upstream});

  auto loss = [&] {
    NoGrad no_grad;
    std::vector<Variable> plain;
    for (const Tensor& t : inputs) plain.emplace_back(t, false);
    return dot(f(plain).value(), upstream);
  };
  std::vector<std::pair<Tensor, Tensor>> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor analytic = vars[i].grad().defined() ? vars[i].grad().clone() : Tensor::zeros(inputs[i].shape(), DType::f64);
    result.emplace_back(analytic, finite_difference(loss, inputs[i]));
  }
  return result;
}

// The bar for every op: relative error <= 1e-6. Central differences with h = 1e-6 on O(1) inputs are
// accurate to ~1e-9 (truncation h^2 f''' plus rounding 1e-16 / h), so a correct backward passes
// with a wide margin and a wrong one (errors of O(1) relative) cannot.
constexpr double kGradTolerance = 1e-6;

inline void expect_gradients_match(const OpFn& f, const std::vector<Tensor>& inputs, Rng& rng,
                                   double tol = kGradTolerance) {
  auto grads = tape_and_numeric_gradients(f, inputs, rng);
  for (size_t i = 0; i < grads.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + " " + inputs[i].str());
    EXPECT_GT(max_abs(grads[i].second), 0.0) << "the numeric gradient is zero: the check would prove nothing";
    EXPECT_CLOSE(grads[i].first, grads[i].second, tol);
  }
}

}  // namespace linattn::testing
