// The CUDA bias entries (kernels/cuda/bias.h) against the CPU entries in float64, through the
// backend table.
#include "kernel_testing.h"
#include "kernels/backend.h"

namespace linattn {
namespace {

using namespace testing;

// Tolerance basis, relative to the largest reference entry: y is one float32 addition; dbias a sum
// of N <= 1000 terms in chunks of ~256 split in 16 lanes, plus the chunks: within ~100 ulp, so 1e-5.
constexpr double kTol = 1e-5;

TEST(CudaBias, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t N, out;
  };
  // One row; columns not a multiple of the 32-column tile; rows not a multiple of the 16 lanes or of
  // the ~256-row chunks (4 chunks of 250); more than one tile of columns.
  const Case cases[] = {{1, 1}, {3, 5}, {1000, 33}, {77, 130}};
  Rng rng(43);
  for (auto [N, out] : cases) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", out = " + std::to_string(out));
    Tensor y0 = random_f32({N, out}, rng), bias = random_f32({out}, rng), dy = random_f32({N, out}, rng);
    Tensor db0 = random_f32({out}, rng);
    Tensor y = on_device(y0), db = on_device(db0);
    backend::bias_forward(Device::cuda, y, on_device(bias));
    backend::bias_backward(Device::cuda, db, on_device(dy));

    Tensor want_y = f64(y0), want_db = f64(db0);
    backend::bias_forward(Device::cpu, want_y, f64(bias));
    backend::bias_backward(Device::cpu, want_db, f64(dy));
    EXPECT_CLOSE(on_host(y), want_y, kTol);
    EXPECT_CLOSE(on_host(db), want_db, kTol);
  }
}

// The gradient is a column sum without atomics: two runs give the same bits.
TEST(CudaBias, TheGradientIsDeterministic) {
  SKIP_WITHOUT_GPU();
  Rng rng(44);
  Tensor dy = on_device(random_f32({4099, 70}, rng));
  Tensor db1 = Tensor::zeros({70}, DType::f32, Device::cuda), db2 = Tensor::zeros({70}, DType::f32, Device::cuda);
  backend::bias_backward(Device::cuda, db1, dy);
  backend::bias_backward(Device::cuda, db2, dy);
  Tensor h1 = on_host(db1), h2 = on_host(db2);
  for (int64_t j = 0; j < 70; ++j) EXPECT_EQ(h1.data<float>()[j], h2.data<float>()[j]) << "column " << j;
}

}  // namespace
}  // namespace linattn
