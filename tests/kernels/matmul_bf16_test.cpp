// The CPU's bfloat16 products (cpu::gemm_bf16 on AVX512-BF16/AMX, cpu::gemm_bf16_widened elsewhere,
// and the gemm entry on bf16 operands) and the convert entry, against float64. The bounds and their
// basis: tests/gemm_bf16_reference.h.
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "gemm_bf16_reference.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::HostMatrix;
using testing::round_bf16;

HostMatrix random_matrix(int64_t rows, int64_t cols, int64_t ld, Rng& rng, bool bf16_exact) {
  HostMatrix m{rows, cols, ld, std::vector<float>(size_t(rows * ld), NAN)};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float x = float(rng.uniform(-1, 1));
      m.data[size_t(i * ld + j)] = bf16_exact ? round_bf16(x) : x;
    }
  return m;
}

using Bf16Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const bfloat16*, int64_t, const bfloat16*,
                          int64_t, float, float*, int64_t);

// from_float against hand-worked cases: bf16 keeps 7 mantissa bits, so at 1 its spacing is 2^-7.
TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(round_bf16(1.0f + 0x1.0p-8f), 1.0f);                          // a tie, to the even 1
  EXPECT_EQ(round_bf16(1.0f + 3 * 0x1.0p-8f), 1.0f + 0x1.0p-6f);          // a tie, to the even 1 + 2^-6
  EXPECT_EQ(round_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 1.0f + 0x1.0p-7f);  // above the tie
  EXPECT_EQ(round_bf16(-1.0f - 0x1.0p-9f), -1.0f);                        // below it
  EXPECT_EQ(round_bf16(0x1.0p-130f), 0x1.0p-130f);                        // a subnormal, exact
  EXPECT_EQ(round_bf16(INFINITY), INFINITY);
  EXPECT_EQ(round_bf16(3.4e38f), INFINITY);  // above bf16's largest finite value, 0x1.fep127
  EXPECT_TRUE(std::isnan(round_bf16(NAN)));
}

// Every transpose, sizes off any tile (and an empty sum, K = 0), leading dimensions above the column
// counts, and alpha/beta (beta = 0 with NaN in C: C is not read), for oneDNN's bf16 matmul (where
// this CPU has it) and the widened fallback (everywhere), against float64 on the bf16 operands.
TEST(GemmBf16, AllTransposesAgainstFloat64OnTheBf16Operands) {
  struct Kernel {
    const char* name;
    Bf16Gemm f;
  };
  std::vector<Kernel> kernels{{"gemm_bf16_widened", &cpu::gemm_bf16_widened}};
  if (backend::cpu_bf16_unavailable().empty()) kernels.push_back({"gemm_bf16 (oneDNN)", &cpu::gemm_bf16});
  else std::printf("oneDNN's bf16 matmul not tested: %s\n", backend::cpu_bf16_unavailable().c_str());
  struct Size { int64_t M, N, K; };
  struct Scale { float alpha, beta; };
  for (const Kernel& kernel : kernels) {
    Rng rng(11);
    double worst = 0;
    for (Size s : {Size{37, 29, 41}, Size{131, 67, 259}, Size{1, 45, 17}, Size{64, 1, 3}, Size{5, 4, 0}})
      for (Scale sc : {Scale{1, 0}, Scale{2, 0.5f}, Scale{-0.75f, 1}})
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            const int64_t M = s.M, N = s.N, K = s.K;
            const HostMatrix a = ta ? random_matrix(K, M, M + 3, rng, true) : random_matrix(M, K, K + 5, rng, true);
            const HostMatrix b = tb ? random_matrix(N, K, K + 2, rng, true) : random_matrix(K, N, N + 7, rng, true);
            HostMatrix c = random_matrix(M, N, N + 1, rng, false);
            if (sc.beta == 0)
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < N; ++j) c.data[size_t(i * c.ld + j)] = NAN;
            const testing::GemmReference want = testing::gemm_reference(ta, tb, M, N, K, sc.alpha, a, b, sc.beta, c, 0);
            const std::vector<bfloat16> a16 = a.bf16(), b16 = b.bf16();
            kernel.f(ta, tb, M, N, K, sc.alpha, a16.data(), a.ld, b16.data(), b.ld, sc.beta, c.data.data(), c.ld);
            const testing::WorstEntry w = testing::worst_entry(c, want);
            worst = std::max(worst, w.ratio);
            EXPECT_LE(w.ratio, 1.0) << kernel.name << " M=" << M << " N=" << N << " K=" << K << " trans_a=" << ta
                                    << " trans_b=" << tb << " alpha=" << sc.alpha << " beta=" << sc.beta
                                    << ": error " << w.error << " over the bound " << w.bound;
            for (int64_t i = 0; i < M; ++i)  // the padding of C is untouched
              EXPECT_TRUE(std::isnan(c.data[size_t(i * c.ld + N)])) << kernel.name << " row " << i;
          }
    std::printf("%s: worst error %.2f of the (K + 2) u bound\n", kernel.name, worst);
  }
}

// What a bf16 linear layer computes: float32 operands converted once (the convert entry), then the
// gemm entry on the bf16 tensors, against float64 on the float32 operands: within 2^-8 per product
// (the rounding of both operands) plus float32's accumulation. And not float32 in disguise: the
// error is far above float32's own bound.
TEST(GemmBf16, ConvertThenGemmAgainstFloat64OnTheFloat32Operands) {
  Rng rng(12);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t M = 48, N = 40, K = 96;
      const HostMatrix a = ta ? random_matrix(K, M, M, rng, false) : random_matrix(M, K, K, rng, false);
      const HostMatrix b = tb ? random_matrix(N, K, K, rng, false) : random_matrix(K, N, N, rng, false);
      HostMatrix c{M, N, N, std::vector<float>(size_t(M * N), NAN)};
      Tensor a32 = Tensor::empty({a.rows, a.cols}, DType::f32), b32 = Tensor::empty({b.rows, b.cols}, DType::f32);
      std::copy(a.data.begin(), a.data.end(), a32.data<float>());
      std::copy(b.data.begin(), b.data.end(), b32.data<float>());
      Tensor a16 = Tensor::empty(a32.shape(), DType::bf16), b16 = Tensor::empty(b32.shape(), DType::bf16);
      Tensor c32 = Tensor::empty({M, N}, DType::f32);
      backend::convert(Device::cpu, a16, a32);
      backend::convert(Device::cpu, b16, b32);
      backend::gemm(Device::cpu, ta, tb, M, N, K, 1.0, a16, b16, 0.0, c32);
      std::copy(c32.data<float>(), c32.data<float>() + M * N, c.data.begin());
      const testing::WorstEntry bf16 =
          testing::worst_entry(c, testing::gemm_reference(ta, tb, M, N, K, 1, a, b, 0, c, testing::kBf16ProductRounding));
      const testing::WorstEntry as_f32 = testing::worst_entry(c, testing::gemm_reference(ta, tb, M, N, K, 1, a, b, 0, c, 0));
      EXPECT_LE(bf16.ratio, 1.0) << "trans_a=" << ta << " trans_b=" << tb << ": error " << bf16.error
                                 << " over the bound " << bf16.bound;
      EXPECT_GT(as_f32.ratio, 100.0) << "error " << as_f32.error << " against float32's bound " << as_f32.bound
                                     << ": were the operands rounded?";
      std::printf("trans_a=%d trans_b=%d: worst error %.3f of the 2^-8-per-product bound (%.0f times float32's)\n",
                  ta, tb, bf16.ratio, as_f32.ratio);
    }
}

// The gemm entry follows its operands: bf16 tensors give gemm_bf16's result bit for bit; float32
// ones give float32's, whatever backend::matmul_precision() says (nothing is converted per call:
// bf16 products take bf16 operands), and convert nothing.
TEST(GemmBf16, TheEntryFollowsTheOperandDtype) {
  Rng rng(13);
  const int64_t M = 19, N = 23, K = 31;
  Tensor a = testing::random_tensor({K, M}, rng, -1, 1, DType::f32), b = testing::random_tensor({K, N}, rng, -1, 1,
                                                                                               DType::f32);
  Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  Tensor c = Tensor::zeros({M, N}, DType::f32), c16 = Tensor::zeros({M, N}, DType::f32),
         c32 = Tensor::zeros({M, N}, DType::f32), cf = Tensor::zeros({M, N}, DType::f32);
  struct Restore {
    ~Restore() { backend::set_matmul_precision(MatmulPrecision::f32); }
  } restore;
  backend::set_matmul_precision(MatmulPrecision::bf16);
  backend::ConversionLog log;
  backend::gemm(Device::cpu, true, false, M, N, K, 1.0, a16, b16, 0.0, c);
  backend::gemm(Device::cpu, true, false, M, N, K, 1.0, a, b, 0.0, cf);
  EXPECT_TRUE(log.entries().empty()) << log.entries().size() << " conversions by the gemm entry";
  cpu::gemm_bf16(true, false, M, N, K, 1.0f, a16.data<bfloat16>(), M, b16.data<bfloat16>(), N, 0.0f,
                 c16.data<float>(), N);
  cpu::gemm<float>(true, false, M, N, K, 1.0f, a.data<float>(), M, b.data<float>(), N, 0.0f, c32.data<float>(), N);
  int same16 = 0, same32 = 0, f32_same = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    same16 += c.data<float>()[i] == c16.data<float>()[i];
    same32 += c.data<float>()[i] == c32.data<float>()[i];
    f32_same += cf.data<float>()[i] == c32.data<float>()[i];
  }
  EXPECT_EQ(same16, M * N) << "the entry on bf16 operands differs from gemm_bf16";
  EXPECT_LT(same32, M * N / 2) << "the entry on bf16 operands matches float32 on " << same32 << " of " << M * N;
  EXPECT_EQ(f32_same, M * N) << "the entry on float32 operands under precision bf16 is not float32's product";
}

TEST(GemmBf16, MixedOperandsAreRefusedNamingThem) {
  Tensor a = Tensor::zeros({2, 3}, DType::bf16), b = Tensor::zeros({3, 4}, DType::f32), c = Tensor::zeros({2, 4}, DType::f32);
  const std::string e = testing::error_of([&] { backend::gemm(Device::cpu, false, false, 2, 4, 3, 1.0, a, b, 0.0, c); });
  EXPECT_NE(e.find("gemm: operands bf16[2, 3] and f32[3, 4] into f32[2, 4]: A and B must share a floating dtype"),
            std::string::npos)
      << e;
  Tensor b16 = Tensor::zeros({3, 4}, DType::bf16), c16 = Tensor::zeros({2, 4}, DType::bf16);
  const std::string e2 =
      testing::error_of([&] { backend::gemm(Device::cpu, false, false, 2, 4, 3, 1.0, a, b16, 1.0, c16); });
  EXPECT_NE(e2.find("gemm: a bf16 result bf16[2, 4] with beta = 1: a bf16 C is written, never added into"),
            std::string::npos)
      << e2;
  Tensor a32 = Tensor::zeros({2, 3}, DType::f32), b32 = Tensor::zeros({3, 4}, DType::f32);
  const std::string e3 =
      testing::error_of([&] { backend::gemm(Device::cpu, false, false, 2, 4, 3, 1.0, a32, b32, 0.0, c16); });
  EXPECT_NE(e3.find("C be f64 for f64 operands, f32 otherwise (or bf16 for bf16 operands)"), std::string::npos)
      << e3;
}

// How many bf16 steps apart a and b are (finite values of one sign, or zeros).
int bf16_steps(bfloat16 a, bfloat16 b) {
  const auto ordered = [](bfloat16 x) { return x.bits & 0x8000 ? -int(x.bits & 0x7fff) : int(x.bits); };
  return std::abs(ordered(a) - ordered(b));
}

// A bf16 result (beta = 0): the float32 sums rounded once as they are written. gemm_bf16 into bf16
// against gemm_bf16 into float32, rounded: the widened fallback rounds that very result (0 steps);
// oneDNN's bf16 destination may sum in another order than its float32 one, so within one bf16 step,
// and most entries equal. The padding of C is untouched.
TEST(GemmBf16, ABf16ResultIsTheFloat32SumRounded) {
  Rng rng(14);
  int64_t entries = 0, equal = 0;
  struct Size { int64_t M, N, K; };
  for (Size s : {Size{37, 29, 41}, Size{131, 67, 259}, Size{1, 45, 17}, Size{5, 4, 0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t M = s.M, N = s.N, K = s.K, ldc = N + 3;
        const HostMatrix a = ta ? random_matrix(K, M, M, rng, true) : random_matrix(M, K, K, rng, true);
        const HostMatrix b = tb ? random_matrix(N, K, K, rng, true) : random_matrix(K, N, N, rng, true);
        const std::vector<bfloat16> a16 = a.bf16(), b16 = b.bf16();
        std::vector<float> c32(size_t(M * N), NAN);
        std::vector<bfloat16> c16(size_t(M * ldc), from_float(NAN));
        cpu::gemm_bf16(ta, tb, M, N, K, 0.5f, a16.data(), a.ld, b16.data(), b.ld, 0.0f, c32.data(), N);
        cpu::gemm_bf16(ta, tb, M, N, K, 0.5f, a16.data(), a.ld, b16.data(), b.ld, c16.data(), ldc);
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j) {
            const bfloat16 got = c16[size_t(i * ldc + j)], want = from_float(c32[size_t(i * N + j)]);
            const int steps = bf16_steps(got, want);
            EXPECT_LE(steps, backend::cpu_bf16_unavailable().empty() ? 1 : 0)
                << "M=" << M << " N=" << N << " K=" << K << " trans_a=" << ta << " trans_b=" << tb << " [" << i
                << ", " << j << "]: " << to_float(got) << " for " << c32[size_t(i * N + j)];
            ++entries, equal += steps == 0;
          }
          for (int64_t j = N; j < ldc; ++j) EXPECT_TRUE(std::isnan(to_float(c16[size_t(i * ldc + j)])));
        }
      }
  EXPECT_GE(equal, entries * 9 / 10) << equal << " of " << entries << " entries are the float32 sum rounded";
  std::printf("%ld of %ld entries are the float32 sum rounded, the rest one bf16 step from it\n", long(equal),
              long(entries));
  // the entry: a bf16 C takes the same path
  Tensor a = testing::random_tensor({31, 19}, rng, -1, 1, DType::f32).to(DType::bf16);
  Tensor b = testing::random_tensor({31, 23}, rng, -1, 1, DType::f32).to(DType::bf16);
  Tensor c = Tensor::zeros({19, 23}, DType::bf16);
  backend::gemm(Device::cpu, true, false, 19, 23, 31, 1.0, a, b, 0.0, c);
  std::vector<bfloat16> want(19 * 23);
  cpu::gemm_bf16(true, false, 19, 23, 31, 1.0f, a.data<bfloat16>(), 19, b.data<bfloat16>(), 23, want.data(), 23);
  for (int64_t i = 0; i < c.numel(); ++i) EXPECT_EQ(c.data<bfloat16>()[i].bits, want[size_t(i)].bits) << i;
}

// The convert entry: float32 -> bf16 is from_float bit for bit (ties to even, NaN stays NaN,
// overflow to infinity); bf16 -> float32 is exact; each call is logged with what it read.
TEST(Convert, Float32ToBf16AndBackAgainstTheScalarRounding) {
  Rng rng(14);
  Tensor x = testing::random_tensor({3, 1000}, rng, -100, 100, DType::f32);
  const float special[] = {1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-8f, -1.0f - 0x1.0p-9f, 0x1.0p-130f, 3.4e38f,
                           -INFINITY, NAN, 0.0f, -0.0f};
  std::copy(std::begin(special), std::end(special), x.data<float>());
  Tensor y = Tensor::empty(x.shape(), DType::bf16), back = Tensor::empty(x.shape(), DType::f32);
  backend::ConversionLog log;
  backend::convert(Device::cpu, y, x);
  backend::convert(Device::cpu, back, y);
  int64_t bits_differ = 0, not_exact = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bits_differ += y.data<bfloat16>()[i].bits != from_float(x.data<float>()[i]).bits;
    const float want = to_float(y.data<bfloat16>()[i]), got = back.data<float>()[i];
    not_exact += !(got == want || (std::isnan(got) && std::isnan(want)));
  }
  EXPECT_EQ(bits_differ, 0);
  EXPECT_EQ(not_exact, 0);
  const std::vector<backend::ConversionLog::Entry> e = log.entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].from, x.raw());
  EXPECT_EQ(e[0].n, x.numel());
  EXPECT_EQ(e[0].to_dtype, DType::bf16);
  EXPECT_EQ(e[1].from, y.raw());
  EXPECT_EQ(e[1].to_dtype, DType::f32);
  const std::string err = testing::error_of([&] { backend::convert(Device::cpu, back, x); });
  EXPECT_NE(err.find("convert: f32[3, 1000] into f32[3, 1000]"), std::string::npos) << err;
}

}  // namespace
}  // namespace linattn
