#include "kernels/cuda/occupancy.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace linattn::cuda {

GpuSpec h100_sxm() {
  GpuSpec g;
  g.name = "H100 SXM5 80GB (sm_90)";
  g.sms = 132;
  g.regs_per_sm = 65536, g.regs_per_block = 65536, g.max_regs_per_thread = 255, g.reg_alloc_unit = 256;
  g.sub_partitions = 4;
  g.smem_per_sm = 228 * 1024, g.smem_per_block_optin = 227 * 1024, g.smem_reserved_per_block = 1024;
  g.smem_alloc_unit = 128;
  g.threads_per_sm = 2048, g.max_blocks_per_sm = 32, g.warp_size = 32;
  g.bf16_tflops = 989, g.tf32_tflops = 494, g.f32_tflops = 67, g.hbm_tb_per_s = 3.35;
  return g;
}

namespace {

int64_t round_up(int64_t x, int64_t unit) { return (x + unit - 1) / unit * unit; }

}  // namespace

// The occupancy calculator's three limits (cuda_occupancy.h: cudaOccMaxBlocksPerSMWarpsLimit,
// ...RegsLimit, ...SmemLimit) and the SM's block limit; the smallest wins.
Occupancy occupancy(const GpuSpec& gpu, int64_t threads, int registers, int64_t shared_bytes) {
  LINATTN_CHECK(threads >= 1 && threads <= 1024, "occupancy: a block of ", threads, " threads (1 to 1024)");
  const int warps_per_block = int((threads + gpu.warp_size - 1) / gpu.warp_size);
  const int max_warps = gpu.threads_per_sm / gpu.warp_size;
  struct Limit {
    int blocks;
    const char* name;
  };
  // Registers are allocated per warp in units of reg_alloc_unit, from each of the SM's sub-partitions;
  // a block must also fit the per-block limit with its warps rounded up to the sub-partitions.
  int by_regs = INT_MAX;
  if (registers > 0) {
    const int per_warp = int(round_up(int64_t(registers) * gpu.warp_size, gpu.reg_alloc_unit));
    const int64_t per_block = int64_t(per_warp) * round_up(warps_per_block, gpu.sub_partitions);
    if (registers > gpu.max_regs_per_thread || per_block > gpu.regs_per_block)
      by_regs = 0;
    else
      by_regs = (gpu.regs_per_sm / gpu.sub_partitions / per_warp) * gpu.sub_partitions / warps_per_block;
  }
  // Shared memory: the block's own plus the driver's reservation, in allocation units.
  int by_smem = INT_MAX;
  const int64_t smem = round_up(shared_bytes + gpu.smem_reserved_per_block, gpu.smem_alloc_unit);
  if (shared_bytes > gpu.smem_per_block_optin)
    by_smem = 0;
  else
    by_smem = int(gpu.smem_per_sm / smem);
  const Limit limits[] = {{max_warps / warps_per_block, "threads"},
                          {by_regs, "registers"},
                          {by_smem, "shared memory"},
                          {gpu.max_blocks_per_sm, "blocks"}};
  const Limit* least = std::min_element(std::begin(limits), std::end(limits),
                                        [](const Limit& a, const Limit& b) { return a.blocks < b.blocks; });
  Occupancy o;
  o.blocks_per_sm = least->blocks;
  o.warps_per_sm = o.blocks_per_sm * warps_per_block;
  o.fraction = double(o.warps_per_sm) / max_warps;
  o.limiter = least->name;
  return o;
}

double waves(const GpuSpec& gpu, int64_t blocks, int blocks_per_sm) {
  if (blocks_per_sm <= 0) return 0;
  return double(blocks) / (double(gpu.sms) * blocks_per_sm);
}

const char* math_unit_name(MathUnit m) {
  switch (m) {
    case MathUnit::f32: return "f32";
    case MathUnit::tf32: return "tf32";
    case MathUnit::bf16: return "bf16";
  }
  return "?";
}

double peak_tflops(const GpuSpec& gpu, MathUnit m) {
  switch (m) {
    case MathUnit::f32: return gpu.f32_tflops;
    case MathUnit::tf32: return gpu.tf32_tflops;
    case MathUnit::bf16: return gpu.bf16_tflops;
  }
  return gpu.f32_tflops;
}

Roofline roofline(const GpuSpec& gpu, double flops, double bytes, MathUnit m, double sm_share) {
  LINATTN_CHECK(sm_share > 0 && sm_share <= 1, "roofline: sm_share ", sm_share, " is not in (0, 1]");
  Roofline r;
  r.compute_us = flops / (peak_tflops(gpu, m) * 1e12) * 1e6;
  r.memory_us = bytes / (gpu.hbm_tb_per_s * 1e12) * 1e6;
  r.memory_bound = r.memory_us > r.compute_us;
  r.us = std::max(r.compute_us, r.memory_us) / sm_share;
  return r;
}

}  // namespace linattn::cuda
