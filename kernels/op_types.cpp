#include "kernels/op_types.h"

#include "core/error.h"

namespace linattn {

void check_token_ids(const int32_t* ids, int64_t N, int64_t V, const char* where) {
  for (int64_t i = 0; i < N; ++i)
    LINATTN_CHECK(ids[i] >= 0 && ids[i] < V, where, ": token id ", ids[i], " at position ", i,
                  " is outside the vocabulary [0, ", V, "); check that the data's tokenizer matches vocab_size");
}

}  // namespace linattn
