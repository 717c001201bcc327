#include "kernels/cpu/columns.h"

#include <numeric>

#include "kernels/cpu/stored.h"

namespace linattn::cpu {

// Calls f(r, i, at) for block i of every row r, `at` the block's first element in the whole [N, C].
template <class F>
static void each_block(const std::vector<int64_t>& widths, int64_t N, F f) {
  const int64_t C = std::accumulate(widths.begin(), widths.end(), int64_t(0));
#pragma omp parallel for if (N * C > (1 << 15))
  for (int64_t r = 0; r < N; ++r) {
    int64_t start = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      f(r, i, r * C + start);
      start += widths[i];
    }
  }
}

template <class T, class X>
void split_columns(const std::vector<T*>& parts, const std::vector<bfloat16*>& copies,
                   const std::vector<int64_t>& widths, const X* x, int64_t N) {
  each_block(widths, N, [&](int64_t r, size_t i, int64_t at) {
    const int64_t w = widths[i];
    for (int64_t j = 0; j < w; ++j) parts[i][r * w + j] = load(x[at + j]);
    if (!copies.empty() && copies[i])
      for (int64_t j = 0; j < w; ++j) store(copies[i][r * w + j], load(x[at + j]));
  });
}

template <class T, class Y>
void join_columns(Y* y, const std::vector<const T*>& parts, const std::vector<int64_t>& widths, int64_t N) {
  each_block(widths, N, [&](int64_t r, size_t i, int64_t at) {
    const int64_t w = widths[i];
    for (int64_t j = 0; j < w; ++j) store(y[at + j], parts[i][r * w + j]);
  });
}

template void split_columns<float>(const std::vector<float*>&, const std::vector<bfloat16*>&,
                                   const std::vector<int64_t>&, const float*, int64_t);
template void split_columns<float, bfloat16>(const std::vector<float*>&, const std::vector<bfloat16*>&,
                                             const std::vector<int64_t>&, const bfloat16*, int64_t);
template void split_columns<double>(const std::vector<double*>&, const std::vector<bfloat16*>&,
                                    const std::vector<int64_t>&, const double*, int64_t);
template void join_columns<float, float>(float*, const std::vector<const float*>&, const std::vector<int64_t>&,
                                         int64_t);
template void join_columns<float, bfloat16>(bfloat16*, const std::vector<const float*>&,
                                            const std::vector<int64_t>&, int64_t);
template void join_columns<double, double>(double*, const std::vector<const double*>&,
                                           const std::vector<int64_t>&, int64_t);

}  // namespace linattn::cpu
