#ifdef LINATTN_CUDA
#include "kernels/cuda/matmul.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/stream.h"

// cuBLAS calls: the message names the call and cuBLAS's status name and text.
#define LINATTN_CUBLAS_CHECK(call)                                                                     \
  do {                                                                                                 \
    cublasStatus_t linattn_cublas_status_ = (call);                                                    \
    LINATTN_CHECK(linattn_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call, " failed: ",                 \
                  cublasGetStatusName(linattn_cublas_status_), " (", cublasGetStatusString(linattn_cublas_status_), ")"); \
  } while (0)

namespace linattn::cuda {

namespace {

// The current device's handle, created on first use and bound to its compute stream (never
// destroyed: handles outlive static destruction at exit).
cublasHandle_t handle() {
  static std::mutex mutex;
  static auto* handles = new std::vector<cublasHandle_t>();
  int device = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  if (size_t(device) >= handles->size()) handles->resize(size_t(device) + 1, nullptr);
  cublasHandle_t& h = (*handles)[size_t(device)];
  if (!h) {
    LINATTN_CUBLAS_CHECK(cublasCreate(&h));
    LINATTN_CUBLAS_CHECK(cublasSetStream(h, static_cast<cudaStream_t>(compute_stream())));
  }
  return h;
}

int as_int(int64_t v, const char* what) {
  LINATTN_CHECK(v >= 0 && v <= INT_MAX, "cuda::gemm: ", what, " = ", v, " does not fit cuBLAS's int");
  return int(v);
}

// A leading dimension: at least 1 even for an empty (K = 0) operand, as cuBLAS requires.
int as_ld(int64_t v, const char* what) { return v < 1 ? 1 : as_int(v, what); }

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc, MatmulPrecision precision) {
  if (M == 0 || N == 0) return;
  // cuBLAS is column-major, and a row-major matrix read column-major is its transpose: the
  // row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, i.e. cuBLAS's product
  // with the operands swapped (B first), m = N, n = M, and each operand's own transpose flag.
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LINATTN_CUBLAS_CHECK(cublasGemmEx(handle(), op_b, op_a, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), &alpha, B,
                                    CUDA_R_32F, as_ld(ldb, "ldb"), A, CUDA_R_32F, as_ld(lda, "lda"), &beta, C,
                                    CUDA_R_32F, as_ld(ldc, "ldc"),
                                    precision == MatmulPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                       : CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  // The operands swapped as in gemm above.
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LINATTN_CUBLAS_CHECK(cublasGemmEx(handle(), op_b, op_a, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), &alpha, B,
                                    CUDA_R_16BF, as_ld(ldb, "ldb"), A, CUDA_R_16BF, as_ld(lda, "lda"), &beta, C,
                                    CUDA_R_32F, as_ld(ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
               int64_t lda, const uint16_t* B, int64_t ldb, uint16_t* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  const float beta = 0.0f;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LINATTN_CUBLAS_CHECK(cublasGemmEx(handle(), op_b, op_a, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), &alpha, B,
                                    CUDA_R_16BF, as_ld(ldb, "ldb"), A, CUDA_R_16BF, as_ld(lda, "lda"), &beta, C,
                                    CUDA_R_16BF, as_ld(ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace linattn::cuda
#endif  // LINATTN_CUDA
