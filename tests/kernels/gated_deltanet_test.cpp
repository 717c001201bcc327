// Gated DeltaNet kernels: chunkwise against recurrent, both backward passes (including the gradient
// of the log-decay a, derived in kernels/cpu/deltanet.cpp) against finite differences.
#include "deltanet_cases.h"

namespace linattn {
namespace {

using namespace deltanet_testing;

constexpr bool kGated = true;

TEST(GatedDeltaNet, ChunkMatchesRecurrent) {
  Rng rng(21);
  WorstError worst;
  for (int64_t T_ : {1, 63, 64, 100, 1000}) {
    Inputs<double> in = make_inputs(rng, 2, T_, 2, 8, 6, kGated);
    for (int64_t C : {16, 32, 64}) expect_chunk_matches_recurrent(in, C, worst);
  }
  worst.print("chunk vs recurrent");
}

TEST(GatedDeltaNet, ChunkMatchesRecurrentWithoutStates) {
  Rng rng(22);
  Inputs<double> in = make_inputs(rng, 2, 100, 2, 8, 6, kGated, /*with_states=*/false);
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
  Inputs<double> in = make_inputs(rng, 2, 200, 2, 8, 6, kGated, true, -30.0, -5.0);
  WorstError worst;
  for (int64_t C : {16, 64}) expect_chunk_matches_recurrent(in, C, worst);
  worst.print("chunk vs recurrent, strong decay");
  Inputs<float> in32 = to_float(in);
  Outputs out = forward(in32, Form::chunk, 64);
  Grads g = backward(in32, Form::chunk, 64);
  for (const Tensor* t : {&out.o, &out.ht, &g.dq, &g.dk, &g.dv, &g.dbeta, &g.da, &g.dh0})
    for (int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->data<float>()[i])) << t->str() << " at " << i;
}

TEST(GatedDeltaNet, OddChunkSizes) {
  // Chunk sizes that are not multiples of the 16-column blocks of the triangular inverse.
  Rng rng(29);
  Inputs<double> in = make_inputs(rng, 1, 45, 2, 8, 6, kGated);
  WorstError worst;
  for (int64_t C : {1, 5, 20}) expect_chunk_matches_recurrent(in, C, worst);
  worst.print("chunk vs recurrent, chunk sizes 1, 5, 20");
}

TEST(GatedDeltaNet, RecurrentBackwardMatchesFiniteDifferences) {
  Rng rng(24);
  Inputs<double> in = make_inputs(rng, 2, 70, 2, 8, 6, kGated);  // 70 > 64: crosses a state checkpoint
  expect_matches_finite_differences(in, Form::recurrent, 0);
}

TEST(GatedDeltaNet, ChunkBackwardMatchesFiniteDifferences) {
  Rng rng(25);
  Inputs<double> in = make_inputs(rng, 2, 37, 2, 8, 6, kGated);  // chunks of 16, 16 and 5 tokens
  expect_matches_finite_differences(in, Form::chunk, 16);
}

TEST(GatedDeltaNet, PerturbedGradientFailsTheCheck) {
  // A gradient of the log-decay that is wrong in one entry by 1e-5 of its largest entry must fail.
  SingleThread one;
  Rng rng(26);
  Inputs<double> in = make_inputs(rng, 1, 20, 2, 8, 6, kGated);
  Grads g = backward(in, Form::chunk, 16);
  Tensor want = testing::finite_difference([&] { return loss(in, Form::chunk, 16); }, in.a);
  EXPECT_LE(testing::compare(g.da, want).relative, 1e-6);
  g.da.data<double>()[7] += 1e-5 * testing::max_abs(want);
  EXPECT_GT(testing::compare(g.da, want).relative, 1e-6);
}

TEST(GatedDeltaNet, GradientsAccumulate) {
  Rng rng(27);
  Inputs<double> in = make_inputs(rng, 2, 40, 2, 8, 6, kGated);
  for (Form form : {Form::recurrent, Form::chunk}) {
    Grads once = backward(in, form, 16), twice;
    backward(in, form, twice, 16);
    backward(in, form, twice, 16);
    for (Tensor* t : {&once.dq, &once.dk, &once.dv, &once.dbeta, &once.da, &once.dh0})
      for (int64_t i = 0; i < t->numel(); ++i) t->data<double>()[i] *= 2;
    EXPECT_CLOSE(twice.dq, once.dq, 1e-15);
    EXPECT_CLOSE(twice.dk, once.dk, 1e-15);
    EXPECT_CLOSE(twice.dv, once.dv, 1e-15);
    EXPECT_CLOSE(twice.dbeta, once.dbeta, 1e-15);
    EXPECT_CLOSE(twice.da, once.da, 1e-15);
    EXPECT_CLOSE(twice.dh0, once.dh0, 1e-15);
  }
}

TEST(GatedDeltaNet, Float32ChunkMatchesFloat64Recurrent) {
  // As for DeltaNet: float32 chunk form against the float64 recurrence; observed ~5e-7, bar 2e-5.
  Rng rng(28);
  Inputs<double> in = make_inputs(rng, 2, 300, 2, 32, 32, kGated, true, -0.5, -0.01);
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
    worst.add(gg.da, gw.da, 2e-5);
    worst.add(gg.dh0, gw.dh0, 2e-5);
  }
  worst.print("float32 chunk vs float64 recurrent");
}

TEST(GatedDeltaNet, Float32AccurateOnCorrelatedKeysAndBetaNearOne) {
  expect_float32_accurate_on_correlated_keys(kGated, 32);
}

}  // namespace
}  // namespace linattn
