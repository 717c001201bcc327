// Embedding lookup: rows of a [V, D] table picked by token ids.
#pragma once

#include <cstdint>

namespace linattn::cpu {

// y: [N, D]; ids: [N] (in [0, V), checked by the caller: check_token_ids, kernels/op_types.h); table: [V, D]
template <class T> void embedding_forward(T* y, const int32_t* ids, const T* table, int64_t N, int64_t V, int64_t D);
// forward: y_i = table[ids_i]  =>  dtable[ids_i] += dy_i
template <class T> void embedding_backward(T* dtable, const int32_t* ids, const T* dy, int64_t N, int64_t V, int64_t D);

}  // namespace linattn::cpu
