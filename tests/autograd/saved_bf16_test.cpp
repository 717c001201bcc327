// Activations kept in bf16 (autograd/saved.h) and the fused swiglu_linear (autograd/ops.h): in a
// SaveInBf16 scope a node keeps half the bytes and its backward reads exactly the rounded values;
// parameters and values outside the scope stay as they are; swiglu_linear is linear(swiglu()) bit
// for bit and keeps no product.
#include <cstring>

#include "autograd/ops.h"
#include "autograd/saved.h"
#include "kernels/backend.h"
#include "gradcheck.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::bitwise_difference;
using testing::random_tensor;
using V = std::vector<Variable>;

// x rounded to bf16 and widened back: what a node in a SaveInBf16 scope reads of x.
Tensor rounded(const Tensor& x) { return x.to(DType::bf16).to(DType::f32); }

Tensor f32_random(const Shape& s, Rng& rng, double lo = -2, double hi = 2) {
  return random_tensor(s, rng, lo, hi, DType::f32);
}

TEST(SaveInBf16, KeepsActivationsAsTheirBf16CopyAndParametersAsTheyAre) {
  Rng rng(1);
  Variable activation(f32_random({4, 16}, rng), true);
  Variable parameter = Variable::parameter(f32_random({16}, rng), Tensor::zeros({16}, DType::f32));
  Variable f64(random_tensor({4, 16}, rng), true);
  EXPECT_FALSE(ops::detail::Saved(activation).in_bf16()) << "outside the scope a value is kept as it is";
  ops::SaveInBf16 scope(true);
  const ops::detail::Saved a(activation), p(parameter), d(f64);
  EXPECT_TRUE(a.in_bf16());
  EXPECT_FALSE(a.var().value().defined()) << "the float32 value is not held";
  EXPECT_EQ(bitwise_difference(a.value(), rounded(activation.value())), "");
  EXPECT_FALSE(p.in_bf16());
  EXPECT_FALSE(d.in_bf16());
  {
    ops::SaveInBf16 off(false);
    EXPECT_FALSE(ops::detail::Saved(activation).in_bf16());
  }
  EXPECT_TRUE(ops::saving_in_bf16()) << "the inner scope restored the setting";
}

// The backward reads the rounded values: silu's and mul's gradients in the scope are, bit for bit,
// those of the same ops run outside it on the rounded inputs (their backwards read only the inputs),
// and not those of the float32 inputs.
TEST(SaveInBf16, BackwardReadsTheRoundedValues) {
  Rng rng(2);
  const Tensor a = f32_random({8, 64}, rng), b = f32_random({8, 64}, rng), dy = f32_random({8, 64}, rng);
  for (const char* op : {"silu", "mul"}) {
    SCOPED_TRACE(op);
    auto grads = [&](const Tensor& x, const Tensor& y, bool in_bf16) {
      ops::SaveInBf16 scope(in_bf16);
      Variable va(x, true), vb(y, true);
      backward({std::string(op) == "silu" ? ops::silu(va) : ops::mul(va, vb)}, {dy});
      return std::vector<Tensor>{va.grad().clone(), std::string(op) == "silu" ? Tensor() : vb.grad().clone()};
    };
    const std::vector<Tensor> in_scope = grads(a, b, true), on_rounded = grads(rounded(a), rounded(b), false),
                              on_f32 = grads(a, b, false);
    for (size_t i = 0; i < in_scope.size(); ++i) {
      if (!in_scope[i].defined()) continue;
      EXPECT_EQ(bitwise_difference(in_scope[i], on_rounded[i]), "") << "gradient " << i;
      EXPECT_NE(bitwise_difference(in_scope[i], on_f32[i]), "") << "the scope changed nothing: were the values rounded?";
      EXPECT_LE(testing::compare(in_scope[i], on_f32[i]).relative, 1e-2);
    }
  }
}

// In the scope rmsnorm's kernel writes its output's bf16 copy (the one the products read) and its
// input's (the one its node keeps) in its own pass: no conversion is launched for either.
TEST(SaveInBf16, RmsnormWritesTheCopiesItsReadersTake) {
  Rng rng(8);
  const Tensor x = f32_random({6, 32}, rng);
  Variable w = Variable::parameter(f32_random({32}, rng), Tensor::zeros({32}, DType::f32));
  ops::SaveInBf16 scope(true);
  Variable vx(x, true);
  backend::ConversionLog log;
  Variable y = ops::rmsnorm(vx, w, 1e-6);
  EXPECT_TRUE(log.entries().empty()) << "a conversion was launched";
  ASSERT_TRUE(y.bf16().defined());
  ASSERT_TRUE(vx.bf16().defined());
  EXPECT_EQ(bitwise_difference(y.bf16(), y.value().to(DType::bf16)), "");
  EXPECT_EQ(bitwise_difference(vx.bf16(), x.to(DType::bf16)), "");
  EXPECT_FALSE(w.bf16().defined()) << "a parameter is kept as it is";
  clear_tape();
}

// In an arena, what the nodes keep after the forward takes half the bytes in the scope.
TEST(SaveInBf16, NodesKeepHalfTheBytes) {
  Rng rng(3);
  const Tensor x = f32_random({32, 64}, rng);
  auto kept = [&](bool in_bf16) {
    Arena arena;
    ArenaScope arena_scope(arena);
    ops::SaveInBf16 scope(in_bf16);
    Variable vx(x, true);
    Variable out;
    {
      Variable y = ops::scale(vx, 0.5);  // an activation in the arena, kept by silu and swiglu
      Variable z = ops::silu(y);         // kept by swiglu
      out = ops::swiglu(z, y);
    }
    const size_t bytes = arena.used() - out.value().nbytes();  // nodes' keep, without the output
    clear_tape();
    return bytes;
  };
  const size_t f32 = kept(false), bf16 = kept(true);
  EXPECT_EQ(f32, 2 * x.nbytes());
  EXPECT_EQ(bf16, x.nbytes()) << "y and z kept as bf16 copies, shared by the nodes that keep them";
}

TEST(SwigluLinear, GradientsMatchFiniteDifferences) {
  Rng rng(4);
  testing::expect_gradients_match([](const V& x) { return ops::swiglu_linear(x[0], x[1], x[2]); },
                                  {random_tensor({3, 5, 6}, rng, -3, 3), random_tensor({3, 5, 6}, rng),
                                   random_tensor({4, 6}, rng)},
                                  rng);
}

// swiglu_linear against linear(swiglu()): values and the three gradients bit for bit, in float64,
// float32, and with a bf16 weight copy (bf16 products) outside a SaveInBf16 scope.
TEST(SwigluLinear, IsLinearOfSwigluBitForBit) {
  for (const char* how : {"f64", "f32", "bf16 products"}) {
    SCOPED_TRACE(how);
    Rng rng(5);
    const DType dt = std::string(how) == "f64" ? DType::f64 : DType::f32;
    const Tensor g = random_tensor({2, 7, 24}, rng, -3, 3, dt), u = random_tensor({2, 7, 24}, rng, -1, 1, dt);
    const Tensor w = random_tensor({10, 24}, rng, -1, 1, dt), dy = random_tensor({2, 7, 10}, rng, -1, 1, dt);
    auto run = [&](bool fused) {
      Variable vg(g, true), vu(u, true);
      Variable vw = std::string(how) == "bf16 products"
                        ? Variable::parameter(w, Tensor::zeros(w.shape(), dt), w.to(DType::bf16))
                        : Variable::parameter(w, Tensor::zeros(w.shape(), dt));
      Variable y = fused ? ops::swiglu_linear(vg, vu, vw) : ops::linear(ops::swiglu(vg, vu), vw);
      const Tensor value = y.value().clone();
      backward({y}, {dy});
      return std::vector<Tensor>{value, vg.grad().clone(), vu.grad().clone(), vw.grad().clone()};
    };
    const std::vector<Tensor> fused = run(true), plain = run(false);
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(bitwise_difference(fused[i], plain[i]), "") << "output " << i;
  }
}

// In a SaveInBf16 scope the backward reads gate and up in bf16 and recomputes the product from them:
// its gradients are those of the op outside the scope on the rounded gate and up, bit for bit, with
// bf16 products.
TEST(SwigluLinear, InTheScopeItsGradientsAreThoseOfTheRoundedInputs) {
  Rng rng(7);
  const Tensor g = f32_random({3, 7, 40}, rng), u = f32_random({3, 7, 40}, rng), w = f32_random({12, 40}, rng);
  const Tensor dy = f32_random({3, 7, 12}, rng);
  auto grads = [&](const Tensor& gate, const Tensor& up, bool in_bf16) {
    ops::SaveInBf16 scope(in_bf16);
    Variable vg(gate, true), vu(up, true);
    Variable vw = Variable::parameter(w, Tensor::zeros(w.shape(), DType::f32), w.to(DType::bf16));
    backward({ops::swiglu_linear(vg, vu, vw)}, {dy});
    return std::vector<Tensor>{vg.grad().clone(), vu.grad().clone(), vw.grad().clone()};
  };
  const std::vector<Tensor> in_scope = grads(g, u, true), on_rounded = grads(rounded(g), rounded(u), false);
  for (size_t i = 0; i < in_scope.size(); ++i) EXPECT_EQ(bitwise_difference(in_scope[i], on_rounded[i]), "") << i;
}

// In the scope its conversions are gate's and up's copies, which its node keeps, and dy's for the
// products: the kernels read the copies and write the product's operand in bf16 themselves.
TEST(SwigluLinear, InTheScopeConvertsOnlyWhatItKeepsAndDy) {
  Rng rng(9);
  const Tensor g = f32_random({3, 7, 40}, rng), u = f32_random({3, 7, 40}, rng), w = f32_random({12, 40}, rng);
  ops::SaveInBf16 scope(true);
  Variable vg(g, true), vu(u, true);
  Variable vw = Variable::parameter(w, Tensor::zeros(w.shape(), DType::f32), w.to(DType::bf16));
  backend::ConversionLog log;
  backward({ops::swiglu_linear(vg, vu, vw)}, {f32_random({3, 7, 12}, rng)});
  const std::vector<backend::ConversionLog::Entry> converted = log.entries();
  ASSERT_EQ(converted.size(), 3u);
  EXPECT_EQ(converted[0].from, g.raw());
  EXPECT_EQ(converted[1].from, u.raw());
  EXPECT_EQ(converted[2].n, 3 * 7 * 12) << "dy";
}

// It keeps gate and up only: in an arena, the product silu(gate) * up is gone after the forward.
TEST(SwigluLinear, KeepsNoProduct) {
  Rng rng(6);
  const Tensor g = f32_random({16, 64}, rng), u = f32_random({16, 64}, rng), w = f32_random({8, 64}, rng);
  Arena arena;
  ArenaScope arena_scope(arena);
  Variable vw = Variable::parameter(w, Tensor::zeros(w.shape(), DType::f32));
  Variable y = ops::swiglu_linear(Variable(g, true), Variable(u, true), vw);
  EXPECT_EQ(arena.used(), y.value().nbytes()) << "gate and up are the caller's; h was freed";
  clear_tape();
}

}  // namespace
}  // namespace linattn
