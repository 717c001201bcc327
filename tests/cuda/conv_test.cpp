// CUDA causal short convolution against the CPU kernel (kernels/cpu/conv.h) in float64.
#include "kernels/cuda/conv.h"

#include "kernels/cpu/conv.h"
#include "kernel_testing.h"

namespace linattn {
namespace {

using namespace testing;

// Tolerance basis, relative to the largest reference entry: y and dx are sums of W + 1 <= 17
// products, dw and dbias sums over B*T positions in chunks of ~256 split in 16 lanes (<= 80
// terms each for the shapes here, plus 16 lanes and 6 chunks): a float32 sum of k terms is within
// ~k ulp, so 1e-5 (~80 ulp) has room.
constexpr double kTol = 1e-5;

TEST(CudaShortConv, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t B, T, C, W;
  };
  // One token (every tap but the last reads the zero padding); T shorter than W; the default width
  // 4 with C not a multiple of 32; the widest kernel allowed; B*T = 1282 not a multiple of the 16 lanes
  // or of the ~256-position chunks (6 chunks of 214).
  const Case cases[] = {{1, 1, 1, 4}, {2, 3, 5, 4}, {3, 37, 100, 4}, {1, 70, 33, 16}, {2, 641, 64, 1}};
  Rng rng(41);
  for (auto [B, T, C, W] : cases) {
    SCOPED_TRACE("B = " + std::to_string(B) + ", T = " + std::to_string(T) + ", C = " + std::to_string(C) +
                 ", W = " + std::to_string(W));
    Tensor x = random_f32({B, T, C}, rng), w = random_f32({C, W}, rng), bias = random_f32({C}, rng);
    Tensor dy = random_f32({B, T, C}, rng), dx0 = random_f32({B, T, C}, rng), dw0 = random_f32({C, W}, rng);
    Tensor db0 = random_f32({C}, rng);
    Tensor xd = on_device(x), wd = on_device(w), biasd = on_device(bias), dyd = on_device(dy);
    Tensor dx = on_device(dx0), dw = on_device(dw0), db = on_device(db0);
    Tensor y = Tensor::empty({B, T, C}, DType::f32, Device::cuda);
    cuda::short_conv_forward(y.data<float>(), xd.data<float>(), wd.data<float>(), biasd.data<float>(), B, T, C, W);
    cuda::short_conv_backward(dx.data<float>(), dw.data<float>(), db.data<float>(), xd.data<float>(),
                              wd.data<float>(), dyd.data<float>(), B, T, C, W);

    Tensor want_y = Tensor::empty({B, T, C}, DType::f64), want_dx = f64(dx0), want_dw = f64(dw0), want_db = f64(db0);
    cpu::short_conv_forward(want_y.data<double>(), f64(x).data<double>(), f64(w).data<double>(),
                            f64(bias).data<double>(), B, T, C, W);
    cpu::short_conv_backward(want_dx.data<double>(), want_dw.data<double>(), want_db.data<double>(),
                             f64(x).data<double>(), f64(w).data<double>(), f64(dy).data<double>(), B, T, C, W);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
    EXPECT_CLOSE(on_host(dw), want_dw, kTol);
    EXPECT_CLOSE(on_host(db), want_db, kTol);

    // Without a bias: the forward starts from zero and the backward leaves no bias gradient.
    cuda::short_conv_forward(y.data<float>(), xd.data<float>(), wd.data<float>(), nullptr, B, T, C, W);
    cpu::short_conv_forward<double>(want_y.data<double>(), f64(x).data<double>(), f64(w).data<double>(), nullptr, B, T, C,
                            W);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    cuda::short_conv_backward(dx.data<float>(), dw.data<float>(), nullptr, xd.data<float>(), wd.data<float>(),
                              dyd.data<float>(), B, T, C, W);
    cpu::short_conv_backward<double>(want_dx.data<double>(), want_dw.data<double>(), nullptr, f64(x).data<double>(),
                             f64(w).data<double>(), f64(dy).data<double>(), B, T, C, W);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
    EXPECT_CLOSE(on_host(dw), want_dw, kTol);
  }
}

// Checked before any launch, so this runs without a GPU too.
TEST(CudaShortConv, AWidthBeyondTheLimitIsRefused) {
  EXPECT_THROW(cuda::short_conv_forward(nullptr, nullptr, nullptr, nullptr, 1, 1, 1, cuda::kMaxConvWidth + 1),
               linattn::Error);
}

}  // namespace
}  // namespace linattn
