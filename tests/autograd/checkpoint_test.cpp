// Checkpointed regions (autograd/checkpoint.h): float64 gradients against finite differences,
// bit-identical to the region run directly, what the forward keeps in each mode (in bytes), the
// replay's tensors released when its node is done, and BackwardHooks seeing final gradients.
#include "autograd/checkpoint.h"

#include "autograd/ops.h"
#include "core/memory.h"
#include "gradcheck.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using ops::Recompute;

// A pre-norm residual region with what a block has: a norm, products (one with a bias), SwiGLU, a
// residual sum. x [2, 3, 4]; p: norm weight [4], W1 [5, 4], W2 [5, 4], b2 [5], W3 [4, 5].
Variable region(const Variable& x, const std::vector<Variable>& p) {
  Variable h = ops::rmsnorm(x, p[0], 1e-6);
  Variable a = ops::linear(h, p[1]), b = ops::linear(h, p[2], p[3]);
  return ops::add(x, ops::linear(ops::swiglu(a, b), p[4]));
}

const std::vector<Shape> kShapes = {{2, 3, 4}, {4}, {5, 4}, {5, 4}, {5}, {4, 5}};

std::vector<Tensor> random_inputs(DType dtype, uint64_t seed) {
  Rng rng(seed);
  std::vector<Tensor> t;
  for (const Shape& s : kShapes) t.push_back(testing::random_tensor(s, rng).to(dtype));
  return t;
}

// The region over vars (x first, then its parameters), checkpointed in `mode`.
Variable checkpointed(Recompute mode, const std::vector<Variable>& vars) {
  const std::vector<Variable> params(vars.begin() + 1, vars.end());
  return ops::checkpoint(mode, [params](const Variable& x) { return region(x, params); }, vars[0], params);
}

using testing::bitwise_difference;

class CheckpointModes : public ::testing::TestWithParam<Recompute> {};

TEST_P(CheckpointModes, GradientsMatchFiniteDifferences) {
  const Recompute mode = GetParam();
  Rng rng(11);
  testing::expect_gradients_match([mode](const std::vector<Variable>& v) { return checkpointed(mode, v); },
                                  random_inputs(DType::f64, 5), rng);
}

TEST_P(CheckpointModes, GradientsEqualTheRegionRunDirectlyBitForBit) {
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<Tensor> inputs = random_inputs(dtype, 6);
    Rng rng(12);
    const Tensor upstream = testing::random_tensor(kShapes[0], rng).to(dtype);
    std::vector<Tensor> grads[2];
    Tensor outputs[2];
    for (int run = 0; run < 2; ++run) {
      std::vector<Variable> vars;
      for (const Tensor& t : inputs) vars.emplace_back(t, true);
      Variable y = run == 0 ? checkpointed(Recompute::none, vars) : checkpointed(GetParam(), vars);
      outputs[run] = y.value().clone();
      backward({y}, {upstream});
      for (const Variable& v : vars) grads[run].push_back(v.grad());
    }
    EXPECT_EQ(bitwise_difference(outputs[1], outputs[0]), "") << "the output";
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(bitwise_difference(grads[1][i], grads[0][i]), "") << "input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CheckpointModes, ::testing::Values(Recompute::selective, Recompute::full),
                         [](const auto& info) { return std::string(ops::recompute_name(info.param)); });

// Bytes of f64 tensors of `elements` elements in all.
size_t f64_bytes(int64_t elements) { return size_t(elements) * sizeof(double); }

TEST(Checkpoint, TheForwardKeepsWhatTheModeSaysAndTheNodeReleasesTheReplay) {
  // Outside an arena every tensor has its own storage, freed with its last view: storage_bytes()
  // is then what the tape and the caller hold. Rows N = 6, model dim 4, inner dim 5.
  const int64_t N = 6, D = 4, I = 5;
  // Held after the forward, besides the inputs: the output y [N, D] (the caller's), and
  //   none:      h [N, D] and rstd [N] (rmsnorm), a, b [N, I] (the products), swiglu's [N, I], the
  //              last product [N, D] (held by the sum's node);
  //   selective: the products' outputs a, b [N, I] and [N, D], kept for the replay;
  //   full:      nothing more.
  const size_t held[] = {f64_bytes(N * D + N * D + N + 3 * N * I + N * D), f64_bytes(N * D + 2 * N * I + N * D),
                         f64_bytes(N * D)};
  for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(ops::recompute_name(mode));
    const std::vector<Tensor> inputs = random_inputs(DType::f64, 7);
    Tensor upstream = Tensor::empty(kShapes[0], DType::f64);
    upstream.fill_(1.0);
    std::vector<Variable> vars;
    for (const Tensor& t : inputs) vars.emplace_back(t, true);
    const size_t before = storage_bytes(Device::cpu);
    Variable y = checkpointed(mode, vars);
    EXPECT_EQ(storage_bytes(Device::cpu) - before, held[int(mode)]);
    if (mode == Recompute::none) {
      clear_tape();
      continue;
    }

    // The one node's backward: afterwards y and the gradients (y's, x's and the parameters') are all
    // that is left: the replay's tensors, its tape and what the first run kept are gone.
    size_t after_node = 0;
    BackwardHooks hooks;
    hooks.final_grad = [](size_t) {};
    hooks.after_node = [&] { after_node = storage_bytes(Device::cpu); };
    reset_storage_peak(Device::cpu);
    backward({y}, {upstream}, &hooks);
    ASSERT_EQ(tape_size(), 0u);
    size_t grads = y.grad().nbytes();
    for (const Variable& v : vars) grads += v.grad().nbytes();
    EXPECT_EQ(after_node - before, f64_bytes(N * D) + grads);
    // ... though the replay did make its tensors while it ran.
    EXPECT_GT(storage_peak_bytes(Device::cpu) - before, held[int(mode)] + grads + f64_bytes(N * I));
  }
}

TEST(Checkpoint, BackwardHooksSeeEachParameterFinalAfterTheNodeThatWritesIt) {
  // Two regions in a row with their own parameters, and a product after them: each parameter's
  // final_grad must come when nothing will write its gradient again (the data-parallel buckets sum
  // it then), also when the writes happen inside a replay.
  for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(ops::recompute_name(mode));
    Rng rng(13);
    std::vector<Variable> first, second;
    for (size_t i = 1; i < kShapes.size(); ++i) first.emplace_back(testing::random_tensor(kShapes[i], rng), true);
    for (size_t i = 1; i < kShapes.size(); ++i) second.emplace_back(testing::random_tensor(kShapes[i], rng), true);
    Variable head(testing::random_tensor({3, 4}, rng), true);
    Variable x(testing::random_tensor(kShapes[0], rng), false);
    auto run = [&](const std::vector<Variable>& p, const Variable& in) {
      return ops::checkpoint(mode, [p](const Variable& v) { return region(v, p); }, in, p);
    };
    Variable y = ops::linear(run(second, run(first, x)), head);

    BackwardHooks hooks;
    hooks.leaves = first;
    hooks.leaves.insert(hooks.leaves.end(), second.begin(), second.end());
    hooks.leaves.push_back(head);
    std::vector<Tensor> at_final(hooks.leaves.size());
    hooks.final_grad = [&](size_t i) {
      const Tensor& g = hooks.leaves[i].grad();
      at_final[i] = g.defined() ? g.clone() : Tensor();
    };
    Tensor upstream = testing::random_tensor(y.shape(), rng);
    backward({y}, {upstream}, &hooks);
    for (size_t i = 0; i < hooks.leaves.size(); ++i) {
      SCOPED_TRACE("leaf " + std::to_string(i));
      ASSERT_TRUE(at_final[i].defined()) << "final_grad came before any gradient was written";
      EXPECT_EQ(bitwise_difference(at_final[i], hooks.leaves[i].grad()), "") << "written after final_grad";
    }
  }
}

TEST(Checkpoint, AReplayThatMakesOtherOpsIsAnError) {
  // Selective recomputation hands the replay the products of the first run in order: a region that
  // makes fewer of them the second time would get the wrong ones.
  Rng rng(14);
  Variable w(testing::random_tensor({4, 4}, rng), true), x(testing::random_tensor({2, 4}, rng), true);
  int calls = 0;
  Variable y = ops::checkpoint(
      Recompute::selective,
      [&](const Variable& in) { return ++calls == 1 ? ops::linear(ops::linear(in, w), w) : ops::linear(in, w); }, x,
      {w});
  const std::string msg = testing::error_of([&] { backward({y}, {Tensor::zeros({2, 4}, DType::f64)}); });
  EXPECT_NE(msg.find("recompute: the replay of a checkpointed region used 1 of the 2 outputs its first run kept"),
            std::string::npos)
      << msg;
  EXPECT_EQ(tape_size(), 0u) << "the replay's tape is dropped with the error";
}

TEST(Checkpoint, NothingIsRecordedWithoutGradients) {
  Rng rng(15);
  std::vector<Variable> vars;
  for (const Shape& s : kShapes) vars.emplace_back(testing::random_tensor(s, rng), true);
  NoGrad no_grad;
  Variable y = checkpointed(Recompute::full, vars);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(tape_size(), 0u);
}

}  // namespace
}  // namespace linattn
