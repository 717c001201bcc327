// AdamW against a plain scalar reference written here from the algorithm (Loshchilov & Hutter's
// decoupled weight decay, with Adam's bias correction), which parameters a model decays, and the
// gradient norm and scaling that clipping uses. Everything runs in float64; the reference repeats
// the optimizer's few operations per step in a different order, so 1e-14 relative covers the rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "layers/mixer.h"
#include "core/rng.h"
#include "layers/model.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace linattn {
namespace {

constexpr double kTol = 1e-14;

TrainConfig adamw_config(double weight_decay) {
  TrainConfig c;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.adam_eps = 1e-8;
  c.weight_decay = weight_decay;
  return c;
}

// Two parameters: "w" (3 entries) is decayed, "b" (2 entries) is not.
struct TwoParams {
  Parameters p;
  int w, b;
  TwoParams(std::vector<double> w0, std::vector<double> b0) {
    w = p.add("w", {3}, Init::Constant(0), /*weight_decay=*/true);
    b = p.add("b", {2}, Init::Constant(0), /*weight_decay=*/false);
    p.allocate(DType::f64);
    set(p[w].value(), w0);
    set(p[b].value(), b0);
  }
  static void set(const Tensor& t, const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  }
  double value(int id, int i) const { return p[id].value().data<double>()[i]; }
};

// One entry's AdamW state, updated as the algorithm states it.
struct Reference {
  double w, m = 0, v = 0;
  void step(int t, double g, double lr, double wd, const TrainConfig& c) {
    m = c.beta1 * m + (1 - c.beta1) * g;
    v = c.beta2 * v + (1 - c.beta2) * g * g;
    const double m_hat = m / (1 - std::pow(c.beta1, t)), v_hat = v / (1 - std::pow(c.beta2, t));
    w = w - lr * (m_hat / (std::sqrt(v_hat) + c.adam_eps) + wd * w);  // decay on the weight, not through m/v
  }
};

TEST(AdamW, ThreeStepsMatchTheReference) {
  const TrainConfig c = adamw_config(0.1);
  TwoParams tp({1.0, -0.5, 0.25}, {0.75, -2.0});
  AdamW opt(tp.p, c);
  // Gradients that change sign and size between steps, and a learning rate that changes too.
  const double lrs[3] = {0.1, 0.05, 0.02};
  const std::vector<double> gw[3] = {{0.5, -0.1, 0.0}, {-0.3, 0.2, 1e-3}, {0.4, 0.0, -2.0}};
  const std::vector<double> gb[3] = {{0.2, -1.0}, {0.1, 3.0}, {-0.6, 0.5}};
  std::vector<Reference> rw = {{1.0}, {-0.5}, {0.25}}, rb = {{0.75}, {-2.0}};
  for (int t = 1; t <= 3; ++t) {
    TwoParams::set(tp.p[tp.w].grad(), gw[t - 1]);
    TwoParams::set(tp.p[tp.b].grad(), gb[t - 1]);
    opt.step(lrs[t - 1]);
    for (int i = 0; i < 3; ++i) {
      rw[size_t(i)].step(t, gw[t - 1][size_t(i)], lrs[t - 1], c.weight_decay, c);
      EXPECT_NEAR(tp.value(tp.w, i), rw[size_t(i)].w, kTol * std::abs(rw[size_t(i)].w)) << "w[" << i << "], step " << t;
    }
    for (int i = 0; i < 2; ++i) {
      rb[size_t(i)].step(t, gb[t - 1][size_t(i)], lrs[t - 1], /*wd=*/0, c);
      EXPECT_NEAR(tp.value(tp.b, i), rb[size_t(i)].w, kTol * std::abs(rb[size_t(i)].w)) << "b[" << i << "], step " << t;
    }
    if (t == 1) {
      // By hand: bias correction makes step 1 a unit step, g / (|g| + eps) = 0.5 / 0.50000001 =
      // 0.99999998, so w0 = 1 - 0.1 * 0.99999998 - 0.1 * 0.1 * 1 = 0.890000002 (decayed) and
      // b0 = 0.75 - 0.1 * (0.2 / 0.20000001) = 0.65000000500000003 (not decayed).
      EXPECT_NEAR(tp.value(tp.w, 0), 0.890000002, 1e-15);
      EXPECT_NEAR(tp.value(tp.b, 0), 0.75 - 0.1 * (0.2 / 0.20000001), 1e-15);
    }
  }
  EXPECT_EQ(opt.steps(), 3);
}

TEST(AdamW, WeightDecayIsDecoupledFromTheGradient) {
  // With zero gradients Adam's update is zero, so a decayed weight shrinks by exactly (1 - lr * wd)
  // a step. Decay folded into the gradient (L2, Adam's coupled form) would instead move it by about
  // lr a step, whatever its size, since Adam normalizes the gradient.
  const TrainConfig c = adamw_config(0.1);
  TwoParams tp({2.0, -4.0, 0.5}, {3.0, -1.0});
  AdamW opt(tp.p, c);
  double expected_w[3] = {2.0, -4.0, 0.5};
  for (double lr : {0.1, 0.5, 0.01}) {
    opt.step(lr);  // the gradients are zero from allocate()
    for (int i = 0; i < 3; ++i) {
      expected_w[i] *= 1 - lr * c.weight_decay;
      EXPECT_NEAR(tp.value(tp.w, i), expected_w[i], kTol * std::abs(expected_w[i])) << "w[" << i << "], lr " << lr;
    }
    EXPECT_EQ(tp.value(tp.b, 0), 3.0) << "a parameter declared without weight decay was decayed";
    EXPECT_EQ(tp.value(tp.b, 1), -1.0) << "a parameter declared without weight decay was decayed";
  }
}

TEST(AdamW, ModelDecaysMatricesAndEmbeddingsOnly) {
  // README: weight decay applies to matrices and embeddings only: not norms, biases, gate biases,
  // convolutions. Every mixer of the registry is built once so each of their parameters is checked.
  std::string layers;
  for (const std::string& name : mixer_names()) layers += (layers.empty() ? "" : ", ") + name;
  Config config = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 16
  num_hidden_layers: )" + std::to_string(mixer_names().size()) + R"(
  num_heads: 2
  layers: [)" + layers + R"(]
train:
  max_steps: 1
)",
                               "decay.yaml");
  ASSERT_FALSE(config.model.tie_word_embeddings);
  Model model(config.model, DType::f32);
  const Parameters& p = model.params();
  int decayed = 0, norms = 0, biases = 0, convs = 0;
  bool embeddings = false, lm_head = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string& name = p.name(int(i));
    const bool is_conv = name.find("conv1d") != std::string::npos;
    const bool is_norm = name.find("norm") != std::string::npos;
    // ".bias", and Gated DeltaNet's dt_bias (fla's decay; A_log is a 1-dim parameter too, not decayed).
    const bool is_bias = name.size() > 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    const bool is_matrix = p[int(i)].value().ndim() == 2 && !is_conv;
    EXPECT_EQ(p.weight_decay(int(i)), is_matrix) << name;
    EXPECT_FALSE(is_matrix && (is_norm || is_bias)) << name << ": a norm or bias that is a matrix?";
    decayed += p.weight_decay(int(i));
    norms += is_norm;
    biases += is_bias;
    convs += is_conv;
    embeddings |= name == "model.embeddings.weight" && p.weight_decay(int(i));
    lm_head |= name == "lm_head.weight" && p.weight_decay(int(i));
  }
  // The model has each kind of parameter, so the checks above are not vacuous.
  EXPECT_GE(norms, 13);  // two per block, the final norm, the GLA/RetNet/DeltaNet output norms
  EXPECT_GE(biases, 2);  // GLA's gate bias, Gated DeltaNet's a_proj bias
  EXPECT_GE(convs, 6);   // q, k, v short convolutions of the two DeltaNets
  EXPECT_TRUE(embeddings);
  EXPECT_TRUE(lm_head);
  EXPECT_GT(decayed, 6 * 4);
}

TEST(Clipping, GradNormAndScale) {
  TwoParams tp({0, 0, 0}, {0, 0});
  TwoParams::set(tp.p[tp.w].grad(), {3.0, 0.0, -4.0});
  TwoParams::set(tp.p[tp.b].grad(), {0.0, 12.0});
  EXPECT_NEAR(grad_norm(tp.p), 13.0, 1e-15 * 13);  // over every parameter: sqrt(9 + 16 + 144)
  scale_grads(tp.p, 0.5);
  EXPECT_EQ(tp.p[tp.w].grad().data<double>()[2], -2.0);
  EXPECT_EQ(tp.p[tp.b].grad().data<double>()[1], 6.0);
  EXPECT_NEAR(grad_norm(tp.p), 6.5, 1e-15 * 6.5);
}

TEST(StepControl, NormClipFactorAndSkipFlag) {
  TwoParams tp({0, 0, 0}, {0, 0});
  TwoParams::set(tp.p[tp.w].grad(), {3.0, 0.0, -4.0});
  TwoParams::set(tp.p[tp.b].grad(), {0.0, 12.0});
  Tensor control = make_step_control(Device::cpu);
  const double* c = control.data<double>();
  Tensor losses = Tensor::empty({2}, DType::f64);
  losses.data<double>()[0] = 1.5, losses.data<double>()[1] = 2.0;
  set_step_loss(control, losses);
  EXPECT_EQ(c[step_control::loss], 1.5 / 2 + 2.0 / 2);
  EXPECT_EQ(c[step_control::bad], 0.0);
  set_step_control(control, tp.p, 6.5);  // the norm is 13: clipping halves the gradients
  EXPECT_EQ(c[step_control::sum_squares], 169.0);
  EXPECT_EQ(c[step_control::norm], 13.0);
  EXPECT_EQ(c[step_control::clip], 0.5);
  EXPECT_EQ(c[step_control::skip], 0.0);
  set_step_control(control, tp.p, 13.0);  // at the bound: no clipping
  EXPECT_EQ(c[step_control::clip], 1.0);
  set_step_control(control, tp.p, 0.0);  // no bound
  EXPECT_EQ(c[step_control::clip], 1.0);
  // A non-finite loss, or a non-finite gradient, skips the step.
  losses.data<double>()[1] = INFINITY;
  set_step_loss(control, losses);
  EXPECT_EQ(c[step_control::bad], 1.0);
  set_step_control(control, tp.p, 0.0);
  EXPECT_EQ(c[step_control::skip], 1.0);
  losses.data<double>()[1] = 2.0;
  set_step_loss(control, losses);
  tp.p[tp.b].grad().data<double>()[0] = NAN;
  set_step_control(control, tp.p, 0.0);
  EXPECT_EQ(c[step_control::skip], 1.0);
}

// The one-pass update with the clip factor read from the control numbers gives, bit for bit, what the
// per-parameter loop after an in-place clip gave before it (the loop below is that code, on float32
// as training runs it, compiled with the same flags); and a skipped step changes nothing.
TEST(AdamW, OnePassEqualsTheClipThenPerParameterLoopBitForBit) {
  Parameters p;
  p.add("a.weight", {37, 129}, Init::Normal(0.02), true);
  p.add("a.bias", {5}, Init::Constant(0.5), false);
  p.add("b.weight", {70001}, Init::Uniform(0.1), true);  // more than the 2^15 that go parallel
  p.add("c.weight", {33}, Init::Uniform(0.1), true);      // a decayed neighbour: one range with b
  p.add("norm.weight", {19}, Init::Constant(1.0), false);
  p.allocate(DType::f32);
  p.initialize(5);
  const TrainConfig c = adamw_config(0.1);
  AdamW opt(p, c);
  const int64_t n = p.layout().total();
  const float* w0 = p.values().all().data<float>();
  std::vector<float> w(w0, w0 + n), m(size_t(n), 0.0f), v(size_t(n), 0.0f);
  Tensor control = make_step_control(Device::cpu);
  Rng rng(9);
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < p.size(); ++i) rng.fill_uniform(p[int(i)].grad(), -1, 1);  // the padding stays 0
    const double lr = 0.01 * t;
    set_step_control(control, p, t == 2 ? 1e9 : 1.0);  // step 2 does not clip
    const double scale = control.data<double>()[step_control::clip];
    ASSERT_EQ(scale == 1.0, t == 2);
    opt.step(lr, control);
    // before: the gradients scaled in place (scale_grads), then AdamW parameter by parameter
    std::vector<float> g(p.grads().all().data<float>(), p.grads().all().data<float>() + n);
    if (scale != 1.0)
      for (float& x : g) x *= float(scale);
    const float b1 = float(c.beta1), b2 = float(c.beta2), eps = float(c.adam_eps);
    const float step_size = float(lr / (1.0 - std::pow(c.beta1, double(t))));
    const float rbc2 = float(1.0 / (1.0 - std::pow(c.beta2, double(t))));
    for (size_t i = 0; i < p.size(); ++i) {
      const int64_t begin = p.layout().entries()[i].offset, end = begin + p[int(i)].value().numel();
      const float decay = float(p.weight_decay(int(i)) ? lr * c.weight_decay : 0.0);
      for (int64_t j = begin; j < end; ++j) {
        m[size_t(j)] = b1 * m[size_t(j)] + (1.0f - b1) * g[size_t(j)];
        v[size_t(j)] = b2 * v[size_t(j)] + (1.0f - b2) * g[size_t(j)] * g[size_t(j)];
        w[size_t(j)] -= step_size * m[size_t(j)] / (std::sqrt(v[size_t(j)] * rbc2) + eps) + decay * w[size_t(j)];
      }
    }
    EXPECT_EQ(std::memcmp(w.data(), p.values().all().data<float>(), size_t(n) * sizeof(float)), 0) << "step " << t;
    EXPECT_EQ(std::memcmp(m.data(), opt.m().all().data<float>(), size_t(n) * sizeof(float)), 0) << "step " << t;
    EXPECT_EQ(std::memcmp(v.data(), opt.v().all().data<float>(), size_t(n) * sizeof(float)), 0) << "step " << t;
  }
  EXPECT_EQ(opt.steps(), 3);
  // A skipped step: nothing moves, and it does not count once the trainer says so.
  control.data<double>()[step_control::skip] = 1.0;
  opt.step(0.01, control);
  EXPECT_EQ(std::memcmp(w.data(), p.values().all().data<float>(), size_t(n) * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m.data(), opt.m().all().data<float>(), size_t(n) * sizeof(float)), 0);
  opt.skipped();
  EXPECT_EQ(opt.steps(), 3);
}

}  // namespace
}  // namespace linattn
