// ops::swiglu_mlp, the SwiGLU MLP as one node over gate's and up's weights joined: its output and
// gradients are those of the unfused MLP, swiglu_linear(linears(x, {gate, up}), down), bit for bit in
// float64, float32 and with bf16 products (inside a SaveInBf16 scope too; there gate and up are
// bf16, as their product writes them, so the unfused MLP's are rounded for the comparison), and
// those of central finite differences; with bf16 products it converts x and the output's gradient
// and nothing else.
#include <vector>

#include "autograd/ops.h"
#include "autograd/saved.h"
#include "gradcheck.h"
#include "kernels/backend.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::bitwise_difference;
using testing::random_tensor;

constexpr int64_t kIn = 12, kI = 20, kOut = 12;

// gate [I, in] and up [I, in] back to back in one flat value, gradient and (bf16) copy buffer, as
// Parameters lays them out, the joined [2 I, in] over both, and down [out, I].
struct Mlp {
  Tensor values, grads, copies, down_grad;
  Variable gate, up, joined, down;
  Mlp(DType dtype, bool bf16, Rng& rng) {
    values = random_tensor({2 * kI, kIn}, rng, -0.5, 0.5, dtype);
    grads = Tensor::zeros({2 * kI, kIn}, dtype);
    if (bf16) copies = values.to(DType::bf16);
    auto block = [&](const Tensor& t, int64_t row) { return t.defined() ? t.view_at(row * kIn, {kI, kIn}) : Tensor(); };
    gate = Variable::parameter(block(values, 0), block(grads, 0), block(copies, 0));
    up = Variable::parameter(block(values, kI), block(grads, kI), block(copies, kI));
    joined = Variable::parameter(values, grads, copies);
    const Tensor w = random_tensor({kOut, kI}, rng, -0.5, 0.5, dtype);
    down_grad = Tensor::zeros(w.shape(), dtype);
    down = Variable::parameter(w, down_grad, bf16 ? w.to(DType::bf16) : Tensor());
  }
};

// y, dx, the joined weights' gradient and down's, through the fused node or the unfused MLP.
std::vector<Tensor> run(Mlp& m, const Tensor& x, const Tensor& dy, bool fused, bool in_bf16 = false) {
  ops::SaveInBf16 scope(in_bf16);
  m.grads.fill_(0.0);
  m.down_grad.fill_(0.0);
  Variable vx(x, true);
  Variable y;
  if (fused) {
    y = ops::swiglu_mlp(vx, m.gate, m.up, m.joined, m.down);
  } else {
    const std::vector<Variable> gu = ops::linears(vx, {m.gate, m.up}, m.joined);
    if (m.copies.defined())  // with bf16 products the fused node's gate and up are bf16: round these alike
      for (const Variable& v : gu) {
        Tensor rounded = Tensor::empty(v.shape(), DType::bf16);
        backend::convert(Device::cpu, rounded, v.value());
        backend::convert(Device::cpu, v.value(), rounded);
      }
    y = ops::swiglu_linear(gu[0], gu[1], m.down);
  }
  const Tensor value = y.value().clone();
  backward({y}, {dy});
  return {value, vx.grad().clone(), m.grads.clone(), m.down_grad.clone()};
}

TEST(SwigluMlp, IsTheUnfusedMlpBitForBit) {
  const char* names[] = {"y", "dx", "d[gate; up]", "d down"};
  for (const char* how : {"f64", "f32", "bf16 products", "bf16 products, kept in bf16"}) {
    SCOPED_TRACE(how);
    Rng rng(1);
    const std::string h = how;
    const DType dtype = h == "f64" ? DType::f64 : DType::f32;
    Mlp m(dtype, h.starts_with("bf16"), rng);
    const Tensor x = random_tensor({2, 7, kIn}, rng, -1, 1, dtype), dy = random_tensor({2, 7, kOut}, rng, -1, 1, dtype);
    const bool in_bf16 = h == "bf16 products, kept in bf16";
    const std::vector<Tensor> fused = run(m, x, dy, true, in_bf16), plain = run(m, x, dy, false, in_bf16);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(bitwise_difference(fused[i], plain[i]), "") << names[i];
  }
}

// Central differences on x, the joined weights and down, with a random upstream gradient.
TEST(SwigluMlp, GradientsMatchFiniteDifferences) {
  Rng rng(2);
  testing::expect_gradients_match(
      [](const std::vector<Variable>& in) {
        const Variable& joined = in[1];
        const Variable gate(joined.value().view_at(0, {4, 6}), true), up(joined.value().view_at(4 * 6, {4, 6}), true);
        return ops::swiglu_mlp(in[0], gate, up, joined, in[2]);
      },
      {random_tensor({3, 5, 6}, rng), random_tensor({8, 6}, rng), random_tensor({5, 4}, rng)}, rng);
}

// With bf16 products in a SaveInBf16 scope: x is converted once (the product's operand) and the
// output's gradient once (the operand of down's two products); the joined output's copy comes from
// the SwiGLU pass and its gradient is written in bf16 by SwiGLU's backward.
TEST(SwigluMlp, ConvertsOnlyXAndTheOutputsGradient) {
  Rng rng(3);
  Mlp m(DType::f32, true, rng);
  const Tensor x = random_tensor({4, 9, kIn}, rng, -1, 1, DType::f32);
  ops::SaveInBf16 scope(true);
  Variable vx(x, true);
  backend::ConversionLog log;
  backward({ops::swiglu_mlp(vx, m.gate, m.up, m.joined, m.down)}, {random_tensor({4, 9, kOut}, rng, -1, 1, DType::f32)});
  const std::vector<backend::ConversionLog::Entry> converted = log.entries();
  ASSERT_EQ(converted.size(), 2u);
  EXPECT_EQ(converted[0].from, x.raw());
  EXPECT_EQ(converted[1].n, 4 * 9 * kOut) << "dy";
}

TEST(SwigluMlp, RefusesWeightsThatAreNotBlocksOfTheJoined) {
  Rng rng(4);
  Mlp m(DType::f64, false, rng);
  Variable x(Tensor::zeros({2, kIn}, DType::f64), true);
  EXPECT_THROW(ops::swiglu_mlp(x, m.up, m.gate, m.joined, m.down), Error) << "gate and up exchanged";
  EXPECT_THROW(ops::swiglu_mlp(x, m.gate, m.up, m.joined, m.gate), Error) << "down of the wrong shape";
}

}  // namespace
}  // namespace linattn
