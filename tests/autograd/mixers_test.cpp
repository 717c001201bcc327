// The mixer ops on the tape: gradients of q, k, v, gates, beta and the initial state through one
// node, against float64 finite differences, with random upstream gradients on o and the final
// state; and the errors bad input gets.
#include "autograd/mixers.h"

#include "gradcheck.h"

namespace linattn {
namespace {

using testing::error_of;

using testing::random_tensor;
using V = std::vector<Variable>;
using MixerFn = std::function<ops::MixerOutput(const V&)>;

// Analytic gradients of <o, Ro> + <ht, Rh> through the tape against central differences.
void expect_mixer_gradients_match(const MixerFn& f, const std::vector<Tensor>& inputs, Rng& rng) {
  V vars;
  for (const Tensor& t : inputs) vars.emplace_back(t, true);
  ops::MixerOutput out = f(vars);
  Tensor ro = random_tensor(out.o.shape(), rng), rh = random_tensor(out.ht.shape(), rng);
  backward({out.o, out.ht}, {ro, rh});
  auto loss = [&] {
    NoGrad no_grad;
    V plain;
    for (const Tensor& t : inputs) plain.emplace_back(t, false);
    ops::MixerOutput o = f(plain);
    return testing::dot(o.o.value(), ro) + testing::dot(o.ht.value(), rh);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + " " + inputs[i].str());
    Tensor numeric = testing::finite_difference(loss, inputs[i]);
    EXPECT_GT(testing::max_abs(numeric), 0.0);
    EXPECT_CLOSE(vars[i].grad(), numeric, testing::kGradTolerance);
  }
}

constexpr int64_t B = 1, T = 11, H = 2, DK = 4, DV = 3;

Tensor unit_rows(Tensor t) {  // L2-normalize along the last dim, as the DeltaNet layer does
  double* p = t.data<double>();
  int64_t d = t.shape().last();
  for (int64_t r = 0; r < t.numel() / d; ++r) {
    double n = 0;
    for (int64_t j = 0; j < d; ++j) n += p[r * d + j] * p[r * d + j];
    for (int64_t j = 0; j < d; ++j) p[r * d + j] /= std::sqrt(n);
  }
  return t;
}

TEST(MixerOps, LinearAttentionBothForms) {
  for (ops::MixerForm form : {ops::MixerForm::chunk, ops::MixerForm::recurrent}) {
    Rng rng(1);
    ops::MixerOptions opt;
    opt.form = form;
    opt.chunk_size = 4;
    expect_mixer_gradients_match(
        [opt](const V& x) { return ops::linear_attention(x[0], x[1], x[2], x[3], FeatureMap::elu1, false, opt); },
        {random_tensor({B, T, H, DK}, rng), random_tensor({B, T, H, DK}, rng), random_tensor({B, T, H, DV}, rng),
         random_tensor({B, H, DK, DV}, rng)},
        rng);
  }
}

TEST(MixerOps, GLABothFormsAndRetNetGate) {
  for (ops::MixerForm form : {ops::MixerForm::chunk, ops::MixerForm::recurrent}) {
    Rng rng(6);
    ops::MixerOptions opt;
    opt.form = form;
    opt.chunk_size = 4;
    expect_mixer_gradients_match([opt](const V& x) { return ops::gla(x[0], x[1], x[2], x[3], x[4], opt); },
                                 {random_tensor({B, T, H, DK}, rng), random_tensor({B, T, H, DK}, rng),
                                  random_tensor({B, T, H, DV}, rng), random_tensor({B, T, H, DK}, rng, -2.0, -0.01),
                                  random_tensor({B, H, DK, DV}, rng)},
                                 rng);
  }
}

TEST(MixerOps, DeltaNetBothForms) {
  for (ops::MixerForm form : {ops::MixerForm::chunk, ops::MixerForm::recurrent}) {
    Rng rng(2);
    ops::MixerOptions opt;
    opt.form = form;
    opt.chunk_size = 4;
    expect_mixer_gradients_match([opt](const V& x) { return ops::deltanet(x[0], x[1], x[2], x[3], x[4], opt); },
                                 {random_tensor({B, T, H, DK}, rng), unit_rows(random_tensor({B, T, H, DK}, rng)),
                                  random_tensor({B, T, H, DV}, rng), random_tensor({B, T, H}, rng, 0.1, 0.9),
                                  random_tensor({B, H, DK, DV}, rng)},
                                 rng);
  }
}

TEST(MixerOps, GatedDeltaNet) {
  Rng rng(3);
  ops::MixerOptions opt;
  opt.chunk_size = 4;
  expect_mixer_gradients_match(
      [opt](const V& x) { return ops::gated_deltanet(x[0], x[1], x[2], x[3], x[4], x[5], opt); },
      {random_tensor({B, T, H, DK}, rng), unit_rows(random_tensor({B, T, H, DK}, rng)), random_tensor({B, T, H, DV}, rng),
       random_tensor({B, T, H}, rng, 0.1, 0.9), random_tensor({B, T, H}, rng, -1.0, -0.01),
       random_tensor({B, H, DK, DV}, rng)},
      rng);
}

TEST(MixerOps, AttentionWithRopeAndGroupedHeads) {
  Rng rng(4);
  for (int64_t window : {0, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    testing::expect_gradients_match(
        [window](const V& x) { return ops::attention(ops::rope(x[0]), ops::rope(x[1]), x[2], window); },
        {random_tensor({2, 9, 4, 4}, rng), random_tensor({2, 9, 2, 4}, rng), random_tensor({2, 9, 2, 3}, rng)}, rng);
  }
}

TEST(MixerOps, BadInputGetsAClearError) {
  Rng rng(5);
  Variable q(random_tensor({1, 4, 2, 4}, rng)), k(random_tensor({1, 4, 2, 4}, rng)), v(random_tensor({1, 4, 2, 3}, rng));
  std::string msg = error_of([&] { ops::gla(q, k, v, Variable(random_tensor({1, 4, 2, 4}, rng, 0.1, 1.0)), {}); });
  EXPECT_NE(msg.find("g must be"), std::string::npos) << msg;
  msg = error_of([&] { ops::deltanet(q, k, v, Variable(random_tensor({1, 4, 2}, rng, 1.5, 2.0)), {}); });
  EXPECT_NE(msg.find("beta"), std::string::npos) << msg;
  msg = error_of([&] { ops::deltanet(q, k, v, Variable(random_tensor({1, 4, 3}, rng, 0.1, 0.9)), {}); });
  EXPECT_NE(msg.find("[1, 4, 3]"), std::string::npos) << msg;
  Tensor nan_q = q.value().clone();
  nan_q.data<double>()[5] = NAN;
  msg = error_of([&] { ops::linear_attention(Variable(nan_q), k, v, {}, FeatureMap::identity, false); });
  EXPECT_NE(msg.find("flat index 5"), std::string::npos) << msg;
  nan_q.data<double>()[5] = -INFINITY;
  msg = error_of([&] { ops::deltanet(Variable(nan_q), k, v, Variable(random_tensor({1, 4, 2}, rng, 0.1, 0.9)), {}); });
  EXPECT_NE(msg.find("has the value -inf at flat index 5"), std::string::npos) << msg;
  msg = error_of([&] {
    ops::attention(q, Variable(random_tensor({1, 4, 3, 4}, rng)), Variable(random_tensor({1, 4, 3, 3}, rng)), 0);
  });
  EXPECT_NE(msg.find("multiple"), std::string::npos) << msg;
  msg = error_of([&] { ops::attention(q, k, Variable(random_tensor({1, 4, 2, 3}, rng)), -2); });
  EXPECT_NE(msg.find("window_size -2"), std::string::npos) << msg;
  msg = error_of([&] { ops::linear_attention(q, k, Variable(random_tensor({1, 5, 2, 3}, rng)), {}, FeatureMap::identity, false); });
  EXPECT_NE(msg.find("v f64[1, 5, 2, 3]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace linattn
