// The shipped ablations (configs/ablations/) load, and the mixer comparison is a fair one: every
// run has the same token budget and parameter counts within 10% of each other.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "layers/model.h"
#include "sweep/sweep_file.h"
#include "train/config.h"

namespace linattn {
namespace {

TEST(ShippedAblations, MixersShareTheTokenAndParameterBudget) {
  const Sweep s = load_sweep("configs/ablations/mixers.yaml");
  ASSERT_EQ(s.runs.size(), 8u);
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const Config c = load_config(s.base, s.set_items(i));
    EXPECT_EQ(c.train.max_tokens, 1000000) << s.runs[i].name;
    EXPECT_EQ(c.train.max_time, 0) << s.runs[i].name;
    EXPECT_EQ(c.train.max_steps, 0) << s.runs[i].name;
    const int64_t n = Model(c.model, DType::f32).params().count();
    lo = std::min(lo, n), hi = std::max(hi, n);
  }
  EXPECT_LE(double(hi) / double(lo), 1.10) << "parameters from " << lo << " to " << hi;
}

TEST(ShippedAblations, MqarLoadsWhereTheBuildHasMqar) {
  Sweep s;
  try {
    s = load_sweep("configs/ablations/mqar.yaml");
  } catch (const Error& e) {
    if (std::string(e.what()).find("unknown key 'source' in 'data'") != std::string::npos)
      GTEST_SKIP() << "this build has no MQAR data (data.source: mqar): " << e.what();
    throw;
  }
  EXPECT_EQ(s.runs.size(), 6u * 3u * 2u);
  EXPECT_EQ(s.compare, "runs");  // the best mixer of each width and number of pairs
}

}  // namespace
}  // namespace linattn
