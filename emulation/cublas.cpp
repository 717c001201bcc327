// The emulated cuBLAS (emulation/include/cublas_v2.h says what is emulated): arguments are checked at
// the call, as cuBLAS checks them; the product is queued on the handle's stream and computed on the
// host when something waits for that stream.
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_emulation/half_float.h"
#include "cuda_emulation/counters.h"
#include "cuda_emulation/tf32.h"
#include "emulation/internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;  // the legacy default stream
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// The calling thread's last failed call, so that cublasGetStatusString can say what went wrong
// (cuBLAS has no error string of its own; the project prints this one beside the status name).
struct LastFailure {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string detail;
};
thread_local LastFailure last_failure;

cublasStatus_t refuse(cublasStatus_t status, std::string detail) {
  last_failure = {status, std::move(detail)};
  return status;
}

cublasStatus_t null_handle(const char* call) {
  return refuse(CUBLAS_STATUS_NOT_INITIALIZED, cat(call, ": the handle is null: create it with cublasCreate first"));
}

const char* operation_name(cublasOperation_t op) {
  switch (op) {
    case CUBLAS_OP_N: return "CUBLAS_OP_N";
    case CUBLAS_OP_T: return "CUBLAS_OP_T";
    case CUBLAS_OP_C: return "CUBLAS_OP_C";
  }
  return nullptr;
}

// A matrix operand as it lies in memory: column-major, rows x cols before its transpose, `ld`
// elements from one column to the next.
struct Operand {
  const char* name;       // "A"
  const char* ld_name;    // "lda"
  const char* rows_name;  // the size its rows are: "m", "n" or "k"
  const void* data;
  int64_t rows, cols, ld;

  // The bytes from the first element to the last one read: the last column needs only `rows`.
  size_t span_bytes(size_t element_bytes) const {
    if (rows == 0 || cols == 0) return 0;
    return size_t((cols - 1) * ld + rows) * element_bytes;
  }
};

// A is m x k and B is k x n after their transposes, C is m x n.
std::array<Operand, 3> gemm_operands(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* A,
                                     int64_t lda, const void* B, int64_t ldb, const void* C, int64_t ldc) {
  return {Operand{"A", "lda", trans_a ? "k" : "m", A, trans_a ? k : m, trans_a ? m : k, lda},
          Operand{"B", "ldb", trans_b ? "n" : "k", B, trans_b ? n : k, trans_b ? k : n, ldb},
          Operand{"C", "ldc", "m", C, m, n, ldc}};
}

// The leading-dimension rule cuBLAS documents: ld >= max(1, rows as stored).
cublasStatus_t check_leading_dimension(const char* call, const Operand& x) {
  int64_t least = std::max<int64_t>(1, x.rows);
  if (x.ld >= least) return CUBLAS_STATUS_SUCCESS;
  return refuse(CUBLAS_STATUS_INVALID_VALUE,
                cat(call, ": ", x.ld_name, " = ", x.ld, " is less than max(1, ", x.rows_name, ") = ", least,
                    ", the rows of ", x.name, " as stored (column-major): pass the distance in elements between ",
                    "the starts of ", x.name, "'s columns"));
}

// The documented CUBLAS_STATUS_INVALID_VALUE cases of the gemm routines, in the order of the
// argument list. m, n, k are known to be >= 0 when the operands are built.
cublasStatus_t check_gemm_arguments(const char* call, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void* alpha, const void* beta) {
  if (!operation_name(transa) || !operation_name(transb))
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  cat(call, ": transa = ", int(transa), ", transb = ", int(transb),
                      ": each must be CUBLAS_OP_N, CUBLAS_OP_T or CUBLAS_OP_C"));
  if (m < 0 || n < 0 || k < 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  cat(call, ": m = ", m, ", n = ", n, ", k = ", k, ": sizes must not be negative"));
  if (!alpha || !beta)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  cat(call, ": ", !alpha ? "alpha" : "beta", " is null: pass the address of a host scalar"));
  return CUBLAS_STATUS_SUCCESS;
}

// Pointer mode host: the host reads alpha and beta at the call, which a device address does not
// allow on a GPU (it crashes there), so it is refused here.
cublasStatus_t check_host_scalar(const char* call, const char* name, const void* p, size_t bytes) {
  if (!cuda_emu::in_device_memory(p, bytes)) return CUBLAS_STATUS_SUCCESS;
  return refuse(CUBLAS_STATUS_INVALID_VALUE,
                cat(call, ": ", name, " (", p, ") is device memory, but the handle's pointer mode is ",
                    "CUBLAS_POINTER_MODE_HOST (the only one emulated): pass the address of a host scalar"));
}

// A product queued on a stream: C = alpha op(A) op(B) + beta C in element type T.
// A bfloat16 input as cuBLAS reads CUDA_R_16BF: its bit pattern, the top 16 bits of a float.
struct Bf16Bits {
  uint16_t bits;
};

// C = alpha op(A) op(B) + beta C computed in type T with A and B of type In: T, or Bf16Bits with
// T = float; C of type Out: T, or Bf16Bits (with Bf16Bits inputs and T = float), rounded to nearest
// even as it is written.
template <class T, class In = T, class Out = T>
struct Product {
  const char* call;
  bool trans_a, trans_b;
  int64_t m, n, k;
  T alpha, beta;  // read at the call: pointer mode host
  bool tf32;      // round both inputs to TF32 (float32 only)
  const In* A;
  int64_t lda;
  const In* B;
  int64_t ldb;
  Out* C;
  int64_t ldc;

  std::array<Operand, 3> operands() const { return gemm_operands(trans_a, trans_b, m, n, k, A, lda, B, ldb, C, ldc); }

  // The value the product multiplies: a bf16 input exactly, a float one rounded to TF32 when asked.
  T input(In x) const {
    if constexpr (std::is_same_v<In, Bf16Bits>) return cuda_emu::BFloat16Format::to_float(x.bits);
    else if constexpr (std::is_same_v<T, float>) return tf32 ? cuda_emu::round_to_tf32(x) : x;
    else return x;
  }

  // cuBLAS does not check that the operands are device memory: on a GPU, one that is not makes the
  // kernel fault, and the next synchronising call returns cudaErrorIllegalAddress (the status the
  // call itself returned was CUBLAS_STATUS_SUCCESS). The emulation does the same, with a message
  // naming the operand, and checks when the product runs, so memory freed meanwhile counts too.
  bool operands_in_device_memory() const {
    for (const Operand& x : operands()) {
      size_t bytes = x.span_bytes(x.data == C ? sizeof(Out) : sizeof(In));
      if (bytes == 0 || cuda_emu::in_device_memory(x.data, bytes)) continue;
      cuda_emu::fail(cudaErrorIllegalAddress,
                     cat(call, ": operand ", x.name, " [", x.data, ", +", bytes, " bytes) (", x.rows, " x ", x.cols,
                         " column-major, ld ", x.ld, ") is not inside one device allocation: pass memory from ",
                         "cudaMalloc, alive until the stream has run the product"));
      return false;
    }
    return true;
  }

  // Each element: acc = fma(op(A)[i, l], op(B)[l, j], acc) for l = 0 .. k-1 from acc = 0, then
  // C = alpha acc, or fma(beta, C, alpha acc) when beta != 0 (so C is not read when beta == 0).
  void operator()() const {
    if (!operands_in_device_memory()) return;
    // op(A) gathered column-major [m, k], so that the innermost loop walks contiguous memory.
    std::vector<T> op_a(size_t(m * k));
    for (int64_t l = 0; l < k; ++l)
      for (int64_t i = 0; i < m; ++i) op_a[size_t(l * m + i)] = input(trans_a ? A[l + i * lda] : A[i + l * lda]);
    std::vector<T> acc(static_cast<size_t>(m));
    for (int64_t j = 0; j < n; ++j) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t l = 0; l < k; ++l) {
        T b = input(trans_b ? B[j + l * ldb] : B[l + j * ldb]);
        for (int64_t i = 0; i < m; ++i) acc[size_t(i)] = std::fma(op_a[size_t(l * m + i)], b, acc[size_t(i)]);
      }
      for (int64_t i = 0; i < m; ++i) {
        Out& c = C[i + j * ldc];
        if constexpr (std::is_same_v<Out, Bf16Bits>)
          c.bits = cuda_emu::BFloat16Format::from_float(
              beta == T(0) ? alpha * acc[size_t(i)]
                           : std::fma(beta, cuda_emu::BFloat16Format::to_float(c.bits), alpha * acc[size_t(i)]));
        else
          c = beta == T(0) ? alpha * acc[size_t(i)] : std::fma(beta, c, alpha * acc[size_t(i)]);
      }
    }
  }
};

template <class T, class In = T, class Out = T>
cublasStatus_t queue_product(cublasHandle_t handle, const char* call, cublasOperation_t transa,
                             cublasOperation_t transb, int m, int n, int k, const void* alpha, const void* A, int lda,
                             const void* B, int ldb, const void* beta, void* C, int ldc, bool tf32) {
  if (cublasStatus_t s = check_host_scalar(call, "alpha", alpha, sizeof(T)); s != CUBLAS_STATUS_SUCCESS) return s;
  if (cublasStatus_t s = check_host_scalar(call, "beta", beta, sizeof(T)); s != CUBLAS_STATUS_SUCCESS) return s;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;  // an empty C: nothing to do
  Product<T, In, Out> product{.call = call, .trans_a = transa != CUBLAS_OP_N, .trans_b = transb != CUBLAS_OP_N,
                         .m = m, .n = n, .k = k,
                         .alpha = *static_cast<const T*>(alpha), .beta = *static_cast<const T*>(beta), .tf32 = tf32,
                         .A = static_cast<const In*>(A), .lda = lda, .B = static_cast<const In*>(B), .ldb = ldb,
                         .C = static_cast<Out*>(C), .ldc = ldc};
  cuda_emu::count(cuda_emu::Count::library_call);
  cuda_emu::enqueue(handle->stream, call, product);
  return CUBLAS_STATUS_SUCCESS;
}

bool tf32_math(cublasHandle_t handle) {
  return (handle->math_mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) == CUBLAS_TF32_TENSOR_OP_MATH;
}

cublasStatus_t gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                    const void* B, cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype,
                    int ldc, cublasComputeType_t compute) {
  if (!handle) return null_handle(call);
  if (cublasStatus_t s = check_gemm_arguments(call, transa, transb, m, n, k, alpha, beta); s != CUBLAS_STATUS_SUCCESS)
    return s;
  for (const Operand& x : gemm_operands(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, A, lda, B, ldb, C, ldc))
    if (cublasStatus_t s = check_leading_dimension(call, x); s != CUBLAS_STATUS_SUCCESS) return s;

  bool all_f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  bool all_f64 = Atype == CUDA_R_64F && Btype == CUDA_R_64F && Ctype == CUDA_R_64F;
  if (all_f32 && (compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                  compute == CUBLAS_COMPUTE_32F_FAST_TF32)) {
    // The TF32 math mode lets the default float32 compute type use TF32, as on a GPU; the pedantic
    // one never does.
    bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32 || (compute == CUBLAS_COMPUTE_32F && tf32_math(handle));
    return queue_product<float>(handle, call, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, tf32);
  }
  if (all_f64 && (compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC))
    return queue_product<double>(handle, call, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, false);
  // bf16 inputs, float32 accumulation and result: what the tensor cores compute, products exact.
  bool bf16_in = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF;
  bool compute_32f = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
  if (bf16_in && Ctype == CUDA_R_32F && compute_32f)
    return queue_product<float, Bf16Bits>(handle, call, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                          ldc, false);
  // ... and a bf16 result: the float32 sums rounded as they are written
  if (bf16_in && Ctype == CUDA_R_16BF && compute_32f)
    return queue_product<float, Bf16Bits, Bf16Bits>(handle, call, transa, transb, m, n, k, alpha, A, lda, B, ldb,
                                                    beta, C, ldc, false);
  return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                cat(call, ": Atype = ", int(Atype), ", Btype = ", int(Btype), ", Ctype = ", int(Ctype),
                    ", computeType = ", int(compute), " is not emulated: emulation/cublas.cpp computes CUDA_R_32F ",
                    "data with CUBLAS_COMPUTE_32F, _32F_PEDANTIC or _32F_FAST_TF32, CUDA_R_16BF inputs with a ",
                    "CUDA_R_32F or CUDA_R_16BF result with CUBLAS_COMPUTE_32F or _32F_PEDANTIC, and CUDA_R_64F ",
                    "data with CUBLAS_COMPUTE_64F or _64F_PEDANTIC"));
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS && status == last_failure.status) return last_failure.detail.c_str();
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized (a null or destroyed handle)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was passed";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a feature the call needs";
    case CUBLAS_STATUS_MAPPING_ERROR: return "a GPU memory space could not be accessed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires a license";
  }
  return "unknown status";
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is null: pass the address of a cublasHandle_t");
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return null_handle("cublasDestroy");
  // Queued products hold copies of what they need, not the handle; the synchronisation is cuBLAS's
  // documented behaviour, which code may rely on.
  cudaDeviceSynchronize();
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return null_handle("cublasSetStream");
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (!handle) return null_handle("cublasGetStream");
  if (!stream)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: stream is null: pass the address of a cudaStream_t");
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return null_handle("cublasSetMathMode");
  int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_PEDANTIC_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  cat("cublasSetMathMode: mode ", int(mode), " is not emulated: pass CUBLAS_DEFAULT_MATH, ",
                      "CUBLAS_PEDANTIC_MATH or CUBLAS_TF32_TENSOR_OP_MATH, optionally or'ed with ",
                      "CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION"));
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!handle) return null_handle("cublasGetMathMode");
  if (!mode)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode: mode is null: pass the address of a cublasMath_t");
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t /*algo: a hint, see cublas_v2.h*/) {
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
              ldc, computeType);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
              CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F);
}
