#include "kernels/cpu/matmul.h"

#include "kernels/backend.h"

#include "testing.h"

namespace linattn {
namespace {

using testing::random_tensor;

// Reference product with explicit index arithmetic, in float64.
Tensor reference_gemm(bool ta, bool tb, const Tensor& a, const Tensor& b, int64_t M, int64_t N, int64_t K) {
  Tensor c = Tensor::zeros({M, N}, DType::f64);
  Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  const double* A = a64.data<double>();
  const double* B = b64.data<double>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
      c.data<double>()[i * N + j] = s;
    }
  return c;
}

TEST(Gemm, AllTransposesBothTypes) {
  Rng rng(1);
  const int64_t M = 37, N = 29, K = 41;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = random_tensor(ta ? Shape{K, M} : Shape{M, K}, rng);
      Tensor b = random_tensor(tb ? Shape{N, K} : Shape{K, N}, rng);
      Tensor c0 = random_tensor({M, N}, rng);
      Tensor want = reference_gemm(ta, tb, a, b, M, N, K);
      // C = 2 * op(A) op(B) + 0.5 * C
      for (int64_t i = 0; i < M * N; ++i)
        want.data<double>()[i] = 2 * want.data<double>()[i] + 0.5 * c0.data<double>()[i];

      Tensor c64 = c0.clone();
      cpu::gemm<double>(ta, tb, M, N, K, 2.0, a.data<double>(), ta ? M : K, b.data<double>(), tb ? K : N, 0.5,
                        c64.data<double>(), N);
      EXPECT_CLOSE(c64, want, 1e-14);

      Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32), c32 = c0.to(DType::f32);
      cpu::gemm<float>(ta, tb, M, N, K, 2.0f, a32.data<float>(), ta ? M : K, b32.data<float>(), tb ? K : N, 0.5f,
                       c32.data<float>(), N);
      EXPECT_CLOSE(c32, want, 1e-5);  // K=41 float32 products: ~sqrt(K) * 6e-8
    }
}

TEST(Gemm, BetaZeroIgnoresGarbage) {
  Rng rng(2);
  Tensor a = random_tensor({8, 8}, rng), b = random_tensor({8, 8}, rng);
  Tensor c = Tensor::empty({8, 8}, DType::f64);
  c.fill_(NAN);
  cpu::gemm<double>(false, false, 8, 8, 8, 1.0, a.data<double>(), 8, b.data<double>(), 8, 0.0, c.data<double>(), 8);
  EXPECT_CLOSE(c, reference_gemm(false, false, a, b, 8, 8, 8), 1e-14);
}

// The backend's gemm entry takes contiguous row-major tensors and derives the leading dimensions
// from the transposes: every combination against the reference.
TEST(Gemm, BackendEntryDerivesTheLeadingDimensions) {
  Rng rng(4);
  const int64_t M = 5, N = 7, K = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = random_tensor(ta ? Shape{K, M} : Shape{M, K}, rng);
      Tensor b = random_tensor(tb ? Shape{N, K} : Shape{K, N}, rng);
      Tensor c = random_tensor({M, N}, rng);
      Tensor want = reference_gemm(ta, tb, a, b, M, N, K);
      for (int64_t i = 0; i < M * N; ++i) want.data<double>()[i] = 3 * want.data<double>()[i] + c.data<double>()[i];
      backend::gemm(Device::cpu, ta, tb, M, N, K, 3.0, a, b, 1.0, c);
      EXPECT_CLOSE(c, want, 1e-14);
    }
}

}  // namespace
}  // namespace linattn
