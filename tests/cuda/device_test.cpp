// The device path: a tensor knows its device and ops pick the kernel by device. Runs only where a
// GPU exists; elsewhere every test skips with the reason.
#include "autograd/decoding.h"
#include "autograd/ops.h"
#include "testing.h"

namespace linattn {
namespace {

#define SKIP_WITHOUT_GPU()                                                                              \
  do {                                                                                                  \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device here (built with CUDA: " << kBuiltWithCuda << ")"; \
  } while (0)

#ifdef LINATTN_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

TEST(Cuda, AddForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(1);
  Tensor a = testing::random_tensor({1000, 3}, rng, -1, 1, DType::f32);
  Tensor b = testing::random_tensor({1000, 3}, rng, -1, 1, DType::f32);
  Variable da(a.to(Device::cuda), true), db(b.to(Device::cuda), true);
  Variable y = ops::add(da, db);
  EXPECT_EQ(y.device(), Device::cuda);
  EXPECT_CLOSE(y.value().to(Device::cpu), ops::add(Variable(a), Variable(b)).value(), 0.0);
  Tensor up = testing::random_tensor({1000, 3}, rng, -1, 1, DType::f32);
  backward({y}, {up.to(Device::cuda)});
  EXPECT_CLOSE(da.grad().to(Device::cpu), up, 0.0);
}

// Decoding's slice_time runs on the CPU only (linear attention, tested here before, has CUDA kernels now).
TEST(Cuda, CpuOnlyOpOnADeviceTensorSaysSo) {
  SKIP_WITHOUT_GPU();
  Variable x(Tensor::zeros({1, 2, 1, 4}, DType::f32).to(Device::cuda));
  EXPECT_THROW(ops::slice_time(x, 0, 1), Error);
}

#ifndef LINATTN_CUDA  // a build with neither nvcc nor the emulation (-DLINATTN_CUDA_EMULATION=OFF)
TEST(NoCuda, ADeviceTensorIsAClearError) {
  EXPECT_THROW(Tensor::empty({2}, DType::f32, Device::cuda), Error);
}
#endif

}  // namespace
}  // namespace linattn
