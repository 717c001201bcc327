// ops::linear with a bf16 weight copy (train.precision: bf16): its three products read bf16
// operands (the weight's copy, x converted once, dy converted once for dx and dW) with float32
// accumulation into float32 y, dx and dW. Checked against float64 on the rounded operands, with
// the bound of tests/gemm_bf16_reference.h (exact products, K + 2 float32 roundings): a product that
// read an unrounded operand misses it by ~2^-9 relative, hundreds of times the bound. Conversions
// are counted with backend::ConversionLog.
#include <vector>

#include "autograd/ops.h"
#include "autograd/saved.h"
#include "core/rng.h"
#include "gemm_bf16_reference.h"
#include "kernels/backend.h"
#include "recompute_testing.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::HostMatrix;

// A float32 [rows, cols] tensor as a dense HostMatrix, optionally rounded to bf16.
HostMatrix matrix(const Tensor& t, int64_t rows, int64_t cols, bool rounded) {
  HostMatrix m{rows, cols, cols, std::vector<float>(t.data<float>(), t.data<float>() + rows * cols)};
  return rounded ? m.rounded() : m;
}

// A parameter with its bf16 copy, as Parameters::keep_bf16_copy and refresh_bf16_weights make it.
Variable bf16_parameter(const Tensor& w) {
  return Variable::parameter(w, Tensor::zeros(w.shape(), DType::f32), w.to(DType::bf16));
}

// got ([rows, cols]) within the bound of the reference on the rounded operands, and far from the
// reference on the unrounded ones (the operands were rounded).
void expect_bf16_product(const char* what, const Tensor& got, int64_t rows, int64_t cols, bool ta, bool tb,
                         int64_t K, const HostMatrix& a, const HostMatrix& b, const HostMatrix& a_rounded,
                         const HostMatrix& b_rounded) {
  const HostMatrix c = matrix(got, rows, cols, false);
  const testing::WorstEntry on_rounded =
      testing::worst_entry(c, testing::gemm_reference(ta, tb, rows, cols, K, 1, a_rounded, b_rounded, 0, c, 0));
  const testing::WorstEntry on_f32 = testing::worst_entry(c, testing::gemm_reference(ta, tb, rows, cols, K, 1, a, b, 0, c, 0));
  EXPECT_LE(on_rounded.ratio, 1.0) << what << ": error " << on_rounded.error << " over the bound " << on_rounded.bound;
  EXPECT_GT(on_f32.ratio, 100.0) << what << ": within " << on_f32.ratio
                                 << " of float32's bound on the unrounded operands: was an operand not rounded?";
  std::printf("%s: worst error %.2f of the bound on the bf16 operands\n", what, on_rounded.ratio);
}

TEST(LinearBf16, ForwardAndBothGradientsAreBf16ProductsWithFloat32Sums) {
  Rng rng(31);
  const int64_t N = 10, in = 24, out = 40;
  Tensor x = testing::random_tensor({2, 5, in}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({out, in}, rng, -1, 1, DType::f32);
  Tensor up = testing::random_tensor({2, 5, out}, rng, -1, 1, DType::f32);
  Variable xv(x, true), wv = bf16_parameter(w);
  Variable y = ops::linear(xv, wv);
  EXPECT_EQ(y.dtype(), DType::f32);
  backward({y}, {up});
  ASSERT_TRUE(xv.grad().defined());
  EXPECT_EQ(xv.grad().dtype(), DType::f32);
  EXPECT_EQ(wv.grad().dtype(), DType::f32);
  const HostMatrix X = matrix(x, N, in, false), W = matrix(w, out, in, false), DY = matrix(up, N, out, false);
  const HostMatrix X16 = X.rounded(), W16 = W.rounded(), DY16 = DY.rounded();
  expect_bf16_product("y = x W^T", y.value(), N, out, false, true, in, X, W, X16, W16);
  expect_bf16_product("dx = dy W", xv.grad(), N, in, false, false, out, DY, W, DY16, W16);
  expect_bf16_product("dW = dy^T x", wv.grad(), out, in, true, false, N, DY, X, DY16, X16);
}

// The weight gradient accumulates in float32 across backward passes (micro-batches): two passes
// give twice one pass's, up to float32's rounding of the sum (exact here: x + x = 2x).
TEST(LinearBf16, WeightGradientsAccumulateInFloat32) {
  Rng rng(32);
  Tensor x = testing::random_tensor({6, 16}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({8, 16}, rng, -1, 1, DType::f32);
  Tensor up = testing::random_tensor({6, 8}, rng, -1, 1, DType::f32);
  Variable wv = bf16_parameter(w);
  backward({ops::linear(Variable(x), wv)}, {up});
  const Tensor once = wv.grad().clone();
  backward({ops::linear(Variable(x), wv)}, {up});
  int64_t differ = 0, not_bf16 = 0;
  for (int64_t i = 0; i < once.numel(); ++i) {
    differ += wv.grad().data<float>()[i] != 2 * once.data<float>()[i];
    not_bf16 += once.data<float>()[i] != testing::round_bf16(once.data<float>()[i]);
  }
  EXPECT_EQ(differ, 0) << "the second pass did not add the same float32 gradient";
  EXPECT_GT(not_bf16, once.numel() / 2) << "the weight gradient looks rounded to bf16";
}

// The normed input of an attention layer feeds q, k and v: x is converted once for the three
// forward products, each output gradient once for its dx and dW, and no weight at all (each reads
// its bf16 copy); the three dx sum in float32 into x's gradient.
TEST(LinearBf16, ASharedInputIsConvertedOnceAndEachOutputGradientOnce) {
  Rng rng(33);
  const int64_t N = 12, in = 16, out = 8;
  Tensor x = testing::random_tensor({N, in}, rng, -1, 1, DType::f32);
  std::vector<Tensor> ws, ups;
  std::vector<Variable> wv, ys;
  for (int i = 0; i < 3; ++i) {
    ws.push_back(testing::random_tensor({out, in}, rng, -1, 1, DType::f32));
    ups.push_back(testing::random_tensor({N, out}, rng, -1, 1, DType::f32));
    wv.push_back(bf16_parameter(ws.back()));
  }
  Variable xv(x, true);
  backend::ConversionLog log;
  for (int i = 0; i < 3; ++i) ys.push_back(ops::linear(xv, wv[size_t(i)]));
  const std::vector<backend::ConversionLog::Entry> forward = log.entries();
  ASSERT_EQ(forward.size(), 1u) << "conversions in the forward of three projections of one input";
  EXPECT_EQ(forward[0].from, x.raw());
  EXPECT_EQ(forward[0].n, x.numel());
  log.clear();
  backward(ys, ups);
  const std::vector<backend::ConversionLog::Entry> back = log.entries();
  ASSERT_EQ(back.size(), 3u) << "conversions in the backward: one per output gradient";
  for (const backend::ConversionLog::Entry& e : back) {
    EXPECT_EQ(e.n, N * out);
    EXPECT_EQ(e.from_dtype, DType::f32);
    for (const Tensor& w : ws) EXPECT_NE(e.from, w.raw()) << "a weight was converted";
  }
  // dx = sum_i dy_i W_i: float32 sums of exact bf16 products, three products of K = out terms each.
  double worst = 0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < in; ++c) {
      double want = 0, magnitude = 0;
      for (int i = 0; i < 3; ++i)
        for (int64_t k = 0; k < out; ++k) {
          const double p = double(testing::round_bf16(ups[size_t(i)].data<float>()[r * out + k])) *
                           double(testing::round_bf16(ws[size_t(i)].data<float>()[k * in + c]));
          want += p;
          magnitude += std::abs(p);
        }
      const double bound = double(3 * (out + 2)) * testing::kFloat32Roundoff * magnitude;
      worst = std::max(worst, std::abs(double(xv.grad().data<float>()[r * in + c]) - want) / bound);
    }
  EXPECT_LE(worst, 1.0) << "x's gradient against float64 on the rounded operands";
}

// A fused projection's part (ops::rows of a weight, as Mamba2 takes z, x, B, C and dt from one
// in_proj) reads the matching rows of the weight's bf16 copy: nothing of the weight is converted,
// and its gradient lands in those rows only.
TEST(LinearBf16, RowsOfAWeightReadTheRowsOfItsBf16Copy) {
  Rng rng(34);
  Tensor x = testing::random_tensor({5, 8}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({6, 8}, rng, -1, 1, DType::f32);
  Tensor up = testing::random_tensor({5, 3}, rng, -1, 1, DType::f32);
  Variable wv = bf16_parameter(w);
  backend::ConversionLog log;
  Variable part = ops::rows(wv, 2, 3);
  ASSERT_TRUE(part.bf16().defined());
  EXPECT_EQ(part.bf16().raw(), wv.bf16().view_at(2 * 8, {3, 8}).raw());
  Variable y = ops::linear(Variable(x), part);
  backward({y}, {up});
  for (const backend::ConversionLog::Entry& e : log.entries())
    EXPECT_TRUE(e.from == x.raw() || e.n == up.numel()) << "a conversion of " << e.n << " elements";
  EXPECT_EQ(log.entries().size(), 2u);  // x, dy
  const HostMatrix X = matrix(x, 5, 8, false), W = matrix(w.view_at(2 * 8, {3, 8}), 3, 8, false);
  expect_bf16_product("y = x W[2:5]^T", y.value(), 5, 3, false, true, 8, X, W, X.rounded(), W.rounded());
  for (int64_t i = 0; i < 6 * 8; ++i) {
    if (i < 2 * 8 || i >= 5 * 8) {
      EXPECT_EQ(wv.grad().data<float>()[i], 0.0f) << "row " << i / 8;
    }
  }
}

// Without a bf16 copy the weight's products stay float32 and nothing is converted.
TEST(LinearBf16, AWeightWithoutACopyStaysFloat32) {
  Rng rng(35);
  Tensor x = testing::random_tensor({4, 8}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({3, 8}, rng, -1, 1, DType::f32);
  backend::ConversionLog log;
  Variable y = ops::linear(Variable(x), Variable(w, true));
  backward({y}, {testing::random_tensor({4, 3}, rng, -1, 1, DType::f32)});
  EXPECT_TRUE(log.entries().empty());
  const HostMatrix c = matrix(y.value(), 4, 3, false), X = matrix(x, 4, 8, false), W = matrix(w, 3, 8, false);
  const testing::WorstEntry e = testing::worst_entry(c, testing::gemm_reference(false, true, 4, 3, 8, 1, X, W, 0, c, 0));
  EXPECT_LE(e.ratio, 1.0) << "float32 y against float64: error " << e.error << " over " << e.bound;
}

// A residual sum's norm behind a bf16 product (ops::add_rmsnorm(a, linear(x, W), ...), as the model's
// blocks have it): the norm's backward writes the sum's gradient and its bf16 copy in one pass, the
// branch takes both, and the product's backward reads the copy: no conversion of that gradient.
TEST(LinearBf16, TheBranchGradientsCopyFromTheNormsBackwardIsTheProductsOperand) {
  Rng rng(33);
  const int64_t in = 24, d = 40;
  Tensor x = testing::random_tensor({2, 5, in}, rng, -1, 1, DType::f32);
  Tensor a = testing::random_tensor({2, 5, d}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({d, in}, rng, -1, 1, DType::f32);
  Tensor norm_w = testing::random_tensor({d}, rng, 0.5, 1.5, DType::f32);
  Tensor dy = testing::random_tensor({2, 5, d}, rng, -1, 1, DType::f32);
  Variable xv(x, true), av(a, true), wv = bf16_parameter(w), nv(norm_w, true);
  Variable branch, y;
  {
    ops::SaveInBf16 bf16_saves(true);
    branch = ops::linear(xv, wv);
    y = ops::add_rmsnorm(av, branch, nv, 1e-6).second;
  }
  backend::ConversionLog log;
  backward({y}, {dy});
  ASSERT_TRUE(branch.grad().defined());
  ASSERT_TRUE(branch.grad_bf16().defined()) << "the norm's backward wrote no copy";
  EXPECT_EQ(testing::bitwise_difference(branch.grad_bf16(), branch.grad().to(DType::bf16)), "")
      << "the copy is the gradient rounded";
  for (const backend::ConversionLog::Entry& e : log.entries())
    EXPECT_NE(e.from, branch.grad().raw()) << "the product's backward converted the gradient it had a copy of";
  // a second contribution makes a sum the copy is not of
  Variable v(Tensor::zeros({3}, DType::f32), true);
  const Tensor g = Tensor::zeros({3}, DType::f32), g16 = Tensor::zeros({3}, DType::bf16);
  v.add_grad(g, g16);
  EXPECT_TRUE(v.grad_bf16().defined());
  v.add_grad(g);
  EXPECT_FALSE(v.grad_bf16().defined()) << "kept with a sum";
  v.add_grad(Tensor::zeros({3}, DType::f32), g16);
  EXPECT_FALSE(v.grad_bf16().defined()) << "a copy of one contribution kept with a sum";
  Variable u(Tensor::zeros({3}, DType::f32), true);
  u.add_grad(g, g16);
  u.ensure_grad();
  EXPECT_FALSE(u.grad_bf16().defined()) << "kept with a gradient handed out to be written";
}

}  // namespace
}  // namespace linattn
