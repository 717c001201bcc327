// The column blocks of a row-major matrix: a product of several weights at once (autograd's
// ops::linears) writes one [N, C] result whose columns are each weight's output side by side.
// split_columns copies block i into its own [N, c_i] matrix (and its bf16 copy, when asked);
// join_columns is the inverse, for the gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace linattn::cpu {

// x: [N, C] (T, or bf16 for T float: widened exactly), C = sum of widths; parts[i]: [N, widths[i]];
// copies[i]: its bf16 copy, or null (copies empty: none).
template <class T, class X = T>
void split_columns(const std::vector<T*>& parts, const std::vector<bfloat16*>& copies,
                   const std::vector<int64_t>& widths, const X* x, int64_t N);
// y: [N, C] (T, or bf16 for T float); parts[i]: [N, widths[i]].
template <class T, class Y>
void join_columns(Y* y, const std::vector<const T*>& parts, const std::vector<int64_t>& widths, int64_t N);

}  // namespace linattn::cpu
