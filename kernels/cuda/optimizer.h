// CUDA kernels of the optimizer step over the flat gradient and parameter buffers (float32):
// the global gradient norm (a deterministic two-pass reduction in float64), clipping
// (scale_forward(g, g, c, n) from kernels/cuda/elementwise.h) and fused AdamW with the update of
// train/optimizer.cpp. Pointers are device memory.
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

// The per-step constants of AdamW (backend::AdamWStep rounded to float32, as the CPU entry rounds them).
struct AdamWStep {
  float beta1, beta2;
  float step_size;  // lr / (1 - beta1^t)
  float rbc2;       // 1 / (1 - beta2^t)
  float eps;
  float decay;  // lr * weight_decay for a decayed parameter, else 0
};

#ifdef LINATTN_CUDA
// *sum_sq = sum_i g_i^2, accumulated in float64: per-block partial sums over a grid whose size
// depends only on n, then one block adds them in a fixed order, so a given gradient gives the same
// bits on every run. The norm is sqrt(*sum_sq). sum_sq: [1]; g: [n]. Not reentrant across streams
// (the partial sums live in one static device buffer).
void sum_squares(double* sum_sq, const float* g, int64_t n);

// forward (the AdamW update of train/optimizer.cpp, every product and sum rounded separately,
// never fused, so it matches a float32 CPU loop compiled without FMA contraction bit for bit):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
//   w -= step_size m / (sqrt(v rbc2) + eps) + decay w
// w, m, v: [n] (updated in place); g: [n]
void adamw_update(float* w, float* m, float* v, const float* g, int64_t n, const AdamWStep& s);
#else
inline void sum_squares(double*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void adamw_update(float*, float*, float*, const float*, int64_t, const AdamWStep&) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
