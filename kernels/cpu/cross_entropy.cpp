#include "kernels/cpu/cross_entropy.h"

#include <cmath>
#include <limits>

#include "core/error.h"

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
    for (int64_t j = 0; j < V; ++j) sum += std::exp(row[j] - m);
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

template <class T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V,
                            int32_t ignore_index, T scale) {
#pragma omp parallel for if (N * V > (1 << 15))
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] == ignore_index) continue;
    const T* row = logits + i * V;
    T* drow = dlogits + i * V;
    for (int64_t j = 0; j < V; ++j) drow[j] += scale * std::exp(row[j] - lse[i]);
    drow[targets[i]] -= scale;
  }
}

template CrossEntropySum cross_entropy_forward<float>(float*, const float*, const int32_t*, int64_t, int64_t, int32_t);
template CrossEntropySum cross_entropy_forward<double>(double*, const double*, const int32_t*, int64_t, int64_t,
                                                       int32_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t,
                                            int32_t, float);
template void cross_entropy_backward<double>(double*, const double*, const double*, const int32_t*, int64_t, int64_t,
                                             int32_t, double);

}  // namespace linattn::cpu
