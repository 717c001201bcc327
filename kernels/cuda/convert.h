// float32 <-> bfloat16 on the GPU, for the bf16 matrix products (train.precision: bf16): the inputs
// of a product are rounded to bf16 (round to nearest even, as __float2bfloat16 does) into scratch
// memory, and bf16 results are widened back to float32 exactly. bf16 values travel as their bit
// patterns (uint16_t: the top 16 bits of a float). Pointers are device memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// out [n] = bf16(in [n])
void to_bf16(uint16_t* out, const float* in, int64_t n);
// out [n] = float(in [n]) (exact)
void from_bf16(float* out, const uint16_t* in, int64_t n);
// out [n] += float(in [n]): a bf16 gradient into its float32 sum
void add_from_bf16(float* out, const uint16_t* in, int64_t n);

// n bf16 values of scratch from the caching allocator (core/cuda/runtime.h), returned to it when the
// scratch goes out of scope. Safe to reuse at once: every kernel runs on the compute stream in order.
class Bf16Scratch {
 public:
  explicit Bf16Scratch(int64_t n);
  ~Bf16Scratch();
  Bf16Scratch(const Bf16Scratch&) = delete;
  Bf16Scratch& operator=(const Bf16Scratch&) = delete;
  uint16_t* data() const { return data_; }

 private:
  uint16_t* data_ = nullptr;
};
#else
inline void to_bf16(uint16_t*, const float*, int64_t) { LINATTN_NO_CUDA(); }
inline void from_bf16(float*, const uint16_t*, int64_t) { LINATTN_NO_CUDA(); }
inline void add_from_bf16(float*, const uint16_t*, int64_t) { LINATTN_NO_CUDA(); }
class Bf16Scratch {
 public:
  explicit Bf16Scratch(int64_t) { LINATTN_NO_CUDA(); }
  uint16_t* data() const { return nullptr; }
};
#endif

}  // namespace linattn::cuda
