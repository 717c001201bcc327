#include "layers/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace linattn {

void check_sampling(const SamplingOptions& o) {
  LINATTN_REQUIRE(std::isfinite(o.temperature) && o.temperature >= 0, "--temperature ", o.temperature,
                  " must be >= 0 (0 for greedy decoding)");
  LINATTN_REQUIRE(o.top_k >= 0, "--top-k ", o.top_k, " must be >= 0 (0 for no limit)");
  LINATTN_REQUIRE(o.top_p > 0 && o.top_p <= 1, "--top-p ", o.top_p, " must be in (0, 1] (1 for no limit)");
}

namespace {

int32_t sample_row(const std::vector<double>& logits, const SamplingOptions& o, Rng& rng) {
  const int64_t V = int64_t(logits.size());
  if (o.temperature == 0) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates by decreasing logit (ties: lower id first), cut to the top k.
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  auto higher = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), higher);
  ids.resize(size_t(k));
  // Softmax of logits / temperature over them (relative to the largest, so no exp overflows).
  std::vector<double> p(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) sum += p[i] = std::exp((logits[ids[i]] - logits[ids[0]]) / o.temperature);
  // The nucleus: the fewest most likely tokens whose probability reaches top_p.
  size_t n = 0;
  double kept = 0;
  while (n < p.size() && (n == 0 || kept < o.top_p * sum)) kept += p[n++];
  double u = rng.uniform() * kept;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (u < p[i]) return ids[i];
    u -= p[i];
  }
  return ids[n - 1];
}

}  // namespace

std::vector<int32_t> sample_tokens(const Tensor& logits, const SamplingOptions& o, Rng& rng) {
  check_sampling(o);
  LINATTN_CHECK(logits.ndim() == 2, "sample_tokens: logits must be [B, V], got ", logits.str());
  const int64_t B = logits.shape()[0], V = logits.shape()[1];
  Tensor l = logits.to(DType::f64);
  std::vector<int32_t> out;
  for (int64_t b = 0; b < B; ++b) {
    const double* row = l.data<double>() + b * V;
    out.push_back(sample_row(std::vector<double>(row, row + V), o, rng));
  }
  return out;
}

}  // namespace linattn
