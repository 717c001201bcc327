// CUDA rotary position embedding against the CPU kernel (kernels/cpu/rope.h) in float64.
#include "kernels/cuda/rope.h"

#include "kernels/cpu/rope.h"
#include "kernel_testing.h"

namespace linattn {
namespace {

using namespace testing;

// Tolerance basis, relative to the largest reference entry: the cos/sin are float64 rounded to
// float32 (half an ulp each) and each output is two products and a sum (three roundings), so
// within ~4 ulp of float32; 1e-6 (~8 ulp) has room.
constexpr double kTol = 1e-6;

TEST(CudaRope, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t B, T, H, d, pos_offset;
  };
  // One token at position 0 (no rotation) and deep into a sequence; head dims 2 and 64; T, H odd;
  // an offset as in decoding; a long sequence (large angles).
  const Case cases[] = {{1, 1, 1, 2, 0}, {1, 1, 3, 64, 777}, {2, 37, 3, 64, 0}, {3, 5, 2, 6, 11}, {1, 4099, 1, 128, 0}};
  Rng rng(51);
  for (auto [B, T, H, d, pos] : cases) {
    SCOPED_TRACE("B = " + std::to_string(B) + ", T = " + std::to_string(T) + ", H = " + std::to_string(H) +
                 ", d = " + std::to_string(d) + ", pos_offset = " + std::to_string(pos));
    Tensor x = random_f32({B, T, H, d}, rng), dy = random_f32({B, T, H, d}, rng), dx0 = random_f32({B, T, H, d}, rng);
    Tensor xd = on_device(x), dyd = on_device(dy), dx = on_device(dx0);
    Tensor y = Tensor::empty({B, T, H, d}, DType::f32, Device::cuda);
    cuda::rope_forward(y.data<float>(), xd.data<float>(), B, T, H, d, pos);
    cuda::rope_backward(dx.data<float>(), dyd.data<float>(), B, T, H, d, pos);
    Tensor want_y = Tensor::empty({B, T, H, d}, DType::f64), want_dx = f64(dx0);
    cpu::rope_forward(want_y.data<double>(), f64(x).data<double>(), B, T, H, d, pos);
    cpu::rope_backward(want_dx.data<double>(), f64(dy).data<double>(), B, T, H, d, pos);
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);

    // In place (y == x), as the attention layer rotates q and k.
    cuda::rope_forward(xd.data<float>(), xd.data<float>(), B, T, H, d, pos);
    EXPECT_CLOSE(on_host(xd), want_y, kTol);
  }
}

}  // namespace
}  // namespace linattn
