// The CUDA column's bfloat16 products (the gemm entry on bf16 operands: cuBLAS with CUDA_R_16BF
// inputs, float32 accumulation) and its convert entry, against float64 and against the CPU column.
// The bounds and their basis: tests/gemm_bf16_reference.h. Every test skips without a GPU.
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "gemm_bf16_reference.h"
#include "kernel_testing.h"
#include "kernels/backend.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::HostMatrix;

// A dense [rows, cols] matrix of uniform values in [-1, 1] (bf16 values when bf16_exact).
HostMatrix random_matrix(int64_t rows, int64_t cols, Rng& rng, bool bf16_exact) {
  HostMatrix m{rows, cols, cols, std::vector<float>(size_t(rows * cols))};
  for (float& x : m.data) x = bf16_exact ? testing::round_bf16(float(rng.uniform(-1, 1))) : float(rng.uniform(-1, 1));
  return m;
}

Tensor host_tensor(const HostMatrix& m) {
  Tensor t = Tensor::empty({m.rows, m.cols}, DType::f32);
  std::copy(m.data.begin(), m.data.end(), t.data<float>());
  return t;
}

HostMatrix host_matrix(const Tensor& dev) {
  Tensor t = testing::on_host(dev);
  HostMatrix m{t.size(0), t.size(1), t.size(1), std::vector<float>(size_t(t.numel()))};
  std::copy(t.data<float>(), t.data<float>() + t.numel(), m.data.begin());
  return m;
}

// Every transpose, sizes off any tile, an empty sum (K = 0), alpha and beta (beta = 0 with NaN in C:
// C is not read), on bf16 operands uploaded as they are: within (K + 2) float32 roundings of float64.
TEST(CudaGemmBf16, AllTransposesAgainstFloat64OnTheBf16Operands) {
  SKIP_WITHOUT_GPU();
  Rng rng(21);
  struct Size { int64_t M, N, K; };
  struct Scale { float alpha, beta; };
  double worst = 0;
  for (Size s : {Size{37, 29, 41}, Size{64, 33, 70}, Size{1, 45, 17}, Size{5, 4, 0}})
    for (Scale sc : {Scale{1, 0}, Scale{-0.75f, 1}, Scale{2, 0.5f}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const int64_t M = s.M, N = s.N, K = s.K;
          const HostMatrix a = ta ? random_matrix(K, M, rng, true) : random_matrix(M, K, rng, true);
          const HostMatrix b = tb ? random_matrix(N, K, rng, true) : random_matrix(K, N, rng, true);
          HostMatrix c0 = random_matrix(M, N, rng, false);
          if (sc.beta == 0) std::fill(c0.data.begin(), c0.data.end(), NAN);
          const testing::GemmReference want = testing::gemm_reference(ta, tb, M, N, K, sc.alpha, a, b, sc.beta, c0, 0);
          Tensor c = testing::on_device(host_tensor(c0));
          backend::gemm(Device::cuda, ta, tb, M, N, K, sc.alpha, testing::on_device(host_tensor(a).to(DType::bf16)),
                        testing::on_device(host_tensor(b).to(DType::bf16)), sc.beta, c);
          const testing::WorstEntry w = testing::worst_entry(host_matrix(c), want);
          worst = std::max(worst, w.ratio);
          EXPECT_LE(w.ratio, 1.0) << "M=" << M << " N=" << N << " K=" << K << " trans_a=" << ta << " trans_b=" << tb
                                  << " alpha=" << sc.alpha << " beta=" << sc.beta << ": error " << w.error
                                  << " over the bound " << w.bound;
        }
  std::printf("cuda bf16 gemm: worst error %.2f of the (K + 2) u bound\n", worst);
}

// A bf16 linear layer's path on the device: float32 operands converted there once (the convert
// entry), then the gemm entry, against float64 on the float32 operands: within 2^-8 per product plus
// float32's accumulation, and far outside float32's own bound (the operands were rounded).
TEST(CudaGemmBf16, ConvertThenGemmAgainstFloat64OnTheFloat32Operands) {
  SKIP_WITHOUT_GPU();
  Rng rng(22);
  const int64_t M = 40, N = 24, K = 72;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const HostMatrix a = ta ? random_matrix(K, M, rng, false) : random_matrix(M, K, rng, false);
      const HostMatrix b = tb ? random_matrix(N, K, rng, false) : random_matrix(K, N, rng, false);
      Tensor a32 = testing::on_device(host_tensor(a)), b32 = testing::on_device(host_tensor(b));
      Tensor a16 = Tensor::empty(a32.shape(), DType::bf16, Device::cuda);
      Tensor b16 = Tensor::empty(b32.shape(), DType::bf16, Device::cuda);
      Tensor c = Tensor::empty({M, N}, DType::f32, Device::cuda);
      backend::convert(Device::cuda, a16, a32);
      backend::convert(Device::cuda, b16, b32);
      backend::gemm(Device::cuda, ta, tb, M, N, K, 1.0, a16, b16, 0.0, c);
      const HostMatrix got = host_matrix(c);
      const testing::WorstEntry bf16 = testing::worst_entry(
          got, testing::gemm_reference(ta, tb, M, N, K, 1, a, b, 0, got, testing::kBf16ProductRounding));
      const testing::WorstEntry as_f32 = testing::worst_entry(got, testing::gemm_reference(ta, tb, M, N, K, 1, a, b, 0, got, 0));
      EXPECT_LE(bf16.ratio, 1.0) << "trans_a=" << ta << " trans_b=" << tb << ": error " << bf16.error
                                 << " over the bound " << bf16.bound;
      EXPECT_GT(as_f32.ratio, 100.0) << "error " << as_f32.error << " against float32's bound " << as_f32.bound
                                     << ": were the operands rounded?";
    }
}

// A bf16 result (beta = 0, CUDA_R_16BF C): the float32 sums rounded once as they are written, within
// one bf16 step of the device's float32 result rounded (cuBLAS may sum in another order for another
// C type; the emulation sums alike, so there none differ), and of the CPU's.
TEST(CudaGemmBf16, ABf16ResultIsTheFloat32SumRounded) {
  SKIP_WITHOUT_GPU();
  Rng rng(24);
  int64_t entries = 0, equal = 0;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t M = 37, N = 29, K = 70;
      const HostMatrix ha = ta ? random_matrix(K, M, rng, true) : random_matrix(M, K, rng, true);
      const HostMatrix hb = tb ? random_matrix(N, K, rng, true) : random_matrix(K, N, rng, true);
      const Tensor a = host_tensor(ha).to(DType::bf16), b = host_tensor(hb).to(DType::bf16);
      Tensor c = Tensor::empty({M, N}, DType::bf16, Device::cuda);
      Tensor c32 = Tensor::empty({M, N}, DType::f32, Device::cuda);
      backend::gemm(Device::cuda, ta, tb, M, N, K, 0.5, testing::on_device(a), testing::on_device(b), 0.0, c);
      backend::gemm(Device::cuda, ta, tb, M, N, K, 0.5, testing::on_device(a), testing::on_device(b), 0.0, c32);
      Tensor cpu = Tensor::empty({M, N}, DType::bf16);
      backend::gemm(Device::cpu, ta, tb, M, N, K, 0.5, a, b, 0.0, cpu);
      const Tensor got = testing::on_host(c), sums = testing::on_host(c32);
      for (int64_t i = 0; i < M * N; ++i) {
        const bfloat16 g = got.data<bfloat16>()[i], want = from_float(sums.data<float>()[i]);
        const float gap = std::abs(to_float(g) - to_float(want)), step = std::abs(to_float(want)) * 0x1.0p-7f;
        EXPECT_LE(gap, step) << "trans_a=" << ta << " trans_b=" << tb << " entry " << i;
        EXPECT_LE(std::abs(to_float(g) - to_float(cpu.data<bfloat16>()[i])), 2 * step)
            << "against the CPU, entry " << i;
        ++entries, equal += g.bits == want.bits;
      }
    }
  EXPECT_GE(equal, entries * 9 / 10) << equal << " of " << entries;
  std::printf("cuda bf16 result: %ld of %ld entries the float32 sum rounded\n", long(equal), long(entries));
}

// The device's convert entry gives the CPU's bits (round to nearest even, NaN, infinities, signed
// zeros, subnormals), and back exactly; each call is logged on its device.
TEST(CudaConvert, MatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  Rng rng(23);
  Tensor x = testing::random_f32({2, 777}, rng, -1e3, 1e3);
  const float special[] = {1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-8f, -1.0f - 0x1.0p-9f, 0x1.0p-130f, 3.4e38f,
                           -INFINITY, 0.0f, -0.0f, 0x1.0p-149f};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  Tensor want = Tensor::empty(x.shape(), DType::bf16);
  backend::convert(Device::cpu, want, x);
  Tensor dx = testing::on_device(x), dy = Tensor::empty(x.shape(), DType::bf16, Device::cuda);
  Tensor dback = Tensor::empty(x.shape(), DType::f32, Device::cuda);
  backend::ConversionLog log;
  backend::convert(Device::cuda, dy, dx);
  backend::convert(Device::cuda, dback, dy);
  Tensor y = testing::on_host(dy), back = testing::on_host(dback);
  int64_t bits_differ = 0, not_exact = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bits_differ += y.data<bfloat16>()[i].bits != want.data<bfloat16>()[i].bits;
    not_exact += back.data<float>()[i] != to_float(want.data<bfloat16>()[i]);
  }
  EXPECT_EQ(bits_differ, 0);
  EXPECT_EQ(not_exact, 0);
  const std::vector<backend::ConversionLog::Entry> e = log.entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].device, Device::cuda);
  EXPECT_EQ(e[0].from, dx.raw());
  EXPECT_EQ(e[1].from, dy.raw());
}

}  // namespace
}  // namespace linattn
