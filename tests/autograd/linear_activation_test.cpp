// ops::linear_activation, y = c f(x W^T + b) as one node (GLA's gate): its output and gradients are
// those of activation(f, linear(x, W, b), c) bit for bit, in float64, float32 and with bf16 products
// (inside a SaveInBf16 scope too), for every activation; those of central finite differences; and with
// bf16 products it converts x only (the kept input's copy and the products' operand dz are written
// by its own passes).
#include <vector>

#include "autograd/ops.h"
#include "autograd/saved.h"
#include "gradcheck.h"
#include "kernels/backend.h"
#include "recompute_testing.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::bitwise_difference;
using testing::random_tensor;

constexpr int64_t kIn = 12, kOut = 9;

struct Layer {
  Tensor w, b, dw, db;
  Variable weight, bias;
  Layer(DType dtype, bool bf16, Rng& rng) {
    w = random_tensor({kOut, kIn}, rng, -0.5, 0.5, dtype), b = random_tensor({kOut}, rng, -2, 2, dtype);
    dw = Tensor::zeros(w.shape(), dtype), db = Tensor::zeros(b.shape(), dtype);
    weight = Variable::parameter(w, dw, bf16 ? w.to(DType::bf16) : Tensor());
    bias = Variable::parameter(b, db);
  }
};

// y, dx, dW and db through the fused node or the unfused ops.
std::vector<Tensor> run(Layer& l, Activation f, const Tensor& x, const Tensor& dy, bool fused, bool in_bf16) {
  ops::SaveInBf16 scope(in_bf16);
  l.dw.fill_(0.0);
  l.db.fill_(0.0);
  Variable vx(x, true);
  const Variable y = fused ? ops::linear_activation(vx, l.weight, l.bias, f, 0.0625)
                           : ops::activation(f, ops::linear(vx, l.weight, l.bias), 0.0625);
  const Tensor value = y.value().clone();
  backward({y}, {dy});
  return {value, vx.grad().clone(), l.dw.clone(), l.db.clone()};
}

TEST(LinearActivation, IsTheUnfusedOpsBitForBit) {
  const char* names[] = {"y", "dx", "dW", "db"};
  for (const char* how : {"f64", "f32", "bf16 products", "bf16 products, kept in bf16"})
    for (Activation f : {Activation::silu, Activation::sigmoid, Activation::logsigmoid, Activation::elu1,
                         Activation::relu}) {
      SCOPED_TRACE(std::string(how) + " " + activation_name(f));
      Rng rng(1);
      const std::string h = how;
      const DType dtype = h == "f64" ? DType::f64 : DType::f32;
      Layer l(dtype, h.starts_with("bf16"), rng);
      const Tensor x = random_tensor({2, 7, kIn}, rng, -1, 1, dtype);
      const Tensor dy = random_tensor({2, 7, kOut}, rng, -1, 1, dtype);
      const bool in_bf16 = h == "bf16 products, kept in bf16";
      const std::vector<Tensor> fused = run(l, f, x, dy, true, in_bf16), plain = run(l, f, x, dy, false, in_bf16);
      for (size_t i = 0; i < fused.size(); ++i) EXPECT_EQ(bitwise_difference(fused[i], plain[i]), "") << names[i];
    }
}

// Central differences on x, the weight and the bias, with a random upstream gradient.
TEST(LinearActivation, GradientsMatchFiniteDifferences) {
  for (Activation f : {Activation::silu, Activation::logsigmoid, Activation::elu1}) {
    SCOPED_TRACE(activation_name(f));
    Rng rng(2);
    testing::expect_gradients_match(
        [f](const std::vector<Variable>& in) { return ops::linear_activation(in[0], in[1], in[2], f, 0.5); },
        {random_tensor({3, 5, 6}, rng), random_tensor({4, 6}, rng), random_tensor({4}, rng)}, rng);
  }
}

TEST(LinearActivation, ConvertsOnlyX) {
  Rng rng(3);
  Layer l(DType::f32, true, rng);
  const Tensor x = random_tensor({4, 9, kIn}, rng, -1, 1, DType::f32);
  ops::SaveInBf16 scope(true);
  Variable vx(x, true);
  backend::ConversionLog log;
  backward({ops::linear_activation(vx, l.weight, l.bias, Activation::logsigmoid, 0.0625)},
           {random_tensor({4, 9, kOut}, rng, -1, 1, DType::f32)});
  const std::vector<backend::ConversionLog::Entry> converted = log.entries();
  ASSERT_EQ(converted.size(), 1u);
  EXPECT_EQ(converted[0].from, x.raw());
}

TEST(LinearActivation, RefusesABiasThatDoesNotFit) {
  Rng rng(4);
  Layer l(DType::f64, false, rng);
  Variable x(Tensor::zeros({2, kIn}, DType::f64), true);
  const std::string e =
      testing::error_of([&] { ops::linear_activation(x, l.weight, Variable(), Activation::silu, 1.0); });
  EXPECT_NE(e.find("linear_activation: input f64[2, 12], weight f64[9, 12] and bias (none) do not fit"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace linattn
