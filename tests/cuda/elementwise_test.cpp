// CUDA pointwise kernels against the CPU kernels (kernels/cpu/elementwise.h).
#include "kernels/cuda/elementwise.h"

#include "kernels/cpu/elementwise.h"
#include "kernel_testing.h"

namespace linattn {
namespace {

using namespace testing;

// n = 1, a partial block, several blocks with a partial last one.
const int64_t kSizes[] = {1, 257, 100003};

// Tolerance basis, relative to the largest reference entry: add and mul round once, like float64
// rounded to float32 (half an ulp, 2^-24 ~ 6e-8); the activations add expf/log1pf (CUDA: at most
// 2 ulp) and up to 5 roundings, so at most ~8 ulp of float32 (~1e-6).
constexpr double kExact = 1e-7;
constexpr double kTranscendental = 1e-6;

TEST(CudaElementwise, AddMulScaleAxpyMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(11);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Tensor a = random_f32({n}, rng), b = random_f32({n}, rng), y0 = random_f32({n}, rng);
    Tensor da = on_device(a), db = on_device(b), dy = on_device(y0);
    Tensor want = Tensor::empty({n}, DType::f64);

    cuda::add_forward(dy.data<float>(), da.data<float>(), db.data<float>(), n);
    cpu::add_forward(want.data<double>(), f64(a).data<double>(), f64(b).data<double>(), n);
    EXPECT_CLOSE(on_host(dy), want, kExact);

    cuda::mul_forward(dy.data<float>(), da.data<float>(), db.data<float>(), n);
    cpu::mul_forward(want.data<double>(), f64(a).data<double>(), f64(b).data<double>(), n);
    EXPECT_CLOSE(on_host(dy), want, kExact);

    cuda::scale_forward(dy.data<float>(), da.data<float>(), 0.37f, n);
    cpu::scale_forward(want.data<double>(), f64(a).data<double>(), double(0.37f), n);
    EXPECT_CLOSE(on_host(dy), want, kExact);

    // accumulating kernels start from random outputs
    Tensor acc = on_device(y0), want_acc = f64(y0);
    cuda::add_inplace(acc.data<float>(), da.data<float>(), n);
    cpu::add_inplace(want_acc.data<double>(), f64(a).data<double>(), n);
    cuda::axpy(acc.data<float>(), -1.5f, db.data<float>(), n);
    cpu::axpy(want_acc.data<double>(), -1.5, f64(b).data<double>(), n);
    EXPECT_CLOSE(on_host(acc), want_acc, 4 * kExact);  // three roundings

    Tensor g = random_f32({n}, rng), gd = on_device(g);
    Tensor ga = on_device(y0), gb = on_device(a);
    Tensor want_ga = f64(y0), want_gb = f64(a);
    cuda::mul_backward(ga.data<float>(), gb.data<float>(), da.data<float>(), db.data<float>(), gd.data<float>(), n);
    cpu::mul_backward(want_ga.data<double>(), want_gb.data<double>(), f64(a).data<double>(), f64(b).data<double>(),
                      f64(g).data<double>(), n);
    EXPECT_CLOSE(on_host(ga), want_ga, 4 * kExact);
    EXPECT_CLOSE(on_host(gb), want_gb, 4 * kExact);
  }
}

TEST(CudaElementwise, ActivationsForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(12);
  for (Activation f : {Activation::silu, Activation::sigmoid, Activation::logsigmoid, Activation::elu1,
                       Activation::relu})
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(activation_name(f)) + ", n = " + std::to_string(n));
      // [-20, 20] reaches both branches of logsigmoid and elu1 and the saturated ends of sigmoid.
      Tensor x = random_f32({n}, rng, -20, 20), dy = random_f32({n}, rng), dx0 = random_f32({n}, rng);
      Tensor y = Tensor::empty({n}, DType::f32, Device::cuda), dx = on_device(dx0), xd = on_device(x);
      Tensor dyd = on_device(dy);
      cuda::activation_forward(f, y.data<float>(), xd.data<float>(), n);
      cuda::activation_backward(f, dx.data<float>(), xd.data<float>(), dyd.data<float>(), n);
      Tensor want_y = Tensor::empty({n}, DType::f64), want_dx = f64(dx0);
      cpu::activation_forward(f, want_y.data<double>(), f64(x).data<double>(), n);
      cpu::activation_backward(f, want_dx.data<double>(), f64(x).data<double>(), f64(dy).data<double>(), n);
      EXPECT_CLOSE(on_host(y), want_y, kTranscendental);
      EXPECT_CLOSE(on_host(dx), want_dx, kTranscendental);
    }
}

TEST(CudaElementwise, SwigluForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(13);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Tensor gate = random_f32({n}, rng, -8, 8), up = random_f32({n}, rng, -2, 2), dy = random_f32({n}, rng);
    Tensor dgate0 = random_f32({n}, rng), dup0 = random_f32({n}, rng);
    Tensor y = Tensor::empty({n}, DType::f32, Device::cuda), dgate = on_device(dgate0), dup = on_device(dup0);
    Tensor gd = on_device(gate), ud = on_device(up), dyd = on_device(dy);
    cuda::swiglu_forward(y.data<float>(), gd.data<float>(), ud.data<float>(), n);
    cuda::swiglu_backward(dgate.data<float>(), dup.data<float>(), gd.data<float>(), ud.data<float>(),
                          dyd.data<float>(), n);
    Tensor want_y = Tensor::empty({n}, DType::f64), want_dgate = f64(dgate0), want_dup = f64(dup0);
    cpu::swiglu_forward(want_y.data<double>(), f64(gate).data<double>(), f64(up).data<double>(), n);
    cpu::swiglu_backward(want_dgate.data<double>(), want_dup.data<double>(), f64(gate).data<double>(),
                         f64(up).data<double>(), f64(dy).data<double>(), n);
    EXPECT_CLOSE(on_host(y), want_y, kTranscendental);
    EXPECT_CLOSE(on_host(dgate), want_dgate, kTranscendental);
    EXPECT_CLOSE(on_host(dup), want_dup, kTranscendental);
  }
}

}  // namespace
}  // namespace linattn
