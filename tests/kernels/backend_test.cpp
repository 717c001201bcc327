// The backend table: CPU entries exist for every op; a missing CUDA entry is an error naming the op.
#include "kernels/backend.h"

#include "testing.h"

namespace linattn {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void cpu_only(int) {}

TEST(Backend, MissingCudaEntryNamesTheOp) {
  // An entry whose CUDA column is empty, as every entry's is until its kernel exists.
  const backend::Kernel<void(int)> entry{"some_op", &cpu_only, nullptr};
  ASSERT_FALSE(entry.has(Device::cuda));
  EXPECT_TRUE(entry.has(Device::cpu));
  const std::string msg = message_of([&] { entry(Device::cuda, 0); });
  EXPECT_NE(msg.find("some_op: no CUDA kernel yet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("train.device: cpu"), std::string::npos) << msg;
}

TEST(Backend, CpuEntriesRunTheCpuKernels) {
  Rng rng(1);
  Tensor a = testing::random_tensor({3, 4}, rng), b = testing::random_tensor({3, 4}, rng);
  Tensor y = Tensor::empty({3, 4}, DType::f64), want = Tensor::empty({3, 4}, DType::f64);
  backend::add(Device::cpu, y, a, b);
  for (int64_t i = 0; i < 12; ++i) want.data<double>()[i] = a.data<double>()[i] + b.data<double>()[i];
  EXPECT_CLOSE(y, want, 0.0);
  // bias: y [N, out] += b [out] on every row; its backward sums the rows.
  Tensor bias = testing::random_tensor({4}, rng);
  backend::bias_forward(Device::cpu, y, bias);
  for (int64_t i = 0; i < 12; ++i) want.data<double>()[i] += bias.data<double>()[i % 4];
  EXPECT_CLOSE(y, want, 0.0);
  Tensor dbias = Tensor::zeros({4}, DType::f64), dbias_want = Tensor::zeros({4}, DType::f64);
  backend::bias_backward(Device::cpu, dbias, y);
  for (int64_t i = 0; i < 12; ++i) dbias_want.data<double>()[i % 4] += y.data<double>()[i];
  EXPECT_CLOSE(dbias, dbias_want, 1e-15);
  // The squared norm the gradient clipping uses, in float64 from float32 data.
  Tensor f = testing::random_tensor({1000}, rng, -1, 1, DType::f32);
  double want_sq = 0;
  for (int64_t i = 0; i < 1000; ++i) want_sq += double(f.data<float>()[i]) * double(f.data<float>()[i]);
  EXPECT_NEAR(backend::sum_squares(Device::cpu, f), want_sq, 1e-12 * want_sq);
}

}  // namespace
}  // namespace linattn
