// linattn-bench gemm: achieved GFLOP/s of the matmul at square and projection shapes, on the CPU
// (oneDNN, float32 and, where the CPU has AVX-512 BF16 or AMX, bf16) or with --device cuda on the GPU
// (cuBLAS, float32, TF32 and bf16).
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "train/device.h"

namespace linattn::bench {

// The operands' dtype for a precision: bf16 products take bf16 operands (converted once, here).
static DType operand_dtype(MatmulPrecision precision) {
  return precision == MatmulPrecision::bf16 ? DType::bf16 : DType::f32;
}

// Best-of-reps GFLOP/s of C[M,N] = A[M,K] B[K,N] through the backend's CPU gemm, its operands in
// `precision` (bf16: bf16 operands, float32 accumulation into the float32 C).
static double gemm_gflops(int64_t M, int64_t N, int64_t K, MatmulPrecision precision, int reps) {
  Rng rng(0);
  Tensor a = Tensor::empty({M, K}, DType::f32), b = Tensor::empty({K, N}, DType::f32);
  Tensor c = Tensor::zeros({M, N}, DType::f32);
  rng.fill_uniform(a, -1, 1);
  rng.fill_uniform(b, -1, 1);
  a = a.to(operand_dtype(precision)), b = b.to(operand_dtype(precision));
  // best_ms runs it once first: the warm-up (bf16: where the primitive is created)
  double ms = best_ms([&] { backend::gemm(Device::cpu, false, false, M, N, K, 1.0, a, b, 0.0, c); }, reps);
  return 2.0 * double(M) * double(N) * double(K) / (ms * 1e6);
}

double gemm_peak_gflops() { return measure_gemm_gflops(Device::cpu, 1024, 10); }

// Median TFLOP/s over reps of C[M,N] = A[M,K] B[K,N] through the backend's CUDA gemm (cuBLAS),
// timed with events on the compute stream.
static double cuda_gemm_tflops(int64_t M, int64_t N, int64_t K, MatmulPrecision precision, int reps) {
  Rng rng(0);
  Tensor a = Tensor::empty({M, K}, DType::f32), b = Tensor::empty({K, N}, DType::f32);
  rng.fill_uniform(a, -1, 1);
  rng.fill_uniform(b, -1, 1);
  Tensor da = a.to(operand_dtype(precision)).to(Device::cuda), db = b.to(operand_dtype(precision)).to(Device::cuda);
  Tensor dc = Tensor::zeros({M, N}, DType::f32, Device::cuda);
  backend::set_matmul_precision(precision);  // tf32
  auto once = [&] { backend::gemm(Device::cuda, false, false, M, N, K, 1.0, da, db, 0.0, dc); };
  const double ms = cuda_median_ms(once, reps, 1);  // the warm-up run: cuBLAS picks its kernel
  backend::set_matmul_precision(MatmulPrecision::f32);
  return 2.0 * double(M) * double(N) * double(K) / (ms * 1e9);
}

struct GemmCase {
  int64_t M, N, K;
  const char* what;
};

static int run_cuda_gemm() {
  if (std::string why = no_gpu_reason(); !why.empty()) {
    std::printf("gemm --device cuda: skipped: %s\n", why.c_str());
    return 0;
  }
  std::printf("GEMM (cuBLAS, float32 data and accumulation; bf16: bf16 operands, float32 "
              "accumulation), median of 20, CUDA events; %s\n", describe_device(Device::cuda).c_str());
  std::printf("spec-sheet peaks of an H100 SXM: 67 TFLOP/s float32, 495 TFLOP/s TF32, 989 TFLOP/s bf16 (dense)\n");
  const GemmCase cases[] = {
      {1024, 1024, 1024, "square"},
      {4096, 4096, 4096, "square"},
      {8192, 8192, 8192, "square"},
      {8192, 2304, 768, "qkv projection, B*T=8192, d=768"},
      {8192, 3072, 768, "MLP up, B*T=8192, d=768"},
      {8192, 768, 3072, "MLP down, B*T=8192, d=768"},
      {8192, 50304, 768, "LM head, B*T=8192, vocab 50304"},
  };
  std::printf("%s", emulation_note().c_str());
  for (const GemmCase& c : cases) {
    if (kEmulatedCuda && c.M * c.N * c.K > int64_t(1) << 30) continue;  // the emulated cuBLAS: 1024^3 at most
    std::printf("gemm %5ld x %5ld x %5ld  float32 %6.1f TFLOP/s  tf32 %6.1f TFLOP/s  bf16 %6.1f TFLOP/s  (%s)\n",
                long(c.M), long(c.N), long(c.K), cuda_gemm_tflops(c.M, c.N, c.K, MatmulPrecision::f32, 20),
                cuda_gemm_tflops(c.M, c.N, c.K, MatmulPrecision::tf32, 20),
                cuda_gemm_tflops(c.M, c.N, c.K, MatmulPrecision::bf16, 20), c.what);
  }
  return 0;
}

static int run_gemm(const std::string& device) {
  if (device == "cuda") return run_cuda_gemm();
  const std::string no_bf16 = backend::cpu_bf16_unavailable();
  std::printf("GEMM (oneDNN), %d threads, best of 10: float32 (dnnl_sgemm) and bf16 (bf16 operands, float32 "
              "accumulation: the matmul primitive); the reference figure in "
              "shared/design/performance.md is 298 GFLOP/s float32 at 1024^3 on 2 threads\n",
              omp_get_max_threads());
  if (!no_bf16.empty()) std::printf("bf16: skipped: %s\n", no_bf16.c_str());
  const GemmCase cases[] = {
      {256, 256, 256, "square"},
      {512, 512, 512, "square"},
      {1024, 1024, 1024, "square"},
      {8192, 768, 256, "qkv projection, B*T=8192, d=256"},
      {8192, 256, 256, "output projection, B*T=8192, d=256"},
      {8192, 1024, 256, "MLP up, B*T=8192, d=256"},
      {8192, 256, 1024, "MLP down, B*T=8192, d=256"},
      {8192, 256, 8192, "weight gradient, d=256, B*T=8192"},
  };
  for (const GemmCase& c : cases) {
    const double f32 = gemm_gflops(c.M, c.N, c.K, MatmulPrecision::f32, 10);
    if (!no_bf16.empty()) {
      std::printf("gemm %5ld x %5ld x %5ld  float32 %7.1f GFLOP/s  (%s)\n", long(c.M), long(c.N), long(c.K), f32,
                  c.what);
      continue;
    }
    const double bf16 = gemm_gflops(c.M, c.N, c.K, MatmulPrecision::bf16, 10);
    std::printf("gemm %5ld x %5ld x %5ld  float32 %7.1f GFLOP/s  bf16 %7.1f GFLOP/s  (x%.2f)  (%s)\n", long(c.M),
                long(c.N), long(c.K), f32, bf16, bf16 / f32, c.what);
  }
  return 0;
}

static bool registered = add_command(
    {"gemm", "GFLOP/s of the matmul at square and model shapes, float32 and bf16 (--device cuda: cuBLAS, also TF32)",
     [](CLI::App& c) -> std::function<int()> {
       auto device = std::make_shared<std::string>("cpu");
       c.add_option("--device", *device, "cpu (oneDNN, float32 and bf16), or cuda (cuBLAS, float32, TF32 and bf16; skips without a GPU)")
           ->type_name("cpu|cuda")
           ->check(cli::one_of({"cpu", "cuda"}));
       return [device] { return run_gemm(*device); };
     }});

}  // namespace linattn::bench
