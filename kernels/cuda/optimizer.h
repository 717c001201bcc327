// CUDA kernels of the optimizer step over the flat gradient and parameter buffers (float32): the
// step's control numbers (the loss, the global gradient norm by a deterministic two-pass reduction
// in float64, the clip factor and the skip decision; kernels/op_types.h's step_control slots) and
// fused AdamW with the update of train/optimizer.cpp, all read and written on the device: the host
// waits for none of them. Pointers are device memory.
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

// The constants of AdamW (backend::AdamWStep rounded to float32, as the CPU entry rounds them); the
// step's own numbers are read from control (step_size, rbc2, decay, rounded to float32 there).
struct AdamWStep {
  float beta1, beta2, eps;
};

#ifdef LINATTN_CUDA
// *sum_sq = sum_i g_i^2, accumulated in float64: per-block partial sums over a grid whose size
// depends only on n, then one block adds them in a fixed order, so a given gradient gives the same
// bits on every run. The norm is sqrt(*sum_sq). sum_sq: [1]; g: [n]. Not reentrant across streams
// (the partial sums live in one static device buffer).
void sum_squares(double* sum_sq, const float* g, int64_t n);

// control[loss] = sum_i losses[i] / n (in float64, in order: the host's loop of train/trainer.cpp),
// control[bad] = 1 when it is not finite, else 0. One thread. control: [step_control::size]; losses: [n].
void step_loss(double* control, const float* losses, int64_t n);

// From the gradients and control[bad]: control[sum_squares] (as sum_squares above, the same bits),
// control[norm] = sqrt of it, control[clip] = max_norm / norm when max_norm > 0 and norm > max_norm
// (else 1), control[skip] = 1 when control[bad] != 0 or the norm is not finite (else 0); in float64,
// rounded as the host rounds them. control: [step_control::size]; g: [n].
void step_control(double* control, const float* g, int64_t n, double max_norm);

// forward (the AdamW update of train/optimizer.cpp, every product and sum rounded separately,
// never fused, so it matches a float32 CPU loop compiled without FMA contraction bit for bit), for
// every element i of the flat buffers, in one launch, unless control[skip] != 0:
//   g = control[clip] != 1 ? g_i * float(control[clip]) : g_i
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
//   w -= step_size m / (sqrt(v rbc2) + eps) + decay w,   decay = control[decay] inside a decayed range, else 0
// (step_size = float(control[step_size]), rbc2 = float(control[rbc2]))
// w, m, v: [n] (updated in place); g: [n] (read only); decay_ranges: [2 r], the ascending element
// offsets begin_0, end_0, begin_1, ... of the ranges [begin_j, end_j) that decay (float64: exact
// integers); control: [step_control::size].
// w16: null, or w's bf16 copy, written from the updated w (round to nearest even, as to_bf16).
void adamw_update(float* w, uint16_t* w16, float* m, float* v, const float* g, int64_t n, const double* decay_ranges,
                  int64_t ranges, const double* control, const AdamWStep& s);
#else
inline void sum_squares(double*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void step_loss(double*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void step_control(double*, const float*, int64_t, double) { LINATTN_NO_CUDA(); }
inline void adamw_update(float*, uint16_t*, float*, float*, const float*, int64_t, const double*, int64_t,
                         const double*, const AdamWStep&) {
  LINATTN_NO_CUDA();
}
#endif

}  // namespace linattn::cuda
