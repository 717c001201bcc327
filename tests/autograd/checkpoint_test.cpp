// Checkpointed regions (autograd/checkpoint.h): float64 gradients against finite differences,
// bit-identical to the region run directly, what the forward keeps in each mode (in bytes), the
// replay's tensors released when its node is done, and BackwardHooks seeing final gradients.
#include "autograd/checkpoint.h"

#include <map>
#include <memory>

#include "autograd/ops.h"
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

// The storages of one run of the region's intermediates, by name: weak references, to see when
// they are freed (outside an arena every tensor has its own storage, freed with its last view).
using Watched = std::map<std::string, std::weak_ptr<Storage>>;

Variable watched_region(const Variable& x, const std::vector<Variable>& p, std::vector<Watched>& runs) {
  Variable h = ops::rmsnorm(x, p[0], 1e-6);
  Variable a = ops::linear(h, p[1]), b = ops::linear(h, p[2], p[3]);
  Variable s = ops::swiglu(a, b), c = ops::linear(s, p[4]);
  runs.push_back({{"h", h.value().storage()}, {"a", a.value().storage()}, {"b", b.value().storage()},
                  {"s", s.value().storage()}, {"c", c.value().storage()}});
  return ops::add(x, c);
}

// The names of the run's tensors still alive, in order: "a b c".
std::string alive(const Watched& run) {
  std::string names;
  for (const auto& [name, storage] : run)
    if (!storage.expired()) names += (names.empty() ? "" : " ") + name;
  return names;
}

TEST(Checkpoint, TheForwardKeepsWhatTheModeSaysAndTheNodeReleasesTheReplay) {
  // What backward will read is what the forward leaves alive: none keeps every intermediate that a
  // backward reads (the tape's nodes hold them; c, read by no backward, goes with the add),
  // selective the products' outputs a, b, c, full none of them.
  const char* kept[] = {"a b h s", "a b c", ""};
  for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(ops::recompute_name(mode));
    std::vector<Variable> vars;
    for (const Tensor& t : random_inputs(DType::f64, 7)) vars.emplace_back(t, true);
    const std::vector<Variable> params(vars.begin() + 1, vars.end());
    std::vector<Watched> runs;
    Variable y = ops::checkpoint(mode, [&](const Variable& x) { return watched_region(x, params, runs); }, vars[0],
                                 params);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(alive(runs[0]), kept[int(mode)]);
    if (mode == Recompute::none) {
      clear_tape();
      EXPECT_EQ(alive(runs[0]), "");
      continue;
    }
    // The node's backward replays the region once, and when it is done nothing of the replay, nor
    // what the first run kept, is left: the replay's tape went with it.
    std::string after_node = "no node ran";
    BackwardHooks hooks;
    hooks.final_grad = [](size_t) {};
    hooks.after_node = [&] {
      ASSERT_EQ(runs.size(), 2u);
      after_node = alive(runs[0]) + "|" + alive(runs[1]);
    };
    Tensor upstream = Tensor::empty(kShapes[0], DType::f64);
    upstream.fill_(1.0);
    backward({y}, {upstream}, &hooks);
    EXPECT_EQ(after_node, "|");
    EXPECT_EQ(tape_size(), 0u);
  }
}

TEST(Checkpoint, SelectiveReplaysTakeTheProductsOfTheFirstRun) {
  // The replay's products are the very tensors the first run made (not computed again), and the
  // replay's nodes save the recomputed norm and SwiGLU outputs (the first run's are gone by then).
  std::vector<Variable> vars;
  for (const Tensor& t : random_inputs(DType::f64, 8)) vars.emplace_back(t, true);
  const std::vector<Variable> params(vars.begin() + 1, vars.end());
  std::vector<Watched> runs;
  std::map<std::string, const Storage*> first;  // the first run's tensors (their storages' addresses)
  Variable y = ops::checkpoint(
      Recompute::selective,
      [&](const Variable& x) {
        Variable out = watched_region(x, params, runs);
        Watched& run = runs.back();
        if (runs.size() == 1)
          for (auto& [name, storage] : run) first[name] = storage.lock().get();
        if (runs.size() == 2) {
          for (const char* name : {"a", "b"}) EXPECT_EQ(run[name].lock().get(), first[name]) << name;
          // The replay's nodes hold what their backward reads; c, read by none, went with the add
          // that consumed it, and so did the first run's h and s after it.
          EXPECT_EQ(alive(run), "a b h s");
          EXPECT_EQ(alive(runs[0]), "a b");
        }
        return out;
      },
      vars[0], params);
  backward({y}, {Tensor::zeros(kShapes[0], DType::f64)});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(alive(runs[1]), "");
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
