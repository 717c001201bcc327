// CUDA bias (kernels/cuda/bias.h) against the CPU entries in float64: y += bias on every row, dbias
// += the sum of the rows. Runs only where a GPU exists; elsewhere every test skips with the reason.
#include "kernels/cuda/bias.h"

#include "kernels/cpu/entries.h"
#include "kernel_testing.h"

namespace linattn {
namespace {

using namespace testing;

// dbias is a float32 sum of N rows in order: ~N/2 ulp at worst, 1e-5 relative for N <= 1000 here.
constexpr double kTol = 1e-5;

TEST(CudaBias, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(51);
  for (auto [N, out] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {1000, 300}}) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", out = " + std::to_string(out));
    Tensor y = random_f32({N, out}, rng), bias = random_f32({out}, rng), dbias = random_f32({out}, rng);
    Tensor yd = on_device(y), dbd = on_device(dbias);
    cuda::bias_forward(yd.data<float>(), on_device(bias).data<float>(), N, out);
    cuda::bias_backward(dbd.data<float>(), on_device(y).data<float>(), N, out);
    Tensor want_y = f64(y), want_db = f64(dbias);
    cpu::entry::bias_forward(want_y, f64(bias));
    cpu::entry::bias_backward(want_db, f64(y));
    EXPECT_CLOSE(on_host(yd), want_y, kTol);
    EXPECT_CLOSE(on_host(dbd), want_db, kTol);
  }
}

}  // namespace
}  // namespace linattn
