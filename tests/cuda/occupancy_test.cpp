// The occupancy and roofline arithmetic of kernels/cuda/occupancy.h on the H100's limits, against
// cases worked by hand from the occupancy calculator's rules (the same numbers as CUDA 13.0's
// cuda_occupancy.h, cudaOccMaxActiveBlocksPerMultiprocessor, with a cudaOccDeviceProp filled with
// these limits). Host arithmetic only: runs in every build.
#include <gtest/gtest.h>

#include "kernels/cuda/occupancy.h"

namespace linattn::cuda {
namespace {

struct Case {
  int threads, registers;
  int64_t shared_bytes;
  int blocks;           // resident blocks per SM
  const char* limiter;  // what stops one more
};

TEST(Occupancy, MatchesTheCalculatorOnTheH100) {
  const GpuSpec h100 = h100_sxm();
  const Case cases[] = {
      // 255 x 32 = 8160 registers a warp, allocated as 8192; 16384 per sub-partition hold 2 warps,
      // 8 per SM: one block of 8 warps.
      {256, 255, 0, 1, "registers"},
      // 32 registers: 1024 a warp, 16 warps per sub-partition = all 64; 2048 threads / 256 = 8 blocks.
      {256, 32, 0, 8, "threads"},
      // 64 registers: 2048 a warp, 8 per sub-partition, 32 warps = 4 blocks of 8.
      {256, 64, 0, 4, "registers"},
      // 65 registers: 2080 -> 2304 a warp, 7 per sub-partition, 28 warps = 3 blocks of 8.
      {256, 65, 0, 3, "registers"},
      // 168 registers: 5376 a warp, 3 per sub-partition, 12 warps = 3 blocks of 4.
      {128, 168, 0, 3, "registers"},
      // 128 registers, 3 warps a block: 4096 a warp, 4 per sub-partition, 16 warps = 5 blocks of 3.
      {96, 128, 0, 5, "registers"},
      // 80 registers, 16 warps: 2560 a warp, 6 per sub-partition, 24 warps = 1 block.
      {512, 80, 0, 1, "registers"},
      // 48 KiB + the 1 KiB reservation = 50176 B; 233472 / 50176 = 4.65 -> 4.
      {256, 40, 48 * 1024, 4, "shared memory"},
      // 100 KiB + 1 KiB = 103424 B -> 2 (the tensor-core attention's 106 KiB: 2 as well).
      {128, 90, 100 * 1024, 2, "shared memory"},
      {1024, 32, 0, 2, "threads"},
      // One warp a block: 64 would fit, but an SM holds at most 32 blocks.
      {32, 16, 0, 32, "blocks"},
      // More shared memory than a block may have: none run.
      {256, 32, 228 * 1024, 0, "shared memory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.threads) + " threads, " + std::to_string(c.registers) + " registers, " +
                 std::to_string(c.shared_bytes) + " B shared");
    const Occupancy o = occupancy(h100, c.threads, c.registers, c.shared_bytes);
    EXPECT_EQ(o.blocks_per_sm, c.blocks);
    EXPECT_EQ(o.limiter, c.limiter);
    EXPECT_EQ(o.warps_per_sm, c.blocks * ((c.threads + 31) / 32));
    EXPECT_DOUBLE_EQ(o.fraction, o.warps_per_sm / 64.0);
  }
}

TEST(Occupancy, UnknownRegistersCountThreadsAndSharedMemoryOnly) {
  // No nvcc report (registers 0): only threads, shared memory and the block limit.
  const Occupancy o = occupancy(h100_sxm(), 256, 0, 0);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_EQ(o.limiter, "threads");
}

TEST(Occupancy, Waves) {
  const GpuSpec h100 = h100_sxm();
  EXPECT_DOUBLE_EQ(waves(h100, 32, 2), 32.0 / 264);  // B4 H4 x 2 column tiles: an eighth of one wave
  EXPECT_DOUBLE_EQ(waves(h100, 528, 2), 2.0);
  EXPECT_DOUBLE_EQ(waves(h100, 10, 0), 0.0);  // cannot run
}

TEST(Roofline, ComputeAndMemoryBounds) {
  const GpuSpec h100 = h100_sxm();
  // 2 * 4096^3 FLOPs in bf16: 137.4 GFLOP / 989 TFLOP/s = 138.97 us; 3 x 4096^2 x 2 B = 100.7 MB at
  // 3.35 TB/s = 30.05 us: compute bound.
  const double n = 4096, flops = 2 * n * n * n, bytes = 3 * n * n * 2;
  Roofline r = roofline(h100, flops, bytes, MathUnit::bf16);
  EXPECT_NEAR(r.compute_us, flops / 989e12 * 1e6, 1e-9);
  EXPECT_NEAR(r.compute_us, 138.97, 0.01);
  EXPECT_NEAR(r.memory_us, 30.05, 0.01);
  EXPECT_FALSE(r.memory_bound);
  EXPECT_DOUBLE_EQ(r.us, r.compute_us);
  // the same in f32 on the CUDA cores: 67 TFLOP/s, 15x longer; tf32: 494
  EXPECT_NEAR(roofline(h100, flops, bytes, MathUnit::f32).us, flops / 67e12 * 1e6, 1e-9);
  EXPECT_NEAR(roofline(h100, flops, bytes, MathUnit::tf32).us, flops / 494e12 * 1e6, 1e-9);
  // A pointwise add of 2^24 floats: 1 FLOP and 12 B an element, memory bound at 60.1 us.
  const double e = double(1 << 24);
  r = roofline(h100, e, 12 * e, MathUnit::f32);
  EXPECT_TRUE(r.memory_bound);
  EXPECT_NEAR(r.us, 12 * e / 3.35e12 * 1e6, 1e-9);
  // A grid of 33 blocks fills a quarter of the 132 SMs: four times as long.
  EXPECT_NEAR(roofline(h100, e, 12 * e, MathUnit::f32, 33.0 / 132).us, 4 * r.us, 1e-9);
  EXPECT_THROW(roofline(h100, e, e, MathUnit::f32, 0), std::exception);
}

}  // namespace
}  // namespace linattn::cuda
