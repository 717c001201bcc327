// CUDA gradient norm, clipping and AdamW, through the backend table's CUDA entries, against the
// CPU optimizer (train/optimizer.h) on the same flat buffers.
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
  Rng rng(71);
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    rng.fill_uniform(params.grads().all(), -1, 1);
    Tensor gd = on_device(params.grads().all());

    const double got_norm = std::sqrt(backend::sum_squares(Device::cuda, gd)), want_norm = grad_norm(params);
    EXPECT_NEAR(got_norm, want_norm, kNormTol * want_norm);

    const double clip = 0.5;  // every step clips: the norm of ~6e5 uniform entries is ~450
    backend::scale_inplace(Device::cuda, gd, clip / want_norm);
    scale_grads(params, clip / want_norm);
    EXPECT_CLOSE(on_host(gd), params.grads().all(), 0.0);

    // The step's constants as AdamW::step makes them.
    const double lr = 1e-2 * double(step);
    backend::AdamWStep s{config.beta1, config.beta2, config.adam_eps, lr / (1.0 - std::pow(config.beta1, double(step))),
                         1.0 / (1.0 - std::pow(config.beta2, double(step))), 0.0};
    cpu_adam.step(lr);
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t begin = params.layout().entries()[i].offset, end = begin + params[int(i)].value().numel();
      s.decay = params.weight_decay(int(i)) ? lr * config.weight_decay : 0.0;
      backend::adamw_step(Device::cuda, wd.narrow(begin, end), gd.narrow(begin, end), md.narrow(begin, end),
                          vd.narrow(begin, end), s);
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
