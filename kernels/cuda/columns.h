// CUDA column blocks of a row-major [N, C] matrix (float32; split's x also bf16), with the semantics
// of kernels/cpu/columns.h: split_columns copies each block into its own [N, c_i] matrix (and its bf16
// copy where asked), join_columns is the inverse (y float32 or bf16). At most kMaxColumnBlocks
// blocks; pointers are device memory.
#pragma once

#include <cstdint>

#include "kernels/cuda/floats.h"
#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

constexpr int kMaxColumnBlocks = 8;

// The blocks, side by side: block i is columns [start[i], start[i] + width[i]) of the whole.
struct ColumnBlocks {
  int count = 0;
  int64_t width[kMaxColumnBlocks] = {};
  float* part[kMaxColumnBlocks] = {};       // split: written; join: read
  uint16_t* copy[kMaxColumnBlocks] = {};    // split only: bf16 copies, or null
};

#ifdef LINATTN_CUDA
// x: [N, C]
void split_columns(const ColumnBlocks& blocks, Floats x, int64_t N);
// y: [N, C]
void join_columns(FloatsOut y, const ColumnBlocks& blocks, int64_t N);
#else
inline void split_columns(const ColumnBlocks&, Floats, int64_t) { LINATTN_NO_CUDA(); }
inline void join_columns(FloatsOut, const ColumnBlocks&, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
