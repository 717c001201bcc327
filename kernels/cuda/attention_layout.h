// The shared-memory layout of the tensor-core attention kernels (attention.cu), in a header of its
// own so that the host code that plans their launches (launch_plan.cpp) computes the same size as
// the kernels. Includes no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/host_device.h"
#include "kernels/cuda/launch_plan.h"

namespace linattn::cuda::tc_attention {

constexpr int kTcWarps = kAttentionTcWarps, kTcThreads = 32 * kTcWarps;
constexpr int TB = kAttentionTB;  // rows and columns of a block tile: 64 queries, 64 keys
constexpr int LDF = TB + 4;       // float scratch stride
constexpr int LDH = TB + 8;       // bf16 scratch stride
constexpr size_t kBf16Bytes = sizeof(uint16_t);

LINATTN_HD constexpr size_t align128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// Shared memory of the tensor-core kernels: four bf16 tiles of TB rows (stride d + 8: q, k, v, do
// as each kernel needs), lse and D of TB rows, then per warp: two float [16, LDF] tiles (scores and
// dP; reused as the [16, d + 4] output tile at the end) and two bf16 [16, LDH] tiles (P and dS), and
// the forward's running output [16, dv + 4] with its row max and sum.
struct TcLayout {
  size_t tile_k, tile_v, stats, warp, warp_bytes, total;
  LINATTN_HD TcLayout(int dk, int dv) {
    tile_k = align128(kBf16Bytes * TB * (dk + 8));
    tile_v = align128(kBf16Bytes * TB * (dv + 8));
    stats = 2 * tile_k + 2 * tile_v;
    warp = stats + align128(sizeof(float) * 2 * TB);
    warp_bytes = align128(sizeof(float) * 2 * 16 * LDF) + align128(kBf16Bytes * 2 * 16 * LDH) +
                 align128(sizeof(float) * 16 * (dv + 4)) + align128(sizeof(float) * 2 * 16);
    total = warp + kTcWarps * warp_bytes;
  }
};

}  // namespace linattn::cuda::tc_attention
