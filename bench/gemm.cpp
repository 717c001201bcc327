// linattn-bench gemm: achieved float32 GFLOP/s of the CPU matmul at square and projection shapes.
#include <omp.h>

#include <cstdio>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/cpu/matmul.h"

namespace linattn::bench {

// Best-of-reps GFLOP/s of C[M,N] = A[M,K] B[K,N].
static double gemm_gflops(int64_t M, int64_t N, int64_t K, int reps) {
  Rng rng(0);
  Tensor a = Tensor::empty({M, K}, DType::f32), b = Tensor::empty({K, N}, DType::f32);
  Tensor c = Tensor::zeros({M, N}, DType::f32);
  rng.fill_uniform(a, -1, 1);
  rng.fill_uniform(b, -1, 1);
  double ms = best_ms(
      [&] {
        cpu::gemm<float>(false, false, M, N, K, 1.0f, a.data<float>(), K, b.data<float>(), N, 0.0f, c.data<float>(), N);
      },
      reps);
  return 2.0 * double(M) * double(N) * double(K) / (ms * 1e6);
}

double gemm_peak_gflops() { return cpu::measure_sgemm_gflops(1024, 10); }

static int run_gemm(int argc, char** argv) {
  std::printf("float32 GEMM (oneDNN), %d threads, best of 10; the reference figure in "
              "shared/design/performance.md is 298 GFLOP/s at 1024^3 on 2 threads\n",
              omp_get_max_threads());
  struct Case {
    int64_t M, N, K;
    const char* what;
  };
  const Case cases[] = {
      {256, 256, 256, "square"},
      {512, 512, 512, "square"},
      {1024, 1024, 1024, "square"},
      {8192, 768, 256, "qkv projection, B*T=8192, d=256"},
      {8192, 256, 256, "output projection, B*T=8192, d=256"},
      {8192, 1024, 256, "MLP up, B*T=8192, d=256"},
      {8192, 256, 1024, "MLP down, B*T=8192, d=256"},
      {8192, 256, 8192, "weight gradient, d=256, B*T=8192"},
  };
  for (const Case& c : cases)
    std::printf("gemm %5ld x %5ld x %5ld  %7.1f GFLOP/s  (%s)\n", long(c.M), long(c.N), long(c.K),
                gemm_gflops(c.M, c.N, c.K, 10), c.what);
  return 0;
}

static bool registered = add_command({"gemm", "float32 GFLOP/s of the matmul at square and model shapes", run_gemm});

}  // namespace linattn::bench
