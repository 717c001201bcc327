// CUDA embedding lookup (float32) with the argument order and semantics of kernels/cpu/embedding.h.
// Pointers are device memory; ids must be in [0, V) (the caller checks them: check_token_ids, kernels/op_types.h).
#pragma once

#include <cstdint>

#include "kernels/cuda/no_cuda.h"

namespace linattn::cuda {

#ifdef LINATTN_CUDA
// y: [N, D]; ids: [N]; table: [V, D]
void embedding_forward(float* y, const int32_t* ids, const float* table, int64_t N, int64_t V, int64_t D);
// forward: y_i = table[ids_i]  =>  dtable[ids_i] += dy_i
// Deterministic without atomics: each block owns a range of table rows and adds the rows of dy
// that land there in token order, so the result equals the CPU kernel's bit for bit.
// dtable: [V, D] (+=); dy: [N, D]
void embedding_backward(float* dtable, const int32_t* ids, const float* dy, int64_t N, int64_t V, int64_t D);
#else
inline void embedding_forward(float*, const int32_t*, const float*, int64_t, int64_t, int64_t) { LINATTN_NO_CUDA(); }
inline void embedding_backward(float*, const int32_t*, const float*, int64_t, int64_t, int64_t) { LINATTN_NO_CUDA(); }
#endif

}  // namespace linattn::cuda
