// The CUDA step control (gradient norm, clip factor, skip flag) and the one-launch AdamW, through
// train/optimizer.h on device parameters, against the same on the CPU on the same flat buffers.
#include "kernels/cuda/optimizer.h"

#include <cmath>
#include <cstring>

#include "kernel_testing.h"
#include "kernels/backend.h"
#include "layers/parameters.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace linattn {
namespace {

using namespace testing;

// Three parameters: an odd matrix, a one-element bias without weight decay, and a vector larger
// than the 1024 x 512 elements of the norm's grid (so its blocks loop).
Parameters make_parameters() {
  Parameters p;
  p.add("a.weight", {37, 129}, Init::Normal(0.02), true);
  p.add("a.bias", {1}, Init::Constant(0.5), false);
  p.add("b.weight", {600001}, Init::Uniform(0.1), true);
  p.allocate(DType::f32);
  p.initialize(7);
  return p;
}

// Tolerance bases. The norm: both sides add squares in float64 (the CPU's order differs), relative
// error ~1e-13 for 6e5 terms; 1e-12 (the clip factor, one division by it, the same). AdamW: the kernel
// rounds each operation separately; the CPU loop, built with -march=native, lets GCC contract
// products into FMAs, which moves a result by an ulp here and there: over three steps that measured
// at most 1.2e-7 relative to the largest entry (CPU loop against an unfused one); 5e-7 is 4 ulp.
constexpr double kNormTol = 1e-12;
constexpr double kAdamTol = 5e-7;

TEST(CudaOptimizer, StepControlClippingAndAdamWMatchTheCpuOptimizer) {
  SKIP_WITHOUT_GPU();
  Parameters params = make_parameters();
  TrainConfig config;
  AdamW cpu_adam(params, config);
  // The same parameters on the device, and an AdamW over them.
  Parameters device_params = make_parameters();
  device_params.to(Device::cuda);
  AdamW cuda_adam(device_params, config);
  Tensor cpu_control = make_step_control(Device::cpu), cuda_control = make_step_control(Device::cuda);
  Rng rng(71);
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    rng.fill_uniform(params.grads().all(), -1, 1);
    device_params.grads().all().copy_from(params.grads().all());

    // every step clips: the norm of ~6e5 uniform entries is ~450
    const double clip = 0.5;
    set_step_control(cpu_control, params, clip);
    set_step_control(cuda_control, device_params, clip);
    const Tensor got = on_host(cuda_control);
    const double* c = got.data<double>();
    const double* want = cpu_control.data<double>();
    EXPECT_NEAR(c[step_control::norm], want[step_control::norm], kNormTol * want[step_control::norm]);
    EXPECT_NEAR(c[step_control::clip], want[step_control::clip], kNormTol * want[step_control::clip]);
    EXPECT_EQ(c[step_control::skip], 0.0);
    EXPECT_NEAR(want[step_control::norm], grad_norm(params), kNormTol * want[step_control::norm]);

    const double lr = 1e-2 * double(step);
    cpu_adam.step(lr, cpu_control);
    cuda_adam.step(lr, cuda_control);
    EXPECT_CLOSE(on_host(device_params.values().all()), params.values().all(), kAdamTol);
    EXPECT_CLOSE(on_host(cuda_adam.m().all()), cpu_adam.m().all(), kAdamTol);
    EXPECT_CLOSE(on_host(cuda_adam.v().all()), cpu_adam.v().all(), kAdamTol);
  }
  // A non-finite gradient: the device decides to skip, and the update leaves every buffer as it was.
  Tensor before = on_host(device_params.values().all()), m_before = on_host(cuda_adam.m().all());
  Tensor nan = Tensor::empty({1}, DType::f32);
  nan.data<float>()[0] = NAN;
  device_params.grads()[2].view_at(17, {1}).copy_from(nan);
  set_step_control(cuda_control, device_params, 0.5);
  cuda_adam.step(1e-2, cuda_control);
  EXPECT_EQ(on_host(cuda_control).data<double>()[step_control::skip], 1.0);
  EXPECT_CLOSE(on_host(device_params.values().all()), before, 0.0);
  EXPECT_CLOSE(on_host(cuda_adam.m().all()), m_before, 0.0);
}

// With a bf16 weight copy (train.precision: bf16) the AdamW kernel writes it from the updated
// masters in its own pass, rounded as the convert entry rounds; a skipped step leaves it as it was.
TEST(CudaOptimizer, AdamWWritesTheWeightsBf16CopyInItsPass) {
  SKIP_WITHOUT_GPU();
  Parameters params = make_parameters();
  params.to(Device::cuda);
  params.keep_bf16_copy();
  refresh_bf16_weights(params);
  AdamW adam(params, TrainConfig{});
  Tensor control = make_step_control(Device::cuda);
  Rng rng(72);
  Tensor grads = Tensor::empty(params.grads().all().shape(), DType::f32);
  rng.fill_uniform(grads, -1, 1);
  params.grads().all().copy_from(grads);
  set_step_control(control, params, 0.0);
  backend::ConversionLog log;
  adam.step(1e-2, control);
  EXPECT_TRUE(log.entries().empty()) << log.entries().size() << " conversions besides AdamW's pass";
  const Tensor masters = on_host(params.values().all()), copy = on_host(params.bf16_values().all());
  const Tensor rounded = masters.to(DType::bf16);
  ASSERT_EQ(copy.nbytes(), rounded.nbytes());
  EXPECT_EQ(std::memcmp(copy.raw(), rounded.raw(), copy.nbytes()), 0) << "the copy is not the updated masters rounded";
  // a skipped step: masters and copy stay
  Tensor nan = Tensor::empty({1}, DType::f32);
  nan.data<float>()[0] = NAN;
  params.grads()[2].view_at(5, {1}).copy_from(nan);
  set_step_control(control, params, 0.0);
  adam.step(1e-2, control);
  const Tensor after = on_host(params.bf16_values().all());
  EXPECT_EQ(std::memcmp(after.raw(), copy.raw(), copy.nbytes()), 0) << "a skipped step changed the copy";
}

// The norm is the same to the bit on every run: no atomics, a grid fixed by n.
TEST(CudaOptimizer, GradNormIsDeterministic) {
  SKIP_WITHOUT_GPU();
  Rng rng(72);
  const int64_t n = 3000017;
  Tensor g = on_device(random_f32({n}, rng));
  Tensor sum_sq = Tensor::empty({2}, DType::f64, Device::cuda);
  cuda::sum_squares(sum_sq.data<double>(), g.data<float>(), n);
  cuda::sum_squares(sum_sq.data<double>() + 1, g.data<float>(), n);
  Tensor s = on_host(sum_sq);
  EXPECT_EQ(std::memcmp(s.data<double>(), s.data<double>() + 1, sizeof(double)), 0)
      << s.data<double>()[0] << " vs " << s.data<double>()[1];
  EXPECT_NEAR(s.data<double>()[0], double(n) / 3.0, 0.01 * double(n) / 3.0);  // E[u^2] = 1/3 on [-1, 1]
}

}  // namespace
}  // namespace linattn
