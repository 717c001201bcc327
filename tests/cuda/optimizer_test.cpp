// CUDA gradient norm, clipping and AdamW against the CPU optimizer (train/optimizer.h) on the
// same flat buffers.
#include "kernels/cuda/optimizer.h"

#include <cmath>
#include <cstring>

#include "kernels/cuda/elementwise.h"
#include "kernel_testing.h"
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
// error ~1e-13 for 6e5 terms; 1e-12. Clipping: one float32 product, equal bits. AdamW: the kernel
// rounds each operation separately; the CPU loop, built with -march=native, lets GCC contract
// products into FMAs, which moves a result by an ulp here and there: over three steps that measured
// at most 1.2e-7 relative to the largest entry (CPU loop against an unfused one); 5e-7 is 4 ulp.
constexpr double kNormTol = 1e-12;
constexpr double kAdamTol = 5e-7;

TEST(CudaOptimizer, GradNormClippingAndAdamWMatchTheCpuOptimizer) {
  SKIP_WITHOUT_GPU();
  Parameters params = make_parameters();
  TrainConfig config;
  AdamW cpu_adam(params, config);
  const Tensor& w = params.values().all();
  const int64_t n = w.numel();
  Tensor wd = on_device(w), md = on_device(Tensor::zeros({n}, DType::f32)), vd = on_device(Tensor::zeros({n}, DType::f32));
  Tensor sum_sq = Tensor::empty({1}, DType::f64, Device::cuda);
  Rng rng(71);
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    rng.fill_uniform(params.grads().all(), -1, 1);
    Tensor gd = on_device(params.grads().all());

    cuda::sum_squares(sum_sq.data<double>(), gd.data<float>(), n);
    const double got_norm = std::sqrt(on_host(sum_sq).data<double>()[0]), want_norm = grad_norm(params);
    EXPECT_NEAR(got_norm, want_norm, kNormTol * want_norm);

    const double clip = 0.5;  // every step clips: the norm of ~6e5 uniform entries is ~450
    cuda::scale_forward(gd.data<float>(), gd.data<float>(), float(clip / want_norm), n);
    scale_grads(params, clip / want_norm);
    EXPECT_CLOSE(on_host(gd), params.grads().all(), 0.0);

    const double lr = 1e-2 * double(step);
    cpu_adam.step(lr);
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t offset = params.layout().entries()[i].offset, count = params[int(i)].value().numel();
      const cuda::AdamWStep s = cuda::adamw_step_constants(lr, config.beta1, config.beta2, config.adam_eps,
                                                           config.weight_decay, step, params.weight_decay(int(i)));
      cuda::adamw_update(wd.data<float>() + offset, md.data<float>() + offset, vd.data<float>() + offset,
                         gd.data<float>() + offset, count, s);
    }
    EXPECT_CLOSE(on_host(wd), w, kAdamTol);
    EXPECT_CLOSE(on_host(md), cpu_adam.m().all(), kAdamTol);
    EXPECT_CLOSE(on_host(vd), cpu_adam.v().all(), kAdamTol);
  }
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
