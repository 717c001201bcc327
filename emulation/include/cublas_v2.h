// linattn's stand-in for cuBLAS's cublas_v2.h in the emulation build: the part of cuBLAS the project
// calls, with cuBLAS's names, values and documented behaviour, computed on the CPU
// (emulation/cublas.cpp) when the handle's stream runs.
//
// What is emulated: column-major storage; the transposes N, T and C (C is T for real data); the
// argument checks and the status codes the cuBLAS documentation gives for them; the handle's stream
// (nothing is computed at the call); alpha and beta read from host memory at the call (pointer mode
// host, the default and the only mode here); beta == 0 meaning C is not read; the TF32 compute type
// and math mode rounding both inputs (cuda_emulation/tf32.h); bfloat16 inputs (CUDA_R_16BF) with a
// float32 result and accumulation, each input taken exactly as the tensor cores take it. Every element of the product is
// accumulated in k ascending order with one fused multiply-add per step, acc = fma(a, b, acc),
// starting from 0, then written as C = alpha * acc (beta == 0) or C = fma(beta, C, alpha * acc), so a
// host reference that does the same matches bit for bit. A real GPU sums in another order: compare
// it with a tolerance.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

struct cublasContext;
typedef cublasContext* cublasHandle_t;

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,  // a null handle
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,  // a bad size, leading dimension, operation or null scalar
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,  // a combination of types the emulation does not compute
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

// "CUBLAS_STATUS_INVALID_VALUE", and a description. For the status the calling thread's last failed
// call returned, the description is the emulation's own message: which argument, why, what to pass.
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,  // conjugate transpose: the transpose for real data
};

// What the products may do to float32 data beyond plain float32 arithmetic.
enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,  // cublasSgemm and CUBLAS_COMPUTE_32F round inputs to TF32
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,  // a flag, or'ed with a mode
};

// The precision of the multiply-accumulate. Emulated: 32F, 32F_PEDANTIC (both plain float32),
// 32F_FAST_TF32 (inputs rounded to TF32, float32 accumulation), 64F and 64F_PEDANTIC (double); the
// others return CUBLAS_STATUS_NOT_SUPPORTED.
enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

// The algorithm is a performance hint; the emulation has one, so every value computes the same.
enum cublasGemmAlgo_t {
  CUBLAS_GEMM_DEFAULT = -1,
};

// A handle bound to the legacy default stream and CUBLAS_DEFAULT_MATH. cublasDestroy synchronises the
// device first, as cuBLAS documents.
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
// The stream the handle's products are queued on (nullptr: the legacy default stream).
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);

// C [m, n] = alpha op(A) [m, k] op(B) [k, n] + beta C, column-major, leading dimensions in elements.
// A, B and C must be device memory over the whole range they span; one that is not faults when the
// stream runs the product (as a GPU's illegal address does): cudaErrorIllegalAddress from the
// synchronising call, with a message naming the operand.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
// cublasGemmEx on float32 data with CUBLAS_COMPUTE_32F.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc);
