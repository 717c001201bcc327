// The scans of kernels/cuda/linear_scan.h as CUDA kernels: one thread block (kBlockThreads threads)
// per (batch, head) and tile of state columns, each phase of the block program followed by a
// barrier; the pointwise steps one thread per index. Scratch memory is stream-ordered
// (cudaMallocAsync) and freed on the stream when the run ends. Included only by kernels/cuda/*.cu.
#pragma once

#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/linear_scan.h"

namespace linattn::cuda::scan {

template <class T>
__global__ void __launch_bounds__(kBlockThreads) scan_c_kernel(Scan<T> s) {
  LINATTN_DYNAMIC_SHARED(unsigned char, smem_raw);
  DeviceBlock ex{int(blockDim.x)};
  scan_c_block(ex, s, int64_t(blockIdx.x), int64_t(blockIdx.y), reinterpret_cast<T*>(smem_raw));
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads) scan_o_kernel(Scan<T> s) {
  LINATTN_DYNAMIC_SHARED(unsigned char, smem_raw);
  DeviceBlock ex{int(blockDim.x)};
  scan_o_block(ex, s, int64_t(blockIdx.x), int64_t(blockIdx.y), reinterpret_cast<T*>(smem_raw));
}

template <class F>
__global__ void each_kernel(F f, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// The Run of linear_scan.h on the compute stream, for the op named `op` (errors name it).
class DeviceRun {
 public:
  explicit DeviceRun(const char* op) : op_(op) {}
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;
  ~DeviceRun() {
    for (void* p : buffers_) cudaFreeAsync(p, stream());
  }

  float* scratch(int64_t n) {
    void* p = nullptr;
    LINATTN_CUDA_CHECK(cudaMallocAsync(&p, size_t(n > 0 ? n : 1) * sizeof(float), stream()));
    buffers_.push_back(p);
    return static_cast<float*>(p);
  }
  void zero(float* p, int64_t n) {
    if (n > 0) LINATTN_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * sizeof(float), stream()));
  }
  template <class F>
  void each(int64_t n, const F& f) {
    if (n <= 0) return;
    LINATTN_LAUNCH_PLAN(pointwise_plan("scan::each_kernel", n), stream(), each_kernel<F>)(f, n);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  // Each kernel is named at its launch (not passed to a helper that launches it), so that the
  // launch's errors name it.
  void scan_c(const Scan<float>& s) {
    const LaunchPlan plan =
        scan_plan("scan::scan_c_kernel<float>", s.B, s.H, s.N, scan_c_smem(s.chunk, s.K, s.g.p != nullptr));
    if (!configure(scan_c_kernel<float>, s, plan)) return;
    LINATTN_LAUNCH_PLAN(plan, stream(), scan_c_kernel<float>)(s);
    LINATTN_CUDA_CHECK_LAUNCH();
  }
  void scan_o(const Scan<float>& s) {
    const LaunchPlan plan =
        scan_plan("scan::scan_o_kernel<float>", s.B, s.H, s.K, scan_o_smem(s.chunk, s.N, s.g.p != nullptr));
    if (!configure(scan_o_kernel<float>, s, plan)) return;
    LINATTN_LAUNCH_PLAN(plan, stream(), scan_o_kernel<float>)(s);
    LINATTN_CUDA_CHECK_LAUNCH();
  }

 private:
  // Checks a launch of `kernel` (its plan: launch_plan.h's scan_plan) against the GPU's limits and
  // opts the kernel in to its shared memory; false: nothing to launch.
  template <class Kernel>
  bool configure(Kernel kernel, const Scan<float>& s, const LaunchPlan& plan) {
    const size_t smem = size_t(plan.shared_bytes);
    int device = 0, limit = 0;
    LINATTN_CUDA_CHECK(cudaGetDevice(&device));
    LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    LINATTN_CHECK(smem <= size_t(limit), op_, ": chunk_size ", s.chunk, " with head sizes (", s.K, ", ", s.N,
                  ") needs ", smem / 1024, " KiB of shared memory per thread block in the CUDA kernels, more than this "
                  "GPU's ", limit / 1024, " KiB; set a smaller model.chunk_size (32 or 16) or use smaller heads");
    const int64_t tiles = plan.grid.y;
    LINATTN_CHECK(s.B * s.H <= INT32_MAX && tiles <= 65535, op_, ": B * H = ", s.B * s.H, " or ", tiles,
                  " column tiles exceed the CUDA grid");
    if (s.B * s.H == 0 || tiles == 0) return false;
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }

  const char* op_;
  std::vector<void*> buffers_;
};

}  // namespace linattn::cuda::scan
