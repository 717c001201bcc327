// DeltaNet and Gated DeltaNet kernels, one suite run for both (the parameter says whether the log-decay
// a is given): chunkwise against recurrent, both backward passes (including the gradient of a, derived
// in kernels/cpu/deltanet_stages.h) against finite differences. Each stage alone: deltanet_stages_test.cpp.
#include "deltanet_cases.h"

namespace linattn {
namespace {

using namespace deltanet_testing;

class DeltaNetKernels : public ::testing::TestWithParam<bool> {
 protected:
  bool gated() const { return GetParam(); }
  // Each variant draws its own inputs.
  uint64_t seed(uint64_t plain, uint64_t with_gate) const { return gated() ? with_gate : plain; }
  // Gated inputs with the default log-decays in [-1, -0.01].
  Inputs<double> inputs(Rng& rng, int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv,
                        bool with_states = true) const {
    return make_inputs(rng, B, T_, H, dk, dv, gated(), with_states);
  }
};

INSTANTIATE_TEST_SUITE_P(, DeltaNetKernels, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Gated" : "Plain"; });

TEST_P(DeltaNetKernels, ChunkMatchesRecurrent) {
  Rng rng(seed(11, 21));
  WorstError worst;
  for (int64_t T_ : {1, 63, 64, 100, 1000}) {
    Inputs<double> in = inputs(rng, 2, T_, 2, 8, 6);
    for (int64_t C : {16, 32, 64}) expect_chunk_matches_recurrent(in, C, worst);
  }
  worst.print("chunk vs recurrent");
}

TEST_P(DeltaNetKernels, ChunkMatchesRecurrentWithoutStates) {
  Rng rng(seed(12, 22));
  Inputs<double> in = inputs(rng, 2, 100, 2, 8, 6, /*with_states=*/false);
  WorstError worst;
  for (int64_t C : {16, 64}) expect_chunk_matches_recurrent(in, C, worst);
  worst.print("chunk vs recurrent, no states");
}

TEST(GatedDeltaNet, StrongDecayStaysFiniteAndMatches) {
  // Log-decays down to -30 per token: the cumulative gate falls to ~-1000 within a chunk of 64, so
  // any exp(-G) taken alone would overflow. The chunk form only takes exp of differences <= 0 and
  // must still agree with the recurrence. Some entries underflow to 0 in both forms; the comparison
  // is relative to the largest entry, so 1e-10 still applies.
  Rng rng(23);
  Inputs<double> in = make_inputs(rng, 2, 200, 2, 8, 6, /*gated=*/true, true, -30.0, -5.0);
  WorstError worst;
  for (int64_t C : {16, 64}) expect_chunk_matches_recurrent(in, C, worst);
  worst.print("chunk vs recurrent, strong decay");
  Inputs<float> in32 = to_float(in);
  Outputs out = forward(in32, Form::chunk, 64);
  Grads g = backward(in32, Form::chunk, 64);
  for (const Tensor* t : {&out.o, &out.ht, &g.dq, &g.dk, &g.dv, &g.dbeta, &g.da, &g.dh0})
    for (int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->data<float>()[i])) << t->str() << " at " << i;
}

TEST_P(DeltaNetKernels, OddChunkSizes) {
  // Chunk sizes that are not multiples of the 16-column blocks of the triangular inverse.
  Rng rng(seed(19, 29));
  Inputs<double> in = inputs(rng, 1, 45, 2, 8, 6);
  WorstError worst;
  for (int64_t C : {1, 5, 20}) expect_chunk_matches_recurrent(in, C, worst);
  worst.print("chunk vs recurrent, chunk sizes 1, 5, 20");
}

TEST_P(DeltaNetKernels, RecurrentBackwardMatchesFiniteDifferences) {
  Rng rng(seed(13, 24));
  Inputs<double> in = inputs(rng, 2, 70, 2, 8, 6);  // 70 > 64: crosses a state checkpoint
  expect_matches_finite_differences(in, Form::recurrent, 0);
}

TEST_P(DeltaNetKernels, ChunkBackwardMatchesFiniteDifferences) {
  Rng rng(seed(14, 25));
  Inputs<double> in = inputs(rng, 2, 37, 2, 8, 6);  // chunks of 16, 16 and 5 tokens
  expect_matches_finite_differences(in, Form::chunk, 16);
}

TEST_P(DeltaNetKernels, PerturbedGradientFailsTheCheck) {
  // The finite-difference check must notice a gradient that is wrong in one entry by 1e-5 of its
  // largest entry: the unperturbed gradient passes at 1e-6, the perturbed one does not. Checked on
  // dk without the gate and on the gradient of the log-decay with it.
  SingleThread one;
  Rng rng(seed(15, 26));
  Inputs<double> in = inputs(rng, 1, 20, 2, 8, 6);
  Grads g = backward(in, Form::chunk, 16);
  Tensor& got = gated() ? g.da : g.dk;
  Tensor want = testing::finite_difference([&] { return loss(in, Form::chunk, 16); }, gated() ? in.a : in.k);
  EXPECT_LE(testing::compare(got, want).relative, 1e-6);
  got.data<double>()[gated() ? 7 : 17] += 1e-5 * testing::max_abs(want);
  EXPECT_GT(testing::compare(got, want).relative, 1e-6);
}

TEST_P(DeltaNetKernels, GradientsAccumulate) {
  Rng rng(seed(16, 27));
  Inputs<double> in = inputs(rng, 2, 40, 2, 8, 6);
  for (Form form : {Form::recurrent, Form::chunk}) {
    Grads once = backward(in, form, 16), twice;
    backward(in, form, twice, 16);
    backward(in, form, twice, 16);
    for (Tensor* t : {&once.dq, &once.dk, &once.dv, &once.dbeta, &once.da, &once.dh0})
      if (t->defined())
        for (int64_t i = 0; i < t->numel(); ++i) t->data<double>()[i] *= 2;
    EXPECT_CLOSE(twice.dq, once.dq, 1e-15);
    EXPECT_CLOSE(twice.dk, once.dk, 1e-15);
    EXPECT_CLOSE(twice.dv, once.dv, 1e-15);
    EXPECT_CLOSE(twice.dbeta, once.dbeta, 1e-15);
    if (gated()) EXPECT_CLOSE(twice.da, once.da, 1e-15);
    EXPECT_CLOSE(twice.dh0, once.dh0, 1e-15);
  }
}

TEST_P(DeltaNetKernels, ForwardWithoutSavedBufferAndTokenByTokenDecoding) {
  // The chunk forward without `saved` (inference) gives the same output, and decoding one token at
  // a time with the recurrent forward, passing the state along, gives the same as one call.
  Rng rng(seed(17, 30));
  Inputs<double> in = inputs(rng, 2, 50, 2, 8, 6);
  Outputs want = forward(in, Form::recurrent);
  Outputs chunked = forward(in, Form::chunk, 16);
  EXPECT_CLOSE(chunked.o, want.o, 1e-12);
  EXPECT_CLOSE(chunked.ht, want.ht, 1e-12);
  Tensor state = in.h0.clone(), o = Tensor::zeros(want.o.shape(), DType::f64);
  Inputs<double> step = in;
  for (int64_t t = 0; t < in.T_; ++t) {
    // one token of every tensor: [B, 1, H, D] slices copied out of [B, T, H, D]
    auto slice = [&](const Tensor& x, int64_t D) {
      Tensor y = Tensor::empty({in.B, 1, in.H, D}, DType::f64);
      for (int64_t b = 0; b < in.B; ++b)
        for (int64_t i = 0; i < in.H * D; ++i)
          y.data<double>()[b * in.H * D + i] = x.data<double>()[(b * in.T_ + t) * in.H * D + i];
      return y;
    };
    step.T_ = 1;
    step.q = slice(in.q, in.dk);
    step.k = slice(in.k, in.dk);
    step.v = slice(in.v, in.dv);
    step.beta = slice(in.beta, 1).view({in.B, 1, in.H});
    if (gated()) step.a = slice(in.a, 1).view({in.B, 1, in.H});
    step.h0 = state;
    Outputs out = forward(step, Form::recurrent);
    state = out.ht;
    for (int64_t b = 0; b < in.B; ++b)
      for (int64_t i = 0; i < in.H * in.dv; ++i)
        o.data<double>()[(b * in.T_ + t) * in.H * in.dv + i] = out.o.data<double>()[b * in.H * in.dv + i];
  }
  EXPECT_CLOSE(o, want.o, 1e-14);
  EXPECT_CLOSE(state, want.ht, 1e-14);
}

TEST_P(DeltaNetKernels, Float32ChunkMatchesFloat64Recurrent) {
  // The float32 build (oneDNN products, float32 states and inverse) against the float64 reference at
  // training-like head sizes. float32 rounding (6e-8) grows with the ~sqrt(T) state updates and the
  // 64-term products; observed ~5e-7 (~9e-7 gated), so 2e-5 leaves a 20x margin and still catches
  // real errors (~1e-2).
  Rng rng(seed(18, 28));
  Inputs<double> in = make_inputs(rng, 2, 300, 2, 32, 32, gated(), true, -0.5, -0.01);
  Inputs<float> in32 = to_float(in);
  Outputs want = forward(in, Form::recurrent);
  Grads gw = backward(in, Form::recurrent);
  WorstError worst;
  for (int64_t C : {32, 64}) {
    SCOPED_TRACE(::testing::Message() << "C=" << C);
    Outputs got = forward(in32, Form::chunk, C);
    worst.add(got.o, want.o, 2e-5);
    worst.add(got.ht, want.ht, 2e-5);
    Grads gg = backward(in32, Form::chunk, C);
    worst.add(gg.dq, gw.dq, 2e-5);
    worst.add(gg.dk, gw.dk, 2e-5);
    worst.add(gg.dv, gw.dv, 2e-5);
    worst.add(gg.dbeta, gw.dbeta, 2e-5);
    if (gated()) worst.add(gg.da, gw.da, 2e-5);
    worst.add(gg.dh0, gw.dh0, 2e-5);
  }
  worst.print("float32 chunk vs float64 recurrent");
}

TEST_P(DeltaNetKernels, Float32AccurateOnCorrelatedKeysAndBetaNearOne) {
  expect_float32_accurate_on_correlated_keys(gated(), seed(31, 32));
}

}  // namespace
}  // namespace linattn
