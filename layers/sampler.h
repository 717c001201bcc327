// Choosing the next token from logits: greedy at temperature 0, else a seeded draw from the softmax
// of logits / temperature, restricted to the top_k most likely tokens and to the smallest set of
// them whose probability reaches top_p (nucleus sampling).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace linattn {

struct SamplingOptions {
  double temperature = 1.0;  // 0 = greedy (the most likely token; the lowest id on a tie)
  int64_t top_k = 0;         // 0 = every token
  double top_p = 1.0;        // in (0, 1]
};

// Throws naming the flag (--temperature, --top-k, --top-p) when a setting is out of range.
void check_sampling(const SamplingOptions& o);

// One token per row of logits [B, V] (float32 or float64), drawn in row order from rng.
std::vector<int32_t> sample_tokens(const Tensor& logits, const SamplingOptions& o, Rng& rng);

}  // namespace linattn
