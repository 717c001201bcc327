#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstring>

namespace linattn::cpu {

template <class T>
void embedding_forward(T* y, const int32_t* ids, const T* table, int64_t N, int64_t V, int64_t D) {
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t i = 0; i < N; ++i) std::memcpy(y + i * D, table + int64_t(ids[i]) * D, sizeof(T) * D);
}

template <class T>
void embedding_backward(T* dtable, const int32_t* ids, const T* dy, int64_t N, int64_t V, int64_t D) {
  // Ids repeat, so threads split the columns, not the rows: no two threads touch one entry.
  const int64_t block = 16;
#pragma omp parallel for if (N * D > (1 << 15))
  for (int64_t j0 = 0; j0 < D; j0 += block) {
    int64_t j1 = std::min(D, j0 + block);
    for (int64_t i = 0; i < N; ++i) {
      T* row = dtable + int64_t(ids[i]) * D;
      const T* g = dy + i * D;
      for (int64_t j = j0; j < j1; ++j) row[j] += g[j];
    }
  }
}

template void embedding_forward<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t);
template void embedding_forward<double>(double*, const int32_t*, const double*, int64_t, int64_t, int64_t);
template void embedding_backward<float>(float*, const int32_t*, const float*, int64_t, int64_t, int64_t);
template void embedding_backward<double>(double*, const int32_t*, const double*, int64_t, int64_t, int64_t);

}  // namespace linattn::cpu
