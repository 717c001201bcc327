// The CPU's bfloat16 products (cpu::gemm_bf16, and the gemm entry under MatmulPrecision::bf16)
// against float64 on the same bf16-rounded inputs.
//
// The bound: bf16 inputs have 8-bit significands, so each product a_ik b_kj is exact in float32
// (16 bits); what is left is float32 accumulation over K terms, the alpha scale and the beta add,
// at most K + 2 roundings of relative size u = 2^-24 each, whatever the order of the sum. So
//   |c - c_exact| <= (K + 2) u (|alpha| sum_k |a_ik b_kj| + |beta c0_ij|)   (entry by entry).
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "testing.h"

namespace linattn {
namespace {

constexpr double kU = 0x1.0p-24;  // float32's unit roundoff

float round_bf16(float x) { return cpu::bf16_to_float(cpu::bf16_bits(x)); }

// A row-major [rows, cols] matrix stored with leading dimension ld >= cols; the padding is NaN, so
// a product that reads it shows.
struct Matrix {
  int64_t rows, cols, ld;
  std::vector<float> data;
  Matrix(int64_t r, int64_t c, int64_t ld_, Rng& rng, bool bf16_exact) : rows(r), cols(c), ld(ld_) {
    data.assign(size_t(rows * ld), NAN);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const float x = float(rng.uniform(-1, 1));
        data[size_t(i * ld + j)] = bf16_exact ? round_bf16(x) : x;
      }
  }
  float at(int64_t i, int64_t j) const { return data[size_t(i * ld + j)]; }
};

struct Reference {
  std::vector<double> c, bound;  // [M, N] dense
};

// alpha op(A) op(B) + beta C0 in float64 on the inputs as given, and the bound above for each entry.
Reference reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const Matrix& a,
                    const Matrix& b, double beta, const Matrix& c0) {
  Reference r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, s_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? a.at(k, i) : a.at(i, k)) * double(tb ? b.at(j, k) : b.at(k, j));
        s += p;
        s_abs += std::abs(p);
      }
      const double old = beta == 0 ? 0.0 : beta * double(c0.at(i, j));
      r.c[size_t(i * N + j)] = alpha * s + old;
      r.bound[size_t(i * N + j)] = double(K + 2) * kU * (std::abs(alpha) * s_abs + std::abs(old));
    }
  return r;
}

struct Worst {
  double error = 0, bound = 0, ratio = 0;  // the entry with the largest error / bound
};

Worst worst(const Matrix& c, const Reference& r) {
  Worst w;
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) {
      const double e = std::abs(double(c.at(i, j)) - r.c[size_t(i * c.cols + j)]);
      const double b = r.bound[size_t(i * c.cols + j)];
      const double ratio = std::isnan(e) ? INFINITY : e / b;
      if (ratio >= w.ratio) w = {std::isnan(e) ? INFINITY : e, b, ratio};
    }
  return w;
}

#define SKIP_WITHOUT_BF16()                                                           \
  do {                                                                                \
    const std::string why = backend::cpu_bf16_unavailable();                          \
    if (!why.empty()) GTEST_SKIP() << why;                                            \
  } while (0)

// bf16_bits against hand-worked cases: bf16 keeps 7 mantissa bits, so at 1 its spacing is 2^-7.
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
// counts, and alpha/beta (beta = 0 with NaN in C: C is not read).
TEST(GemmBf16, AllTransposesAgainstFloat64OnRoundedInputs) {
  SKIP_WITHOUT_BF16();
  Rng rng(11);
  struct Size { int64_t M, N, K; };
  struct Scale { float alpha, beta; };
  for (Size s : {Size{37, 29, 41}, Size{131, 67, 259}, Size{1, 45, 17}, Size{64, 1, 3}, Size{5, 4, 0}})
    for (Scale sc : {Scale{1, 0}, Scale{2, 0.5f}, Scale{-0.75f, 1}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const int64_t M = s.M, N = s.N, K = s.K;
          const Matrix a = ta ? Matrix(K, M, M + 3, rng, true) : Matrix(M, K, K + 5, rng, true);
          const Matrix b = tb ? Matrix(N, K, K + 2, rng, true) : Matrix(K, N, N + 7, rng, true);
          Matrix c(M, N, N + 1, rng, false);
          if (sc.beta == 0)
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) c.data[size_t(i * c.ld + j)] = NAN;
          const Reference want = reference(ta, tb, M, N, K, sc.alpha, a, b, sc.beta, c);
          cpu::gemm_bf16(ta, tb, M, N, K, sc.alpha, a.data.data(), a.ld, b.data.data(), b.ld, sc.beta, c.data.data(),
                         c.ld);
          const Worst w = worst(c, want);
          EXPECT_LE(w.ratio, 1.0) << "M=" << M << " N=" << N << " K=" << K << " trans_a=" << ta << " trans_b=" << tb
                                  << " alpha=" << sc.alpha << " beta=" << sc.beta << ": error " << w.error
                                  << " over the bound " << w.bound;
          for (int64_t i = 0; i < M; ++i)  // the padding of C is untouched
            EXPECT_TRUE(std::isnan(c.data[size_t(i * c.ld + N)])) << "row " << i;
        }
}

// On inputs that are not bf16 already, the result carries bf16's input rounding (relative 2^-9 per
// input), far above float32's: so bf16 really ran. It still meets the bound on the rounded inputs.
TEST(GemmBf16, RoundsItsInputs) {
  SKIP_WITHOUT_BF16();
  Rng rng(12);
  const int64_t M = 48, N = 40, K = 96;
  const Matrix a(M, K, K, rng, false), b(K, N, N, rng, false);
  Matrix a16 = a, b16 = b;
  for (float& x : a16.data) x = round_bf16(x);
  for (float& x : b16.data) x = round_bf16(x);
  Matrix c(M, N, N, rng, false), c32 = c;
  cpu::gemm_bf16(false, false, M, N, K, 1.0f, a.data.data(), K, b.data.data(), N, 0.0f, c.data.data(), N);
  cpu::gemm<float>(false, false, M, N, K, 1.0f, a.data.data(), K, b.data.data(), N, 0.0f, c32.data.data(), N);
  const Worst rounded = worst(c, reference(false, false, M, N, K, 1, a16, b16, 0, c));
  const Worst exact_bf16 = worst(c, reference(false, false, M, N, K, 1, a, b, 0, c));
  const Worst exact_f32 = worst(c32, reference(false, false, M, N, K, 1, a, b, 0, c));
  EXPECT_LE(rounded.ratio, 1.0) << "error " << rounded.error << " over the bound " << rounded.bound;
  EXPECT_LE(exact_f32.ratio, 1.0) << "float32: error " << exact_f32.error << " over the bound " << exact_f32.bound;
  EXPECT_GT(exact_bf16.ratio, 100.0) << "bf16 against the unrounded inputs: error " << exact_bf16.error
                                     << ", float32's bound " << exact_bf16.bound << ": were the inputs rounded?";
}

// The gemm entry follows backend::matmul_precision(): bf16 gives gemm_bf16's result bit for bit,
// f32 gives gemm<float>'s.
TEST(GemmBf16, TheEntryFollowsTheMatmulPrecision) {
  SKIP_WITHOUT_BF16();
  Rng rng(13);
  const int64_t M = 19, N = 23, K = 31;
  Tensor a = testing::random_tensor({K, M}, rng, -1, 1, DType::f32), b = testing::random_tensor({K, N}, rng, -1, 1,
                                                                                               DType::f32);
  Tensor c = Tensor::zeros({M, N}, DType::f32), c16 = Tensor::zeros({M, N}, DType::f32),
         c32 = Tensor::zeros({M, N}, DType::f32);
  struct Restore {
    ~Restore() { backend::set_matmul_precision(MatmulPrecision::f32); }
  } restore;
  backend::set_matmul_precision(MatmulPrecision::bf16);
  backend::gemm(Device::cpu, true, false, M, N, K, 1.0, a, b, 0.0, c);
  cpu::gemm_bf16(true, false, M, N, K, 1.0f, a.data<float>(), M, b.data<float>(), N, 0.0f, c16.data<float>(), N);
  cpu::gemm<float>(true, false, M, N, K, 1.0f, a.data<float>(), M, b.data<float>(), N, 0.0f, c32.data<float>(), N);
  int same16 = 0, same32 = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    same16 += c.data<float>()[i] == c16.data<float>()[i];
    same32 += c.data<float>()[i] == c32.data<float>()[i];
  }
  EXPECT_EQ(same16, M * N) << "the entry under bf16 differs from gemm_bf16";
  EXPECT_LT(same32, M * N / 2) << "the entry under bf16 matches float32 on " << same32 << " of " << M * N;
}

}  // namespace
}  // namespace linattn
