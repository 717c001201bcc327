// The CUDA Gated DeltaNet log-decay entries (kernels/cuda/gdn_decay.h) against the CPU entries in
// float64, through the backend table.
#include "kernel_testing.h"
#include "kernels/backend.h"

namespace linattn {
namespace {

using namespace testing;

// Tolerance basis, relative to the largest reference entry: a and dx are a few float32 operations
// on exp, log1p and sigmoid (each within a few ulp); dA_log and ddt_bias sums of rows <= 1000 terms
// in chunks of ~256 split in 16 lanes, plus the chunks: within ~100 ulp, so 1e-5.
constexpr double kTol = 1e-5;

TEST(CudaGdnDecay, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t B, T, H;
  };
  // One token and one head; rows (B*T) not a multiple of the 16 lanes or of the ~256-row chunks;
  // more heads than one 32-head tile.
  const Case cases[] = {{1, 1, 1}, {2, 7, 4}, {4, 250, 6}, {1, 37, 33}};
  Rng rng(45);
  for (auto [B, T, H] : cases) {
    SCOPED_TRACE("B = " + std::to_string(B) + ", T = " + std::to_string(T) + ", H = " + std::to_string(H));
    // x spans both branches of softplus and its large-|s| tails; A_log as fla initializes it (log 1..16).
    Tensor x = random_f32({B, T, H}, rng, -8, 8), A_log = random_f32({H}, rng, 0, 2.77);
    Tensor dt_bias = random_f32({H}, rng, -4, 1), da = random_f32({B, T, H}, rng);
    Tensor dx0 = random_f32({B, T, H}, rng), dA0 = random_f32({H}, rng), ddt0 = random_f32({H}, rng);
    Tensor xd = on_device(x), A_logd = on_device(A_log), dt_biasd = on_device(dt_bias), dad = on_device(da);
    Tensor a = Tensor::empty({B, T, H}, DType::f32, Device::cuda);
    Tensor dx = on_device(dx0), dA = on_device(dA0), ddt = on_device(ddt0);
    backend::gdn_decay_forward(Device::cuda, a, xd, A_logd, dt_biasd);
    backend::gdn_decay_backward(Device::cuda, dx, dA, ddt, xd, A_logd, dt_biasd, dad);

    Tensor want_a = Tensor::empty({B, T, H}, DType::f64), want_dx = f64(dx0), want_dA = f64(dA0), want_ddt = f64(ddt0);
    backend::gdn_decay_forward(Device::cpu, want_a, f64(x), f64(A_log), f64(dt_bias));
    backend::gdn_decay_backward(Device::cpu, want_dx, want_dA, want_ddt, f64(x), f64(A_log), f64(dt_bias), f64(da));
    EXPECT_CLOSE(on_host(a), want_a, kTol);
    EXPECT_CLOSE(on_host(dx), want_dx, kTol);
    EXPECT_CLOSE(on_host(dA), want_dA, kTol);
    EXPECT_CLOSE(on_host(ddt), want_ddt, kTol);

    // Gradients nobody needs (undefined): only dA_log, then only ddt_bias.
    backend::gdn_decay_backward(Device::cuda, Tensor(), dA, Tensor(), xd, A_logd, dt_biasd, dad);
    backend::gdn_decay_backward(Device::cpu, Tensor(), want_dA, Tensor(), f64(x), f64(A_log), f64(dt_bias), f64(da));
    backend::gdn_decay_backward(Device::cuda, Tensor(), Tensor(), ddt, xd, A_logd, dt_biasd, dad);
    backend::gdn_decay_backward(Device::cpu, Tensor(), Tensor(), want_ddt, f64(x), f64(A_log), f64(dt_bias), f64(da));
    EXPECT_CLOSE(on_host(dA), want_dA, kTol);
    EXPECT_CLOSE(on_host(ddt), want_ddt, kTol);
  }
}

// The parameter gradients are column sums without atomics: two runs give the same bits.
TEST(CudaGdnDecay, TheGradientsAreDeterministic) {
  SKIP_WITHOUT_GPU();
  Rng rng(46);
  const int64_t rows = 8 * 2048, H = 16;
  Tensor x = on_device(random_f32({rows, H}, rng, -4, 4)), da = on_device(random_f32({rows, H}, rng));
  Tensor A_log = on_device(random_f32({H}, rng, 0, 2.77)), dt_bias = on_device(random_f32({H}, rng, -4, 1));
  Tensor got[2][2];
  for (auto& g : got) {
    g[0] = Tensor::zeros({H}, DType::f32, Device::cuda);
    g[1] = Tensor::zeros({H}, DType::f32, Device::cuda);
    backend::gdn_decay_backward(Device::cuda, Tensor(), g[0], g[1], x, A_log, dt_bias, da);
  }
  for (int i = 0; i < 2; ++i) {
    Tensor first = on_host(got[0][i]), second = on_host(got[1][i]);
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(first.data<float>()[h], second.data<float>()[h]) << "head " << h;
  }
}

}  // namespace
}  // namespace linattn
