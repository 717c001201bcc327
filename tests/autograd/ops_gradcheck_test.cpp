// Every op's hand-derived backward against float64 central finite differences.
#include "autograd/ops.h"
#include "gradcheck.h"

namespace linattn {
namespace {

using testing::expect_gradients_match;
using testing::random_tensor;
using V = std::vector<Variable>;

TEST(GradCheck, Add) {
  Rng rng(1);
  expect_gradients_match([](const V& x) { return ops::add(x[0], x[1]); },
                         {random_tensor({3, 5}, rng), random_tensor({3, 5}, rng)}, rng);
}

TEST(GradCheck, Mul) {
  Rng rng(2);
  expect_gradients_match([](const V& x) { return ops::mul(x[0], x[1]); },
                         {random_tensor({2, 3, 4}, rng), random_tensor({2, 3, 4}, rng)}, rng);
}

TEST(GradCheck, Scale) {
  Rng rng(15);
  expect_gradients_match([](const V& x) { return ops::scale(x[0], -0.0625); }, {random_tensor({3, 4}, rng)}, rng);
}

TEST(GradCheck, Activations) {
  for (Activation f : {Activation::silu, Activation::sigmoid, Activation::logsigmoid,
                            Activation::elu1, Activation::relu}) {
    SCOPED_TRACE(activation_name(f));
    Rng rng(3);
    // Inputs on both sides of 0 but away from relu's and elu's kink, where the derivative jumps.
    Tensor x = random_tensor({4, 7}, rng, -3, 3);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (std::abs(x.data<double>()[i]) < 0.05) x.data<double>()[i] = 0.5;
    expect_gradients_match([f](const V& v) { return ops::activation(f, v[0]); }, {x}, rng);
    expect_gradients_match([f](const V& v) { return ops::activation(f, v[0], -0.3); }, {x}, rng);
  }
}

TEST(GradCheck, SwiGLU) {
  Rng rng(4);
  expect_gradients_match([](const V& x) { return ops::swiglu(x[0], x[1]); },
                         {random_tensor({5, 6}, rng, -3, 3), random_tensor({5, 6}, rng)}, rng);
}

// The backwards write a gradient nobody has written yet and add into one that holds a sum: an input
// read twice by one op (swiglu(x, x): one buffer for both), and read again after (x + silu(x)).
TEST(GradCheck, FirstWritersAndSharedInputs) {
  Rng rng(17);
  const Tensor x = random_tensor({4, 6}, rng, -3, 3), w = random_tensor({5, 6}, rng);
  expect_gradients_match([](const V& v) { return ops::swiglu(v[0], v[0]); }, {x}, rng);
  expect_gradients_match([](const V& v) { return ops::swiglu_linear(v[0], v[0], v[1]); }, {x, w}, rng);
  expect_gradients_match([](const V& v) { return ops::add(v[0], ops::silu(v[0])); }, {x}, rng);
  expect_gradients_match([](const V& v) { return ops::add(ops::silu(v[0]), ops::swiglu(v[0], v[1])); },
                         {x, random_tensor({4, 6}, rng)}, rng);
}

TEST(GradCheck, GatedDeltaNetDecayOfFla) {
  Rng rng(16);
  // x spans both signs and beyond softplus' bend; A_log as fla draws it, log(U(0, 16)).
  expect_gradients_match([](const V& x) { return ops::gdn_decay(x[0], x[1], x[2]); },
                         {random_tensor({2, 3, 4}, rng, -6, 6), random_tensor({4}, rng, -1, 2.7),
                          random_tensor({4}, rng, -5, 1)},
                         rng);
  // The value, against the formula written out: -exp(A_log) * log(1 + exp(x + dt_bias)).
  Tensor x = random_tensor({5, 2}, rng, -30, 30), A_log = random_tensor({2}, rng), dt = random_tensor({2}, rng);
  Tensor a = ops::gdn_decay(Variable(x), Variable(A_log), Variable(dt)).value();
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t h = 0; h < 2; ++h) {
      const double s = x.data<double>()[r * 2 + h] + dt.data<double>()[h];
      const double want = -std::exp(A_log.data<double>()[h]) * std::log1p(std::exp(s));
      EXPECT_NEAR(a.data<double>()[r * 2 + h], want, 1e-12 * std::max(1.0, std::abs(want)));
    }
}

TEST(GradCheck, LinearWithAndWithoutBias) {
  Rng rng(5);
  expect_gradients_match([](const V& x) { return ops::linear(x[0], x[1], x[2]); },
                         {random_tensor({2, 3, 5}, rng), random_tensor({4, 5}, rng), random_tensor({4}, rng)}, rng);
  expect_gradients_match([](const V& x) { return ops::linear(x[0], x[1]); },
                         {random_tensor({7, 5}, rng), random_tensor({3, 5}, rng)}, rng);
}

TEST(GradCheck, View) {
  Rng rng(6);
  expect_gradients_match([](const V& x) { return ops::mul(ops::view(x[0], {3, 4}), x[1]); },
                         {random_tensor({2, 6}, rng), random_tensor({3, 4}, rng)}, rng);
}

// Overlapping row views of one weight (as a fused projection's parts are): each view's gradient
// accumulates into its rows; a row no view takes gets none.
TEST(GradCheck, RowsOfAWeight) {
  Rng rng(12);
  expect_gradients_match([](const V& x) { return ops::add(ops::rows(x[0], 0, 2), ops::rows(x[0], 1, 2)); },
                         {random_tensor({4, 3}, rng)}, rng);
  expect_gradients_match([](const V& x) { return ops::mul(ops::rows(x[0], 2, 3), x[1]); },
                         {random_tensor({6}, rng), random_tensor({3}, rng)}, rng);
}

TEST(GradCheck, RMSNorm) {
  Rng rng(7);
  expect_gradients_match([](const V& x) { return ops::rmsnorm(x[0], x[1], 1e-5); },
                         {random_tensor({2, 3, 8}, rng), random_tensor({8}, rng, 0.5, 1.5)}, rng);
}

// Mamba2's gated norm: each of the G runs of D/G values normalized on its own, one weight over all D.
TEST(GradCheck, RMSNormInGroups) {
  Rng rng(17);
  expect_gradients_match([](const V& x) { return ops::rmsnorm(x[0], x[1], 1e-5, 3); },
                         {random_tensor({2, 3, 12}, rng), random_tensor({12}, rng, 0.5, 1.5)}, rng);
  // The value, against the group norm written out: y = x_g / sqrt(mean(x_g^2) + eps) * w, with the
  // groups' scales far apart (a norm over the whole row would make the small group's values tiny).
  const int64_t N = 5, D = 12, G = 3, Dg = D / G;
  const double eps = 1e-5;
  Tensor x = random_tensor({N, D}, rng), w = random_tensor({D}, rng, 0.5, 1.5);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < Dg; ++j) x.data<double>()[i * D + j] *= 100;
  const Tensor y = ops::rmsnorm(Variable(x), Variable(w), eps, G).value();
  Tensor want = Tensor::zeros({N, D}, DType::f64);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t g = 0; g < G; ++g) {
      const double* xg = x.data<double>() + i * D + g * Dg;
      double ss = 0;
      for (int64_t j = 0; j < Dg; ++j) ss += xg[j] * xg[j];
      for (int64_t j = 0; j < Dg; ++j)
        want.data<double>()[i * D + g * Dg + j] =
            xg[j] / std::sqrt(ss / double(Dg) + eps) * w.data<double>()[g * Dg + j];
    }
  EXPECT_CLOSE(y, want, 1e-14);  // float64 rounding of the same sums
  EXPECT_THROW(ops::rmsnorm(Variable(x), Variable(w), eps, 5), Error);  // 5 groups do not split 12
}

// The residual sum and its norm as one node: both outputs carry gradients, and in a chain of two
// (a residual stream through two blocks) the sum's gradient is passed on and added to.
TEST(GradCheck, AddRMSNorm) {
  Rng rng(18);
  expect_gradients_match(
      [](const V& x) {
        const auto [s, y] = ops::add_rmsnorm(x[0], x[1], x[2], 1e-5);
        return ops::mul(s, y);
      },
      {random_tensor({2, 3, 8}, rng), random_tensor({2, 3, 8}, rng), random_tensor({8}, rng, 0.5, 1.5)}, rng);
  expect_gradients_match(
      [](const V& x) {
        const auto [r1, n1] = ops::add_rmsnorm(x[0], x[1], x[2], 1e-5);
        const auto [r2, n2] = ops::add_rmsnorm(r1, ops::mul(n1, x[3]), x[2], 1e-5);
        return ops::add(r2, ops::mul(n2, x[3]));
      },
      {random_tensor({4, 6}, rng), random_tensor({4, 6}, rng), random_tensor({6}, rng, 0.5, 1.5),
       random_tensor({4, 6}, rng)},
      rng);
}

// The swish-gated norm of the heads' outputs and the output projection as one node: x [2, 3, 2, 4]
// (two heads of 4) against gate [2, 3, 8] and the weight [5, 8].
TEST(GradCheck, RMSNormGateLinear) {
  Rng rng(19);
  expect_gradients_match([](const V& x) { return ops::rmsnorm_gate_linear(x[0], x[1], x[2], 1e-5, x[3]); },
                         {random_tensor({2, 3, 8}, rng, -2, 2), random_tensor({2, 3, 2, 4}, rng),
                          random_tensor({4}, rng, 0.5, 1.5), random_tensor({5, 8}, rng)},
                         rng);
}

TEST(GradCheck, L2Norm) {
  Rng rng(8);
  expect_gradients_match([](const V& x) { return ops::l2norm(x[0], 1e-6); }, {random_tensor({6, 5}, rng)}, rng);
}

TEST(GradCheck, Embedding) {
  Rng rng(9);
  Tensor ids = Tensor::empty({2, 5}, DType::i32);
  const int32_t values[] = {0, 3, 3, 1, 4, 4, 4, 2, 0, 3};  // repeats: gradients must add up
  std::copy(values, values + 10, ids.data<int32_t>());
  expect_gradients_match([ids](const V& x) { return ops::embedding(ids, x[0]); }, {random_tensor({5, 3}, rng)}, rng);
}

TEST(GradCheck, ShortConvolution) {
  Rng rng(10);
  expect_gradients_match([](const V& x) { return ops::short_conv(x[0], x[1], x[2]); },
                         {random_tensor({2, 9, 3}, rng), random_tensor({3, 4}, rng), random_tensor({3}, rng)}, rng);
  // fewer steps than taps
  expect_gradients_match([](const V& x) { return ops::short_conv(x[0], x[1]); },
                         {random_tensor({1, 2, 3}, rng), random_tensor({3, 4}, rng)}, rng);
}

TEST(GradCheck, CrossEntropyWithIgnoredRows) {
  Rng rng(11);
  Tensor targets = Tensor::empty({2, 3}, DType::i32);
  const int32_t values[] = {1, -100, 4, 0, 6, -100};
  std::copy(values, values + 6, targets.data<int32_t>());
  expect_gradients_match([targets](const V& x) { return ops::cross_entropy(x[0], targets); },
                         {random_tensor({2, 3, 7}, rng, -2, 2)}, rng);
}

TEST(GradCheck, ChainOfOpsLikeAnMLPBlock) {
  // rmsnorm -> gate/up projections -> swiglu -> down projection -> residual add -> loss
  Rng rng(12);
  Tensor targets = Tensor::empty({4}, DType::i32);
  const int32_t values[] = {0, 2, 1, 2};
  std::copy(values, values + 4, targets.data<int32_t>());
  expect_gradients_match(
      [targets](const V& p) {
        Variable h = ops::rmsnorm(p[0], p[1], 1e-6);
        Variable mlp = ops::linear(ops::swiglu(ops::linear(h, p[2]), ops::linear(h, p[3])), p[4]);
        return ops::cross_entropy(ops::add(p[0], mlp), targets);
      },
      {random_tensor({4, 3}, rng), random_tensor({3}, rng, 0.5, 1.5), random_tensor({5, 3}, rng),
       random_tensor({5, 3}, rng), random_tensor({3, 5}, rng)},
      rng);
}

// The check has teeth: a backward that is off by 1% in one entry fails it.
TEST(GradCheck, PerturbedGradientFails) {
  Rng rng(13);
  auto grads = testing::tape_and_numeric_gradients([](const V& x) { return ops::rmsnorm(x[0], x[1], 1e-5); },
                                                   {random_tensor({3, 4}, rng), random_tensor({4}, rng, 0.5, 1.5)},
                                                   rng);
  Tensor wrong = grads[0].first.clone();
  double* g = wrong.data<double>();
  g[5] += 0.01 * testing::max_abs(wrong);
  EXPECT_LE(testing::compare(grads[0].first, grads[0].second).relative, testing::kGradTolerance);
  EXPECT_GT(testing::compare(wrong, grads[0].second).relative, testing::kGradTolerance);
}

// The float32 instantiations compute the same function as the float64 ones.
TEST(Float32, MatchesFloat64) {
  Rng rng(14);
  Tensor x = random_tensor({4, 6}, rng), w = random_tensor({6}, rng, 0.5, 1.5), m = random_tensor({5, 6}, rng);
  auto run = [&](DType t) {
    Variable h = ops::rmsnorm(Variable(x.to(t)), Variable(w.to(t)), 1e-6);
    return ops::silu(ops::linear(h, Variable(m.to(t)))).value();
  };
  EXPECT_CLOSE(run(DType::f32), run(DType::f64), 1e-5);  // float32 rounding, ~1e-7 per op, a few ops deep
}

}  // namespace
}  // namespace linattn
