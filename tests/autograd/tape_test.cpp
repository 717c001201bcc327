// Tape semantics: accumulation, no-grad scopes, freeing, errors that name shapes.
#include "autograd/ops.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::error_of;

using testing::random_tensor;

TEST(Tape, VariableUsedTwiceAccumulates) {
  Rng rng(1);
  Variable x(random_tensor({3}, rng), true);
  Tensor ones = Tensor::empty({3}, DType::f64);
  ones.fill_(1.0);
  backward({ops::mul(x, x)}, {ones});  // d(sum(x*x))/dx = 2x: both uses add into one gradient
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(x.grad().data<double>()[i], 2 * x.value().data<double>()[i]);
}

TEST(Tape, ParameterGradientsAccumulateAcrossBackwardCalls) {
  Rng rng(2);
  Tensor w = random_tensor({4}, rng), gw = Tensor::zeros({4}, DType::f64);
  Variable p = Variable::parameter(w, gw);
  Tensor ones = Tensor::empty({4}, DType::f64);
  ones.fill_(1.0);
  Variable c(random_tensor({4}, rng));
  for (int step = 0; step < 2; ++step) backward({ops::mul(p, c)}, {ones});
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(gw.data<double>()[i], 2 * c.value().data<double>()[i]);
}

TEST(Tape, NoGradRecordsNothingAndBackwardFreesTheTape) {
  Rng rng(3);
  Variable x(random_tensor({2, 2}, rng), true);
  {
    NoGrad no_grad;
    Variable y = ops::silu(x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(tape_size(), 0u);
  }
  Variable y = ops::silu(ops::sigmoid(x));
  EXPECT_EQ(tape_size(), 2u);
  backward({y}, {random_tensor({2, 2}, rng)});
  EXPECT_EQ(tape_size(), 0u);
  EXPECT_TRUE(x.grad().defined());
}

TEST(Tape, HooksSayWhenEachLeafGradientIsFinal) {
  // c = (x * y) * x + z; w is not used. In reverse, the nodes run: add (writes z), the second mul
  // (writes x), the first mul (writes x and y). x is final only after the first mul, not the second.
  Rng rng(8);
  Variable x(random_tensor({3}, rng), true), y(random_tensor({3}, rng), true), z(random_tensor({3}, rng), true);
  Variable w(random_tensor({3}, rng), true);
  Variable c = ops::add(ops::mul(ops::mul(x, y), x), z);
  int nodes_run = 0;
  std::vector<int> final_after(4, -1);
  std::vector<Tensor> grad_then(4);
  BackwardHooks hooks;
  hooks.leaves = {x, y, z, w};
  hooks.final_grad = [&](size_t i) {
    EXPECT_EQ(final_after[i], -1) << "leaf " << i << " reported twice";
    final_after[i] = nodes_run;
    if (hooks.leaves[i].grad().defined()) grad_then[i] = hooks.leaves[i].grad().clone();
  };
  hooks.after_node = [&] { ++nodes_run; };
  backward({c}, {random_tensor({3}, rng)}, &hooks);
  EXPECT_EQ(nodes_run, 3);
  // Nodes finished before each leaf was final: x and y in the 3rd node, z in the 1st, w before any
  // (it has no gradient at all).
  EXPECT_EQ(final_after, (std::vector<int>{2, 2, 0, 0}));
  EXPECT_FALSE(grad_then[3].defined());
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("leaf " + std::to_string(i));
    testing::Error e = testing::compare(grad_then[size_t(i)], hooks.leaves[size_t(i)].grad());
    EXPECT_EQ(e.max_abs, 0.0) << e.str();
  }
}

// A chain of 40 scalings: scale's backward reads no value, so the forward keeps no intermediate;
// the backward frees each node once it ran, so each gradient lives from its first write (dx = c dy,
// no zero fill) until its producer's backward. The step's peak in the arena is then three tensors,
// of the 80 that the forward and the backward allocate.
TEST(Tape, NodesFreeTheirValuesAndGradientsOnceTheyRan) {
  Arena arena(Device::cpu, 1 << 20);
  arena.poison_freed(true);
  ArenaScope scope(arena);
  Rng rng(5);
  const int64_t n = 8192;
  const size_t one = size_t(n) * sizeof(double);
  Variable x(random_tensor({n}, rng), true);  // random tensors are on the heap
  Variable y = x;
  for (int i = 0; i < 40; ++i) y = ops::scale(y, 1.25);
  EXPECT_LE(arena.high_water(), 2 * one);  // the input and the output of one scaling
  const Tensor dy = random_tensor({n}, rng);
  backward({y}, {dy});
  EXPECT_LE(arena.high_water(), 3 * one) << "allocated " << arena.allocated() / one << " tensors";
  EXPECT_EQ(arena.allocated(), 80 * one);
  Tensor want = dy.clone();
  for (int i = 0; i < 40; ++i)
    for (int64_t j = 0; j < n; ++j) want.data<double>()[j] *= 1.25;
  EXPECT_EQ(testing::compare(x.grad(), want).max_abs, 0.0);
}

// forward: z = a + b viewed as [6]  =>  da = db = dz: the seed itself, no copy. A second gradient into
// a passed-on buffer goes to a new one (the seed is never written), also when a kernel adds into it.
TEST(Tape, AddsAndViewsPassGradientsOnWithoutCopies) {
  Rng rng(6);
  Variable a(random_tensor({2, 3}, rng), true), b(random_tensor({2, 3}, rng), true);
  const Tensor g = random_tensor({6}, rng), g_before = g.clone();
  backward({ops::view(ops::add(a, b), {6})}, {g});
  EXPECT_EQ(a.grad().raw(), g.raw());
  EXPECT_EQ(b.grad().raw(), g.raw());

  Variable c(random_tensor({6}, rng), true);
  backward({ops::add(c, c)}, {g});
  EXPECT_NE(c.grad().raw(), g.raw());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.grad().data<double>()[i], 2 * g.data<double>()[i]);

  // z = x W^T + x: the add passes dz to x first, then the product adds dz W into a copy.
  Variable x(random_tensor({2, 3}, rng), true), w(random_tensor({3, 3}, rng), true);
  const Tensor dz = random_tensor({2, 3}, rng), dz_before = dz.clone();
  backward({ops::add(ops::linear(x, w), x)}, {dz});
  EXPECT_NE(x.grad().raw(), dz.raw());
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double want = dz.data<double>()[i * 3 + j];
      for (int k = 0; k < 3; ++k) want += dz.data<double>()[i * 3 + k] * w.value().data<double>()[k * 3 + j];
      EXPECT_NEAR(x.grad().data<double>()[i * 3 + j], want, 1e-15) << i << ", " << j;
    }
  EXPECT_EQ(testing::compare(g, g_before).max_abs, 0.0);
  EXPECT_EQ(testing::compare(dz, dz_before).max_abs, 0.0);
}

TEST(Tape, ScalarBackwardNeedsOneElement) {
  Rng rng(4);
  Variable x(random_tensor({2}, rng), true);
  Variable y = ops::silu(x);
  EXPECT_THROW(backward(y), Error);
  clear_tape();
}

TEST(Errors, ShapeMismatchNamesBothShapes) {
  Rng rng(5);
  Variable a(random_tensor({2, 3}, rng)), b(random_tensor({3, 2}, rng));
  std::string msg = error_of([&] { ops::add(a, b); });
  EXPECT_NE(msg.find("add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
  msg = error_of([&] { ops::linear(a, Variable(random_tensor({4, 2}, rng))); });
  EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 2]"), std::string::npos) << msg;
}

TEST(Errors, TokenIdOutsideVocabularyNamesPositionAndId) {
  Rng rng(6);
  Tensor ids = Tensor::zeros({4}, DType::i32);
  ids.data<int32_t>()[2] = 9;
  std::string msg = error_of([&] { ops::embedding(ids, Variable(random_tensor({5, 3}, rng))); });
  EXPECT_NE(msg.find("token id 9 at position 2"), std::string::npos) << msg;
  msg = error_of([&] { ops::cross_entropy(Variable(random_tensor({4, 5}, rng)), ids); });
  EXPECT_NE(msg.find("target id 9 at row 2"), std::string::npos) << msg;
}

TEST(Errors, NonFiniteLogitsNameTheRow) {
  Rng rng(7);
  for (double bad : {NAN, INFINITY}) {
    Tensor logits = random_tensor({3, 4}, rng);
    logits.data<double>()[1 * 4 + 2] = bad;
    std::string msg = error_of([&] { ops::cross_entropy(Variable(logits), Tensor::zeros({3}, DType::i32)); });
    EXPECT_NE(msg.find("non-finite loss at row 1"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace linattn
