#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/error.h"

namespace linattn::cpu {

template <>
void gemm<float>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                    beta, C, ldc);
  LINATTN_CHECK(status == dnnl_success, "dnnl_sgemm failed (status ", int(status), ") for M=", M, " N=", N,
                " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

template <>
void gemm<double>(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  const bool parallel = !omp_in_parallel() && M * N * K > (1 << 18);
#pragma omp parallel for if (parallel) schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    double* c = C + i * ldc;
    if (beta == 0.0) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0;
    } else if (beta != 1.0) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    for (int64_t k = 0; k < K; ++k) {
      double a = alpha * (trans_a ? A[k * lda + i] : A[i * lda + k]);
      if (trans_b) {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      } else {
        const double* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  }
}

// ---- bfloat16 products ----

namespace {

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "SSE4.1";
    case dnnl_cpu_isa_avx: return "AVX";
    case dnnl_cpu_isa_avx2: return "AVX2";
    case dnnl_cpu_isa_avx2_vnni: return "AVX2-VNNI";
    case dnnl_cpu_isa_avx512_mic: return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_mic_4ops: return "AVX-512 4FMAPS (Xeon Phi)";
    case dnnl_cpu_isa_avx512_core: return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni: return "AVX-512 VNNI";
    case dnnl_cpu_isa_avx512_core_bf16: return "AVX-512 BF16";
    case dnnl_cpu_isa_avx512_core_amx: return "AMX";
    default: return "an ISA this oneDNN does not name";
  }
}

// One row-major operand of op(X) = [rows, cols] in bf16: its strides (the transposed storage reads
// with the roles of the two strides swapped) and the span of elements it covers.
struct Operand {
  int64_t rows, cols, ld;
  bool trans;
  dnnl::memory::dims strides() const { return trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1}; }
  // Stored [rows, cols], or [cols, rows] transposed; the last stored row ends its length after its start.
  int64_t span() const { return trans ? (cols - 1) * ld + rows : (rows - 1) * ld + cols; }
};

// An empty sum (K = 0): C = beta C (with beta == 0, whatever C held).
void scale_only(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

// The n bf16 values at x widened to float32 into out (reused between calls, grown as needed).
const float* widened(std::vector<float>& out, const bfloat16* x, int64_t n) {
  if (int64_t(out.size()) < n) out.resize(size_t(n));
  from_bf16(out.data(), x, n);
  return out.data();
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The primitive for one shape, alpha and beta (the output scale and the sum post-op are fixed when
// it is created). Creating one costs about as much as a small product (measured on one thread:
// 5-14 us even when oneDNN's own primitive cache hits, against 10-24 us for a 64^3 product), so
// each is made once and kept.
// (..., alpha, beta, whether C is bf16)
using ShapeKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float, bool>;

struct Matmul {
  dnnl::memory::desc a, b, c;
  dnnl::matmul primitive;
};

Matmul matmul_for(const ShapeKey& key, const Operand& a, const Operand& b, int64_t ldc, float alpha, float beta,
                  bool bf16_c) {
  static std::mutex mutex;
  static std::map<ShapeKey, Matmul> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a_md({a.rows, a.cols}, dt::bf16, a.strides()), b_md({b.rows, b.cols}, dt::bf16, b.strides()),
      c_md({a.rows, b.cols}, bf16_c ? dt::bf16 : dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  if (cache.size() >= 1024) cache.clear();  // a bound, far above the shapes a model uses
  const Matmul m{a_md, b_md, c_md,
                 dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), attr, cpu_engine()))};
  cache.emplace(key, m);
  return m;
}

}  // namespace

std::string bf16_products_unavailable() {
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  // The ISA values are bit sets, each holding the ones below it on its line (AVX2-VNNI is not above
  // AVX-512 BF16 although its number is larger).
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) return "";
  return std::string("this CPU has no bfloat16 products: oneDNN finds ") + isa_name(isa) +
         ", and bf16 needs AVX-512 BF16 or AMX (Intel Cooper Lake, Sapphire Rapids or later; AMD Zen 4 or later)";
}

void to_bf16(bfloat16* y, const float* x, int64_t n) {
#pragma omp parallel for if (n > (1 << 16) && !omp_in_parallel()) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = from_float(x[i]);
}

void from_bf16(float* y, const bfloat16* x, int64_t n) {
#pragma omp parallel for if (n > (1 << 16) && !omp_in_parallel()) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = to_float(x[i]);
}

void gemm_bf16_widened(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
                       int64_t lda, const bfloat16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_only(M, N, beta, C, ldc);
  const Operand a{M, K, lda, trans_a}, b{K, N, ldb, trans_b};
  thread_local std::vector<float> a32, b32;
  const float* a_f = widened(a32, A, a.span());
  const float* b_f = widened(b32, B, b.span());
  gemm<float>(trans_a, trans_b, M, N, K, alpha, a_f, lda, b_f, ldb, beta, C, ldc);
}

namespace {

// oneDNN's bf16 matmul into C (float or bfloat16), on a CPU with bf16 products.
void run_matmul(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
                int64_t lda, const bfloat16* B, int64_t ldb, float beta, void* C, int64_t ldc, bool bf16_c) {
  const Operand a{M, K, lda, trans_a}, b{K, N, ldb, trans_b};
  try {
    const Matmul m = matmul_for(ShapeKey{trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, bf16_c}, a, b, ldc,
                                alpha, beta, bf16_c);
    dnnl::memory a_mem(m.a, cpu_engine(), const_cast<bfloat16*>(A));
    dnnl::memory b_mem(m.b, cpu_engine(), const_cast<bfloat16*>(B));
    dnnl::memory c_mem(m.c, cpu_engine(), C);
    dnnl::stream stream(cpu_engine());
    m.primitive.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& e) {
    LINATTN_FAIL("oneDNN's bf16 matmul failed (", e.what(), ", status ", int(e.status), ") for M=", M, " N=", N,
                 " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc, " trans_a=", trans_a, " trans_b=", trans_b,
                 bf16_c ? " into bf16" : "");
  }
}

bool bf16_hardware() {
  static const bool hardware = bf16_products_unavailable().empty();
  return hardware;
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
               int64_t lda, const bfloat16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (!bf16_hardware()) return gemm_bf16_widened(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (K == 0) return scale_only(M, N, beta, C, ldc);
  run_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, false);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const bfloat16* A,
               int64_t lda, const bfloat16* B, int64_t ldb, bfloat16* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K != 0 && bf16_hardware())
    return run_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc, true);
  thread_local std::vector<float> c32;
  if (int64_t(c32.size()) < M * N) c32.resize(size_t(M * N));
  gemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, 0.0f, c32.data(), N);
  for (int64_t i = 0; i < M; ++i) to_bf16(C + i * ldc, c32.data() + i * N, N);
}

}  // namespace linattn::cpu
