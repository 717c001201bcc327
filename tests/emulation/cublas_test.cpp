// The emulated cuBLAS against a naive host reference. The emulation sums each element in k ascending
// order with one fused multiply-add per step (emulation/include/cublas_v2.h), and so does the
// reference, so results must agree bit for bit: every comparison here has tolerance 0.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_emulation/tf32.h"
#include "kernels/cuda/matmul.h"

namespace {

void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(err));
}

// A device copy of a host vector, complete before anything else runs (the upload is queued on the
// legacy default stream, and products may run on another).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : count_(host.size()) {
    cuda_ok(cudaMalloc(&data_, count_ * sizeof(T)), "cudaMalloc");
    cuda_ok(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  // The contents after all work queued so far has run.
  std::vector<T> read() const {
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<T> host(count_);
    cuda_ok(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// A column-major rows x cols matrix stored with leading dimension ld >= rows, in exactly the elements
// it spans (the last column is not padded, so a product that read past it would fault). The padding
// between columns holds `padding`: NaN in inputs (a product that read it would turn NaN), a marker in
// outputs (a product that wrote it would change it).
template <class T>
struct Matrix {
  int64_t rows, cols, ld;
  std::vector<T> values;

  Matrix(int64_t r, int64_t c, int64_t leading, std::mt19937& rng, T padding)
      : rows(r), cols(c), ld(leading), values(size_t(r == 0 || c == 0 ? 0 : (c - 1) * leading + r), padding) {
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) at(i, j) = T(uniform(rng));
  }
  T& at(int64_t i, int64_t j) { return values[size_t(i + j * ld)]; }
  T at(int64_t i, int64_t j) const { return values[size_t(i + j * ld)]; }
};

template <class T>
T unchanged(T x) {
  return x;
}

// C = alpha op(A) op(B) + beta C, column-major, in the emulation's documented order; `input` is
// applied to every element of A and B first (round_to_tf32 for the TF32 compute type).
template <class T>
void reference_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const Matrix<T>& A,
                    const Matrix<T>& B, T beta, Matrix<T>& C, T (*input)(T) = unchanged<T>) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      T acc = 0;
      for (int64_t l = 0; l < k; ++l)
        acc = std::fma(input(trans_a ? A.at(l, i) : A.at(i, l)), input(trans_b ? B.at(j, l) : B.at(l, j)), acc);
      C.at(i, j) = beta == T(0) ? alpha * acc : std::fma(beta, C.at(i, j), alpha * acc);
    }
}

// Bitwise equality, padding included; on failure the count, the first differing index and the
// largest absolute difference (tolerance 0: the emulation and the reference round identically).
template <class T>
void expect_bitwise_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t differing = 0, first = 0;
  double max_abs = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if (differing++ == 0) first = i;
    max_abs = std::max(max_abs, std::abs(double(got[i]) - double(want[i])));
  }
  EXPECT_EQ(differing, 0u) << what << ": " << differing << " of " << got.size() << " elements differ, first at "
                           << first << " (got " << got[first] << ", want " << want[first] << "), max abs error "
                           << max_abs << ", tolerance 0";
}

const char* op_name(cublasOperation_t op) { return op == CUBLAS_OP_N ? "N" : op == CUBLAS_OP_T ? "T" : "C"; }

class EmulatedCublas : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS); }

  // Runs C = alpha op(A) op(B) + beta C on device copies with cublasGemmEx and returns C as stored.
  template <class T>
  std::vector<T> gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, T alpha, const Matrix<T>& A,
                      const Matrix<T>& B, T beta, const Matrix<T>& C, cublasComputeType_t compute) {
    constexpr cudaDataType type = sizeof(T) == 4 ? CUDA_R_32F : CUDA_R_64F;
    DeviceArray<T> a(A.values), b(B.values), c(C.values);
    cublasStatus_t status = cublasGemmEx(handle_, ta, tb, m, n, k, &alpha, a.get(), type, int(A.ld), b.get(), type,
                                         int(B.ld), &beta, c.get(), type, int(C.ld), compute, CUBLAS_GEMM_DEFAULT);
    EXPECT_EQ(status, CUBLAS_STATUS_SUCCESS) << cublasGetStatusString(status);
    return c.read();
  }

  cublasHandle_t handle_ = nullptr;
};

constexpr cublasOperation_t kOperations[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};

// Every transpose pair on non-square m, n, k with leading dimensions past the minimum; the padding of
// A and B is NaN, so a product that read it would show, and C's padding must stay as it was.
TEST_F(EmulatedCublas, AllTransposesMatchTheNaiveReference) {
  const int m = 7, n = 5, k = 6;
  std::mt19937 rng(1);
  for (cublasOperation_t ta : kOperations)
    for (cublasOperation_t tb : kOperations) {
      bool trans_a = ta != CUBLAS_OP_N, trans_b = tb != CUBLAS_OP_N;
      Matrix<float> A(trans_a ? k : m, trans_a ? m : k, (trans_a ? k : m) + 3, rng, NAN);
      Matrix<float> B(trans_b ? n : k, trans_b ? k : n, (trans_b ? n : k) + 2, rng, NAN);
      Matrix<float> C(m, n, m + 4, rng, 1234.5f);
      Matrix<float> want = C;
      reference_gemm(trans_a, trans_b, m, n, k, 1.5f, A, B, -0.75f, want);
      expect_bitwise_equal(gemm(ta, tb, m, n, k, 1.5f, A, B, -0.75f, C, CUBLAS_COMPUTE_32F), want.values,
                           std::string("float32 op(A) = ") + op_name(ta) + ", op(B) = " + op_name(tb));
    }
}

TEST_F(EmulatedCublas, Float64TransposesMatchTheNaiveReference) {
  const int m = 4, n = 6, k = 3;
  std::mt19937 rng(2);
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      bool trans_a = ta == CUBLAS_OP_T, trans_b = tb == CUBLAS_OP_T;
      Matrix<double> A(trans_a ? k : m, trans_a ? m : k, (trans_a ? k : m) + 1, rng, NAN);
      Matrix<double> B(trans_b ? n : k, trans_b ? k : n, (trans_b ? n : k) + 2, rng, NAN);
      Matrix<double> C(m, n, m + 1, rng, -99.0);
      Matrix<double> want = C;
      reference_gemm(trans_a, trans_b, m, n, k, 0.5, A, B, 2.0, want);
      expect_bitwise_equal(gemm(ta, tb, m, n, k, 0.5, A, B, 2.0, C, CUBLAS_COMPUTE_64F), want.values,
                           std::string("float64 op(A) = ") + op_name(ta) + ", op(B) = " + op_name(tb));
    }
}

TEST_F(EmulatedCublas, AlphaAndBetaScaleAsDocumented) {
  const int m = 3, n = 4, k = 5;
  std::mt19937 rng(3);
  Matrix<float> A(k, m, k, rng, NAN), B(k, n, k + 1, rng, NAN), C(m, n, m, rng, 0.f);
  struct Scalars {
    float alpha, beta;
  };
  for (Scalars s : {Scalars{1, 0}, Scalars{-2.5f, 0}, Scalars{1, 1}, Scalars{0.5f, -3}, Scalars{0, 2}}) {
    Matrix<float> want = C;
    reference_gemm(true, false, m, n, k, s.alpha, A, B, s.beta, want);
    expect_bitwise_equal(gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, s.alpha, A, B, s.beta, C, CUBLAS_COMPUTE_32F),
                         want.values, "alpha = " + std::to_string(s.alpha) + ", beta = " + std::to_string(s.beta));
  }
  // k = 0: the product is empty, so C = beta C.
  Matrix<float> want = C;
  for (float& c : want.values) c *= 3;
  expect_bitwise_equal(gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, n, 0, 1.f, A, B, 3.f, C, CUBLAS_COMPUTE_32F), want.values,
                       "k = 0, beta = 3");
}

TEST_F(EmulatedCublas, BetaZeroDoesNotReadC) {
  const int m = 4, n = 3, k = 2;
  std::mt19937 rng(4);
  Matrix<float> A(m, k, m, rng, NAN), B(k, n, k, rng, NAN), C(m, n, m, rng, 0.f);
  for (float& c : C.values) c = NAN;
  Matrix<float> want = C;
  reference_gemm(false, false, m, n, k, 2.f, A, B, 0.f, want);
  std::vector<float> got = gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, 2.f, A, B, 0.f, C, CUBLAS_COMPUTE_32F);
  for (float c : got) ASSERT_TRUE(std::isfinite(c)) << "NaN in C propagated through beta = 0";
  expect_bitwise_equal(got, want.values, "beta = 0 over a NaN C");
}

TEST_F(EmulatedCublas, InvalidArgumentsReturnTheDocumentedStatus) {
  std::mt19937 rng(5);
  const int m = 4, n = 3, k = 5;
  Matrix<float> A(m, k, m, rng, 0.f), B(k, n, k, rng, 0.f), C(m, n, m, rng, 0.f);
  DeviceArray<float> a(A.values), b(B.values), c(C.values);
  float one = 1, zero = 0;
  struct Call {
    const char* what;
    cublasStatus_t want;
    const char* message_names;  // a word the message must contain
    cublasHandle_t handle;
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    const float *alpha, *beta;
    cudaDataType type;
    cublasComputeType_t compute;
  };
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  const cudaDataType F32 = CUDA_R_32F;
  const cublasComputeType_t C32 = CUBLAS_COMPUTE_32F;
  const Call calls[] = {
      {"null handle", CUBLAS_STATUS_NOT_INITIALIZED, "handle", nullptr, N, N, m, n, k, m, k, m, &one, &zero, F32, C32},
      {"m < 0", CUBLAS_STATUS_INVALID_VALUE, "m = -1", handle_, N, N, -1, n, k, m, k, m, &one, &zero, F32, C32},
      {"n < 0", CUBLAS_STATUS_INVALID_VALUE, "n = -1", handle_, N, N, m, -1, k, m, k, m, &one, &zero, F32, C32},
      {"k < 0", CUBLAS_STATUS_INVALID_VALUE, "k = -1", handle_, N, N, m, n, -1, m, k, m, &one, &zero, F32, C32},
      {"transa unknown", CUBLAS_STATUS_INVALID_VALUE, "transa", handle_, cublasOperation_t(3), N, m, n, k, m, k, m,
       &one, &zero, F32, C32},
      {"lda < m (A not transposed)", CUBLAS_STATUS_INVALID_VALUE, "lda", handle_, N, N, m, n, k, m - 1, k, m, &one,
       &zero, F32, C32},
      {"lda < k (A transposed)", CUBLAS_STATUS_INVALID_VALUE, "lda", handle_, T, N, m, n, k, m, k, m, &one, &zero,
       F32, C32},
      {"ldb < k (B not transposed)", CUBLAS_STATUS_INVALID_VALUE, "ldb", handle_, N, N, m, n, k, m, k - 1, m, &one,
       &zero, F32, C32},
      {"ldb < n (B transposed)", CUBLAS_STATUS_INVALID_VALUE, "ldb", handle_, N, T, m, n, k, m, n - 1, m, &one, &zero,
       F32, C32},
      {"ldc < m", CUBLAS_STATUS_INVALID_VALUE, "ldc", handle_, N, N, m, n, k, m, k, m - 1, &one, &zero, F32, C32},
      {"ld 0 for an empty matrix", CUBLAS_STATUS_INVALID_VALUE, "ldc", handle_, N, N, 0, n, k, 1, k, 0, &one, &zero,
       F32, C32},
      {"null alpha", CUBLAS_STATUS_INVALID_VALUE, "alpha", handle_, N, N, m, n, k, m, k, m, nullptr, &zero, F32, C32},
      {"null beta", CUBLAS_STATUS_INVALID_VALUE, "beta", handle_, N, N, m, n, k, m, k, m, &one, nullptr, F32, C32},
      {"alpha in device memory", CUBLAS_STATUS_INVALID_VALUE, "alpha", handle_, N, N, m, n, k, m, k, m, a.get(),
       &zero, F32, C32},
      {"half data", CUBLAS_STATUS_NOT_SUPPORTED, "Atype", handle_, N, N, m, n, k, m, k, m, &one, &zero, CUDA_R_16F,
       C32},
      {"float data, double compute", CUBLAS_STATUS_NOT_SUPPORTED, "computeType", handle_, N, N, m, n, k, m, k, m,
       &one, &zero, F32, CUBLAS_COMPUTE_64F},
  };
  for (const Call& call : calls) {
    cublasStatus_t status =
        cublasGemmEx(call.handle, call.ta, call.tb, call.m, call.n, call.k, call.alpha, a.get(), call.type, call.lda,
                     b.get(), call.type, call.ldb, call.beta, c.get(), call.type, call.ldc, call.compute,
                     CUBLAS_GEMM_DEFAULT);
    EXPECT_EQ(status, call.want) << call.what << ": got " << cublasGetStatusName(status) << " ("
                                 << cublasGetStatusString(status) << ")";
    EXPECT_NE(std::string(cublasGetStatusString(status)).find(call.message_names), std::string::npos)
        << call.what << ": the message does not name '" << call.message_names
        << "': " << cublasGetStatusString(status);
  }
  expect_bitwise_equal(c.read(), C.values, "C after refused calls");
  float* null_float = nullptr;
  EXPECT_EQ(cublasSgemm(nullptr, N, N, m, n, k, &one, a.get(), m, b.get(), k, &zero, c.get(), m),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSgemm(handle_, N, N, m, n, k, null_float, a.get(), m, b.get(), k, &zero, c.get(), m),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetStream(nullptr, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetMathMode(handle_, cublasMath_t(1)), CUBLAS_STATUS_INVALID_VALUE);
}

// A host operand is not refused at the call (cuBLAS does not check pointers); the product faults
// when it runs, as a kernel reading a host address does on a GPU.
TEST_F(EmulatedCublas, AHostOperandFaultsNamingIt) {
  const int m = 3, n = 2, k = 4;
  std::mt19937 rng(6);
  Matrix<float> A(m, k, m, rng, 0.f), B(k, n, k, rng, 0.f), C(m, n, m, rng, 0.f);
  DeviceArray<float> a(A.values), b(B.values), c(C.values);
  float one = 1, zero = 0;
  const float* device_b = b.get();
  for (const char* host_operand : {"A", "B", "C"}) {
    std::string name = host_operand;
    const float* A_ptr = name == "A" ? A.values.data() : a.get();
    const float* B_ptr = name == "B" ? B.values.data() : device_b;
    float* C_ptr = name == "C" ? C.values.data() : c.get();
    ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A_ptr, m, B_ptr, k, &zero, C_ptr, m),
              CUBLAS_STATUS_SUCCESS);
    cudaError_t err = cudaDeviceSynchronize();
    EXPECT_EQ(err, cudaErrorIllegalAddress) << "host " << name << ": " << cudaGetErrorName(err);
    std::string message = cudaGetErrorString(err);
    EXPECT_NE(message.find("cublasSgemm: operand " + name), std::string::npos) << message;
    cudaGetLastError();  // clears the error for the next case
  }
}

// Inputs whose low 13 mantissa bits are set: TF32 drops them, float32 keeps them.
TEST_F(EmulatedCublas, Tf32RoundsBothInputsFirst) {
  const int m = 6, n = 5, k = 7;
  std::mt19937 rng(7);
  Matrix<float> A(m, k, m, rng, 0.f), B(n, k, n + 1, rng, 0.f), C(m, n, m, rng, 0.f);
  for (auto* values : {&A.values, &B.values})
    for (float& x : *values) x = std::nextafter(1.f + x / 4, 2.f);  // an odd last mantissa bit
  Matrix<float> want_f32 = C, want_tf32 = C;
  reference_gemm(false, true, m, n, k, 1.f, A, B, 0.f, want_f32);
  reference_gemm(false, true, m, n, k, 1.f, A, B, 0.f, want_tf32, cuda_emu::round_to_tf32);
  ASSERT_NE(want_f32.values, want_tf32.values) << "the inputs do not tell TF32 from float32";
  std::vector<float> f32 = gemm(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, 1.f, A, B, 0.f, C, CUBLAS_COMPUTE_32F);
  std::vector<float> tf32 = gemm(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, 1.f, A, B, 0.f, C, CUBLAS_COMPUTE_32F_FAST_TF32);
  expect_bitwise_equal(f32, want_f32.values, "CUBLAS_COMPUTE_32F");
  expect_bitwise_equal(tf32, want_tf32.values, "CUBLAS_COMPUTE_32F_FAST_TF32");
  // The TF32 math mode makes the default float32 compute type (and cublasSgemm) use TF32, but not
  // the pedantic one.
  ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  ASSERT_EQ(cublasGetMathMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_TF32_TENSOR_OP_MATH);
  expect_bitwise_equal(gemm(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, 1.f, A, B, 0.f, C, CUBLAS_COMPUTE_32F),
                       want_tf32.values, "CUBLAS_COMPUTE_32F under CUBLAS_TF32_TENSOR_OP_MATH");
  expect_bitwise_equal(gemm(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, 1.f, A, B, 0.f, C, CUBLAS_COMPUTE_32F_PEDANTIC),
                       want_f32.values, "CUBLAS_COMPUTE_32F_PEDANTIC under CUBLAS_TF32_TENSOR_OP_MATH");
  DeviceArray<float> a(A.values), b(B.values), c(C.values);
  float one = 1, zero = 0;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, a.get(), m, b.get(), int(B.ld), &zero,
                        c.get(), m),
            CUBLAS_STATUS_SUCCESS);
  expect_bitwise_equal(c.read(), want_tf32.values, "cublasSgemm under CUBLAS_TF32_TENSOR_OP_MATH");
}

// Round to nearest with ties away from zero at the 10th mantissa bit (TF32's ulp at 1 is 2^-10).
TEST_F(EmulatedCublas, RoundToTf32IsNearestTiesAway) {
  using cuda_emu::round_to_tf32;
  const float ulp = std::ldexp(1.f, -10), half = ulp / 2, tiny = std::ldexp(1.f, -23);
  EXPECT_EQ(round_to_tf32(1.f), 1.f);
  EXPECT_EQ(round_to_tf32(1.f + half - tiny), 1.f);
  EXPECT_EQ(round_to_tf32(1.f + half), 1.f + ulp);  // a tie: away from zero (to even would give 1)
  EXPECT_EQ(round_to_tf32(-(1.f + half)), -(1.f + ulp));
  EXPECT_EQ(round_to_tf32(2.f - tiny), 2.f);                  // the carry bumps the exponent
  EXPECT_EQ(round_to_tf32(FLT_MAX), INFINITY);                // past the largest TF32
  EXPECT_EQ(round_to_tf32(-INFINITY), -INFINITY);
  EXPECT_TRUE(std::isnan(round_to_tf32(NAN)));
}

// The product runs when its stream is waited on, not at the call. C is read straight from device
// memory, which the emulation keeps on the host, so the read itself waits for nothing.
TEST_F(EmulatedCublas, ProductRunsWhenItsStreamIsSynchronised) {
  const int m = 4, n = 4, k = 3;
  std::mt19937 rng(8);
  Matrix<float> A(m, k, m, rng, NAN), B(k, n, k, rng, NAN), C(m, n, m, rng, 0.f);
  Matrix<float> want = C;
  reference_gemm(false, false, m, n, k, 1.f, A, B, 1.f, want);
  DeviceArray<float> a(A.values), b(B.values), c(C.values);
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  cudaStream_t got_stream = nullptr;
  ASSERT_EQ(cublasGetStream(handle_, &got_stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got_stream, stream);
  float one = 1;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a.get(), m, b.get(), k, &one, c.get(), m),
            CUBLAS_STATUS_SUCCESS);
  one = 7;  // alpha and beta were read at the call: changing them now changes nothing
  std::vector<float> before(c.get(), c.get() + C.values.size());
  expect_bitwise_equal(before, C.values, "C right after the call");
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<float> after(c.get(), c.get() + C.values.size());
  expect_bitwise_equal(after, want.values, "C after cudaStreamSynchronize");
  ASSERT_EQ(cublasSetStream(handle_, nullptr), CUBLAS_STATUS_SUCCESS);
  cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

// C = op(A) op(B) row-major, as cpu::gemm and linattn::cuda::gemm define it, summed as the emulation sums.
void reference_row_major(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const std::vector<float>& A, int64_t lda, const std::vector<float>& B, int64_t ldb, float beta,
                         std::vector<float>& C, int64_t ldc, bool tf32) {
  auto input = [tf32](float x) { return tf32 ? cuda_emu::round_to_tf32(x) : x; };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t l = 0; l < K; ++l) {
        float a = trans_a ? A[size_t(l * lda + i)] : A[size_t(i * lda + l)];
        float b = trans_b ? B[size_t(j * ldb + l)] : B[size_t(l * ldb + j)];
        acc = std::fma(input(a), input(b), acc);
      }
      float& c = C[size_t(i * ldc + j)];
      c = beta == 0 ? alpha * acc : std::fma(beta, c, alpha * acc);
    }
}

// The project's row-major wrapper (kernels/cuda/matmul.cpp) swaps the operands to use column-major
// cuBLAS; a swapped transpose or size there shows here.
TEST_F(EmulatedCublas, ProjectRowMajorGemmMatchesForAllTransposes) {
  const int64_t M = 5, N = 3, K = 4;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-1, 1);
  auto random_vector = [&](size_t size) {
    std::vector<float> v(size);
    for (float& x : v) x = uniform(rng);
    return v;
  };
  for (bool tf32 : {false, true})
    for (bool trans_a : {false, true})
      for (bool trans_b : {false, true}) {
        // Row-major storage with a row stride past the minimum.
        int64_t lda = (trans_a ? M : K) + 2, ldb = (trans_b ? K : N) + 1, ldc = N + 3;
        std::vector<float> A = random_vector(size_t((trans_a ? K : M) * lda));
        std::vector<float> B = random_vector(size_t((trans_b ? N : K) * ldb));
        std::vector<float> C = random_vector(size_t(M * ldc));
        std::vector<float> want = C;
        reference_row_major(trans_a, trans_b, M, N, K, 1.25f, A, lda, B, ldb, 0.5f, want, ldc, tf32);
        DeviceArray<float> a(A), b(B), c(C);
        linattn::cuda::gemm(trans_a, trans_b, M, N, K, 1.25f, a.get(), lda, b.get(), ldb, 0.5f, c.get(), ldc,
                            tf32 ? linattn::MatmulPrecision::tf32 : linattn::MatmulPrecision::f32);
        expect_bitwise_equal(c.read(), want,
                             std::string("cuda::gemm trans_a = ") + (trans_a ? "T" : "N") + ", trans_b = " +
                                 (trans_b ? "T" : "N") + (tf32 ? ", tf32" : ""));
      }
}

}  // namespace
