// ops::linears: the projections of one input by weights that lie back to back, as one product. In
// float64 its outputs and gradients are those of one ops::linear per weight (to the last bits of a
// float64 sum in another order) and of central finite differences; with bf16 products it converts
// x once and nothing else, and under a SaveInBf16 scope each output carries its bf16 copy, which
// selective recomputation keeps and hands back to the replay.
// (Parameters::joined and the layers' project(): tests/layers/project_test.cpp.)
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/ops.h"
#include "autograd/saved.h"
#include "gradcheck.h"
#include "kernels/backend.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::random_tensor;

// Weights [3, 16], [5, 16], [2, 16] back to back in one flat value, gradient and (bf16) copy buffer,
// as Parameters lays them out, and the joined [10, 16] over all of them.
struct Flat {
  Tensor values, grads, copies;
  std::vector<Variable> weights;
  Variable joined;
  Flat(DType dtype, bool bf16, Rng& rng) {
    values = random_tensor({10, 16}, rng, -0.5, 0.5, dtype);
    grads = Tensor::zeros({10, 16}, dtype);
    if (bf16) copies = values.to(DType::bf16);
    int64_t row = 0;
    for (int64_t rows : {3, 5, 2}) {
      auto block = [&](const Tensor& t) { return t.defined() ? t.view_at(row * 16, {rows, 16}) : Tensor(); };
      weights.push_back(Variable::parameter(block(values), block(grads), block(copies)));
      row += rows;
    }
    joined = Variable::parameter(values, grads, copies);
  }
};

// Outputs, dx and the flat weight gradient of <outputs, upstream>, through ops::linears or one
// ops::linear per weight.
std::vector<Tensor> run(Flat& m, const Tensor& x, const std::vector<Tensor>& upstream, bool joined) {
  m.grads.fill_(0.0);
  Variable vx(x, true);
  std::vector<Variable> ys;
  if (joined) {
    ys = ops::linears(vx, m.weights, m.joined);
  } else {
    for (const Variable& w : m.weights) ys.push_back(ops::linear(vx, w));
  }
  std::vector<Tensor> result;
  for (const Variable& y : ys) result.push_back(y.value().clone());
  backward(ys, upstream);
  result.push_back(vx.grad().clone());
  result.push_back(m.grads.clone());
  return result;
}

std::vector<Tensor> upstream_for(const Shape& rows, Rng& rng, DType dtype) {
  std::vector<Tensor> u;
  for (int64_t w : {3, 5, 2}) u.push_back(random_tensor(rows.appended(w), rng, -1, 1, dtype));
  return u;
}

TEST(Linears, MatchOneLinearPerWeightInFloat64) {
  Rng rng(1);
  Flat m(DType::f64, false, rng);
  const Tensor x = random_tensor({2, 7, 16}, rng);
  const std::vector<Tensor> upstream = upstream_for({2, 7}, rng, DType::f64);
  const std::vector<Tensor> got = run(m, x, upstream, true), want = run(m, x, upstream, false);
  const char* names[] = {"y0", "y1", "y2", "dx", "dW"};
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_CLOSE(got[i], want[i], 1e-13);
  }
}

// Central differences on x and on the joined weights, with a random upstream gradient (the second
// output scaled apart, so that blocks exchanged by a wrong join would show).
TEST(Linears, GradientsMatchFiniteDifferences) {
  Rng rng(2);
  testing::expect_gradients_match(
      [](const std::vector<Variable>& in) {
        const Variable& joined = in[1];
        std::vector<Variable> weights;
        for (int64_t row : {0, 4})  // two [4, 6] blocks of the joined [8, 6]
          weights.emplace_back(joined.value().view_at(row * 6, {4, 6}), true);
        const std::vector<Variable> ys = ops::linears(in[0], weights, joined);
        return ops::add(ys[0], ops::scale(ys[1], -2.5));
      },
      {random_tensor({3, 5, 6}, rng), random_tensor({8, 6}, rng)}, rng);
}

// bf16 products: the products of one linear each (bf16 operands, float32 sums of exact products;
// dx sums over all the outputs at once), the outputs written in bf16 (so linear's rounded, within
// one bf16 step of it: the sums' order may differ), converting x once and nothing else (dy is joined
// straight into bf16); in a SaveInBf16 scope the outputs carry their bf16 copies.
TEST(Linears, Bf16ProductsConvertXOnceAndCarryCopiesInTheScope) {
  Rng rng(3);
  Flat m(DType::f32, true, rng);
  const Tensor x = random_tensor({4, 9, 16}, rng, -1, 1, DType::f32);
  const std::vector<Tensor> upstream = upstream_for({4, 9}, rng, DType::f32);
  const std::vector<Tensor> want = run(m, x, upstream, false);
  backend::ConversionLog log;
  const std::vector<Tensor> got = run(m, x, upstream, true);
  EXPECT_EQ(log.entries().size(), 1u) << "x once; dy joined straight into bf16";
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    if (i < m.weights.size()) {  // bf16 values, one step of 2^-7 relative at most from linear's
      EXPECT_EQ(testing::bitwise_difference(got[i], got[i].to(DType::bf16).to(DType::f32)), "");
      for (int64_t e = 0; e < got[i].numel(); ++e) {
        const float g = got[i].data<float>()[e], w = want[i].data<float>()[e];
        EXPECT_LE(std::abs(g - w), std::abs(w) * 0x1.0p-7f) << "element " << e;
      }
    } else {
      EXPECT_CLOSE(got[i], want[i], 1e-5);
    }
  }

  ops::SaveInBf16 scope(true);
  Variable vx(x, true);
  const std::vector<Variable> ys = ops::linears(vx, m.weights, m.joined);
  for (const Variable& y : ys) {
    ASSERT_TRUE(y.bf16().defined());
    EXPECT_EQ(testing::bitwise_difference(y.bf16(), y.value().to(DType::bf16)), "");
  }
  clear_tape();
}

// Under selective recomputation in a SaveInBf16 scope the first run keeps the bf16 copies its split
// wrote (it rounds none of its outputs again), and the replay's outputs carry those very copies
// back (each widened once for its float32 value), so the replay's readers convert none of them.
TEST(Linears, SelectiveRecomputationKeepsTheSplitsCopiesAndHandsThemBack) {
  Rng rng(5);
  Flat m(DType::f32, true, rng);
  const Tensor x = random_tensor({4, 9, 16}, rng, -1, 1, DType::f32);
  ops::SaveInBf16 scope(true);
  // per run of the region: each output's bf16 copy and float32 value (their memory)
  std::vector<std::vector<const void*>> copies, values;
  auto region = [&](const Variable& in) {
    const std::vector<Variable> ys = ops::linears(in, m.weights, m.joined);
    copies.emplace_back();
    values.emplace_back();
    for (const Variable& y : ys) {
      copies.back().push_back(y.bf16().defined() ? y.bf16().raw() : nullptr);
      values.back().push_back(y.value().raw());
    }
    return ops::mul(ys[1], ys[1]);  // a reader whose node keeps its operands in bf16
  };
  backend::ConversionLog log;
  Variable vx(x, true);
  Variable y = ops::checkpoint(ops::Recompute::selective, region, vx, m.weights);
  backward({y}, {random_tensor(y.shape(), rng, -1, 1, DType::f32)});
  ASSERT_EQ(copies.size(), 2u) << "the first run and the replay";
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(copies[0][i], nullptr) << "output " << i << ": no bf16 copy from the split";
    EXPECT_EQ(copies[1][i], copies[0][i]) << "output " << i << ": the replay's copy is not the first run's";
  }
  int64_t rounded_again = 0;
  for (const backend::ConversionLog::Entry& e : log.entries())
    if (e.to_dtype == DType::bf16)
      for (const std::vector<const void*>& run : values) rounded_again += std::count(run.begin(), run.end(), e.from);
  EXPECT_EQ(rounded_again, 0) << "conversions into bf16 of the outputs' float32 values";
  clear_tape();
}

TEST(Linears, RefusesWeightsThatAreNotItsBlocks) {
  Rng rng(4);
  Flat m(DType::f64, false, rng);
  Variable x(Tensor::zeros({2, 16}, DType::f64), true);
  EXPECT_THROW(ops::linears(x, {m.weights[1], m.weights[0], m.weights[2]}, m.joined), Error) << "out of order";
  EXPECT_THROW(ops::linears(x, {m.weights[0], m.weights[1]}, m.joined), Error) << "not all of its rows";
}

}  // namespace
}  // namespace linattn
