// What a launch can get from a GPU, from its launch geometry and its kernel's resources, without the
// GPU: theoretical occupancy (the rules of the CUDA occupancy calculator, cuda_occupancy.h, for
// compute capability 8.x and 9.x), waves over the SMs, and the roofline time at the GPU's peaks.
// `linattn-bench gpu-plan` builds its report from these. Plain host code.
#pragma once

#include <cstdint>
#include <string>

namespace linattn::cuda {

// An NVIDIA GPU's limits and peaks (dense, no sparsity).
struct GpuSpec {
  std::string name;
  int sms;
  int regs_per_sm, regs_per_block, max_regs_per_thread, reg_alloc_unit, sub_partitions;
  int64_t smem_per_sm, smem_per_block_optin, smem_reserved_per_block, smem_alloc_unit;
  int threads_per_sm, max_blocks_per_sm, warp_size;
  double bf16_tflops, tf32_tflops, f32_tflops, hbm_tb_per_s;
};
// H100 SXM5 80GB (sm_90): 132 SMs, 64K registers, 228 KB shared memory (227 KB per block), 2048
// threads and 32 blocks per SM; bf16 ~989 TFLOP/s, tf32 ~494, f32 ~67 (CUDA cores), HBM3 3.35 TB/s.
GpuSpec h100_sxm();

struct Occupancy {
  int blocks_per_sm = 0;  // resident blocks per SM (0: the launch cannot run)
  int warps_per_sm = 0;   // resident warps
  double fraction = 0;    // warps_per_sm / the SM's maximum
  std::string limiter;    // "threads", "registers", "shared memory", "blocks"
};
// threads: per block; registers: per thread; shared_bytes: static + dynamic per block.
Occupancy occupancy(const GpuSpec& gpu, int64_t threads, int registers, int64_t shared_bytes);

// Waves of a grid: blocks over (SMs x resident blocks per SM).
double waves(const GpuSpec& gpu, int64_t blocks, int blocks_per_sm);

// What the arithmetic runs on: CUDA-core float32, or the tensor cores in tf32 or bf16.
enum class MathUnit { f32, tf32, bf16 };
const char* math_unit_name(MathUnit m);
double peak_tflops(const GpuSpec& gpu, MathUnit m);

// The roofline time of `flops` on `m` and `bytes` of DRAM traffic, when the launch fills a
// fraction `sm_share` (0, 1] of the SMs (a grid of fewer blocks than SMs cannot use the rest).
struct Roofline {
  double compute_us, memory_us;  // at the whole GPU's peaks
  double us;                     // max of the two, divided by sm_share
  bool memory_bound;
};
Roofline roofline(const GpuSpec& gpu, double flops, double bytes, MathUnit m, double sm_share = 1);

}  // namespace linattn::cuda
