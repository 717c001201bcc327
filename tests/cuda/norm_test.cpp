// CUDA RMSNorm and L2 norm against the CPU kernels (kernels/cpu/norm.h) in float64.
#include "kernels/cuda/norm.h"

#include <cstring>

#include "kernels/cpu/norm.h"
#include "kernel_testing.h"

namespace linattn {
namespace {

using namespace testing;

struct RowShape {
  int64_t N, D;
};
// One row, rows shorter than a warp (not of 1 or 2 entries: their backward cancels down to O(eps)
// and float32 keeps too few digits of it for a relative tolerance), D not a multiple of 32, a
// hidden size, N not a multiple of the 8 rows of a block, of the 16 row lanes or the
// ~256-row chunks of the dw reduction (4099 rows: 17 chunks of 242).
const RowShape kShapes[] = {{1, 5}, {1, 768}, {37, 33}, {1000, 129}, {4099, 64}};

// Tolerance basis, relative to the largest reference entry: a row statistic is a float32 sum of D
// squares (error ~ D/32 + 5 roundings in the warp's order, < 30 ulp for D <= 768), and each output
// a few more roundings: 1e-5 (~80 ulp of float32) has room. dw sums N rows in chunks of ~256
// rows, 16 lanes each, then the lanes and the chunks: < N/16 + 16 + 32 terms, within 1e-5 here.
constexpr double kTol = 1e-5;

// RMSNorm's shapes: the rows above as one group, then rows normalized in G groups (Mamba2's gated
// norm): groups of a warp's width, of one past it, and of 8 with many rows.
struct GroupedShape {
  int64_t N, D, G;
};
std::vector<GroupedShape> rmsnorm_shapes() {
  std::vector<GroupedShape> shapes;
  for (auto [N, D] : kShapes) shapes.push_back({N, D, 1});
  for (GroupedShape s : {GroupedShape{37, 96, 3}, GroupedShape{1000, 130, 2}, GroupedShape{4099, 64, 8}})
    shapes.push_back(s);
  return shapes;
}

TEST(CudaNorm, RmsNormForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(21);
  for (auto [N, D, G] : rmsnorm_shapes()) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", D = " + std::to_string(D) + ", G = " + std::to_string(G));
    Tensor x = random_f32({N, D}, rng, -2, 2), w = random_f32({D}, rng, 0.5, 1.5), dy = random_f32({N, D}, rng);
    Tensor dx0 = random_f32({N, D}, rng), dw0 = random_f32({D}, rng);
    const float eps = 1e-6f;
    Tensor xd = on_device(x), wd = on_device(w), dyd = on_device(dy), dx = on_device(dx0), dw = on_device(dw0);
    Tensor y = Tensor::empty({N, D}, DType::f32, Device::cuda), rstd = Tensor::empty({N, G}, DType::f32, Device::cuda);
    cuda::rmsnorm_forward(y.data<float>(), nullptr, nullptr, rstd.data<float>(), xd.data<float>(), wd.data<float>(), N,
                          D, eps, G);
    cuda::rmsnorm_backward(dx.data<float>(), dw.data<float>(), xd.data<float>(), wd.data<float>(), rstd.data<float>(),
                           dyd.data<float>(), dx.data<float>(), N, D, G);

    Tensor want_y = Tensor::empty({N, D}, DType::f64), want_rstd = Tensor::empty({N, G}, DType::f64);
    Tensor want_dx = f64(dx0), want_dw = f64(dw0);
    cpu::rmsnorm_forward(want_y.data<double>(), nullptr, nullptr, want_rstd.data<double>(), f64(x).data<double>(),
                         f64(w).data<double>(), N, D, double(eps), G);
    cpu::rmsnorm_backward(want_dx.data<double>(), nullptr, want_dw.data<double>(), f64(x).data<double>(),
                          f64(w).data<double>(), want_rstd.data<double>(), f64(dy).data<double>(),
                          want_dx.data<double>(), N, D, G);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(rstd), want_rstd, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
    EXPECT_CLOSE(on_host(dw), want_dw, kTol);

    // Without a weight gradient only dx moves (the per-head norm of a frozen weight, say); out of
    // place (dx = prior + ..., over NaNs) it is the same, and the prior is only read.
    Tensor dx2 = on_device(dx0);
    cuda::rmsnorm_backward(dx2.data<float>(), nullptr, xd.data<float>(), wd.data<float>(), rstd.data<float>(),
                           dyd.data<float>(), dx2.data<float>(), N, D, G);
    EXPECT_CLOSE(on_host(dx2), want_dx, kTol);
    Tensor prior = on_device(dx0), dx3 = Tensor::empty({N, D}, DType::f32, Device::cuda);
    dx3.fill_(NAN);
    cuda::rmsnorm_backward(dx3.data<float>(), nullptr, xd.data<float>(), wd.data<float>(), rstd.data<float>(),
                           dyd.data<float>(), prior.data<float>(), N, D, G);
    EXPECT_CLOSE(on_host(dx3), want_dx, kTol);
    EXPECT_EQ(std::memcmp(on_host(prior).raw(), dx0.raw(), size_t(N * D) * sizeof(float)), 0);
  }
}

// The residual sum and its norm in one pass (G = 1), and the backward's dx written (no prior).
TEST(CudaNorm, AddRmsNormAndAWrittenGradientMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(23);
  for (auto [N, D] : kShapes) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", D = " + std::to_string(D));
    Tensor a = random_f32({N, D}, rng, -2, 2), b = random_f32({N, D}, rng), w = random_f32({D}, rng, 0.5, 1.5);
    Tensor dy = random_f32({N, D}, rng);
    const float eps = 1e-6f;
    auto empty = [&](const Shape& shape) {
      Tensor t = Tensor::empty(shape, DType::f32, Device::cuda);
      t.fill_(NAN);
      return t;
    };
    Tensor ad = on_device(a), bd = on_device(b), wd = on_device(w), dyd = on_device(dy);
    Tensor s = empty({N, D}), y = empty({N, D}), rstd = empty({N}), dx = empty({N, D});
    cuda::add_rmsnorm_forward(s.data<float>(), y.data<float>(), nullptr, nullptr, rstd.data<float>(), ad.data<float>(),
                              bd.data<float>(), wd.data<float>(), N, D, eps);
    cuda::rmsnorm_backward(dx.data<float>(), nullptr, s.data<float>(), wd.data<float>(), rstd.data<float>(),
                           dyd.data<float>(), nullptr, N, D);

    Tensor want_s = Tensor::empty({N, D}, DType::f64), want_y = Tensor::empty({N, D}, DType::f64);
    Tensor want_rstd = Tensor::empty({N}, DType::f64), want_dx = Tensor::empty({N, D}, DType::f64);
    cpu::add_rmsnorm_forward(want_s.data<double>(), want_y.data<double>(), nullptr, nullptr, want_rstd.data<double>(),
                             f64(a).data<double>(), f64(b).data<double>(), f64(w).data<double>(), N, D, double(eps));
    cpu::rmsnorm_backward(want_dx.data<double>(), nullptr, static_cast<double*>(nullptr), want_s.data<double>(),
                          f64(w).data<double>(), want_rstd.data<double>(), f64(dy).data<double>(),
                          static_cast<const double*>(nullptr), N, D);
    EXPECT_CLOSE(on_host(s), want_s, kTol);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(rstd), want_rstd, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
  }
}

TEST(CudaNorm, L2NormForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(22);
  for (auto [N, D] : kShapes) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", D = " + std::to_string(D));
    Tensor x = random_f32({N, D}, rng, -2, 2), dy = random_f32({N, D}, rng), dx0 = random_f32({N, D}, rng);
    const float eps = 1e-6f;
    Tensor xd = on_device(x), dyd = on_device(dy), dx = on_device(dx0);
    Tensor y = Tensor::empty({N, D}, DType::f32, Device::cuda), r = Tensor::empty({N}, DType::f32, Device::cuda);
    cuda::l2norm_forward(y.data<float>(), r.data<float>(), xd.data<float>(), N, D, eps);
    cuda::l2norm_backward(dx.data<float>(), y.data<float>(), r.data<float>(), dyd.data<float>(), N, D);

    Tensor want_y = Tensor::empty({N, D}, DType::f64), want_r = Tensor::empty({N}, DType::f64), want_dx = f64(dx0);
    cpu::l2norm_forward(want_y.data<double>(), want_r.data<double>(), f64(x).data<double>(), N, D, double(eps));
    cpu::l2norm_backward(want_dx.data<double>(), want_y.data<double>(), want_r.data<double>(), f64(dy).data<double>(),
                         N, D);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(r), want_r, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
  }
}

}  // namespace
}  // namespace linattn
