#include "kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/exp.h"
#include "kernels/cpu/stored.h"

namespace linattn::cpu {

template <class T>
CrossEntropySum cross_entropy_forward(T* lse, const T* logits, const int32_t* targets, int64_t N, int64_t V,
                                      int32_t ignore_index) {
  for (int64_t i = 0; i < N; ++i)
    LINATTN_CHECK(targets[i] == ignore_index || (targets[i] >= 0 && targets[i] < V), "cross_entropy: target id ",
                  targets[i], " at row ", i, " is outside the vocabulary [0, ", V, ") and is not the ignore index ",
                  ignore_index);
  double loss_sum = 0;
  int64_t count = 0;
  int64_t bad_row = std::numeric_limits<int64_t>::max();
#pragma omp parallel for reduction(+ : loss_sum, count) reduction(min : bad_row) if (N * V > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    const T* row = logits + i * V;
    T m = row[0];
    for (int64_t j = 1; j < V; ++j) m = row[j] > m ? row[j] : m;
    T sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += exp_nonpos(row[j] - m);
    lse[i] = m + std::log(sum);
    if (targets[i] == ignore_index) continue;
    double loss = double(lse[i]) - double(row[targets[i]]);
    if (!std::isfinite(loss)) bad_row = std::min(bad_row, i);
    loss_sum += loss;
    count += 1;
  }
  if (bad_row != std::numeric_limits<int64_t>::max())
    throw NonFiniteError("cross_entropy: non-finite loss at row " + std::to_string(bad_row) +
                         " (the logits hold NaN or Inf; the model diverged: lower the learning rate or check the data)");
  return {loss_sum, count};
}

template <class T, class D>
void cross_entropy_backward(D* dlogits, const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V,
                            int32_t ignore_index, T scale, bool write) {
#pragma omp parallel for if (N * V > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    D* drow = dlogits + i * V;
    if (targets[i] == ignore_index) {
      if (write)
        for (int64_t j = 0; j < V; ++j) store(drow[j], T(0));
      continue;
    }
    const T* row = logits + i * V;
    const int32_t t = targets[i];
    const T row_lse = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < V; ++j) {
      const T d = (write ? T(0) : load(drow[j])) + scale * exp_nonpos(row[j] - row_lse);
      store(drow[j], j == t ? d - scale : d);
    }
  }
}

template CrossEntropySum cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int32_t);
template CrossEntropySum cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t,
                                                       int32_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t,
                                            int32_t, float, bool);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int64_t, int64_t,
                                             int32_t, double, bool);
template void cross_entropy_backward<float, bfloat16>(bfloat16*, const float*, const float*, const int32_t*, int64_t,
                                                      int64_t, int32_t, float, bool);

}  // namespace linattn::cpu
