// The shipped ablations (configs/ablations/) load, and the mixer comparison is a fair one: every
// run has the same token budget and parameter counts within 10% of each other, and every mixer is
// searched over the same learning rates (each decaying to a tenth of itself) with the same seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "layers/model.h"
#include "sweep/sweep_file.h"
#include "train/config.h"

namespace linattn {
namespace {

// Every configuration of the sweep at each of `lrs` (lr_min a tenth of it) with seeds 1, 2 and 3:
// each (configuration, lr, seed) once.
void expect_the_issue_28_search(const Sweep& s, size_t configurations, const std::vector<double>& lrs) {
  ASSERT_EQ(s.runs.size(), configurations * lrs.size() * 3);
  EXPECT_EQ(s.seeds, (std::vector<std::string>{"1", "2", "3"}));
  std::set<std::string> seen;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const Config c = load_config(s.base, s.set_items(i));
    EXPECT_NE(std::find(lrs.begin(), lrs.end(), c.train.lr), lrs.end()) << s.runs[i].name;
    EXPECT_NEAR(c.train.lr_min, c.train.lr / 10, 1e-15) << s.runs[i].name;
    EXPECT_TRUE(c.train.seed >= 1 && c.train.seed <= 3) << s.runs[i].name;
    seen.insert(s.runs[i].config + " " + std::to_string(c.train.lr) + " " + std::to_string(c.train.seed));
  }
  EXPECT_EQ(seen.size(), s.runs.size());
}

TEST(ShippedAblations, MixersShareTheTokenAndParameterBudget) {
  const Sweep s = load_sweep("configs/ablations/mixers.yaml");
  expect_the_issue_28_search(s, 5, {1e-3, 3e-3, 1e-2});
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t i = 0; i < s.runs.size(); ++i) {
    const Config c = load_config(s.base, s.set_items(i));
    EXPECT_EQ(c.train.max_tokens, 250000) << s.runs[i].name;
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
  expect_the_issue_28_search(s, 5 * 1 * 2, {1e-3, 3e-3});  // 5 mixers, width 128, 4 and 16 pairs
  EXPECT_EQ(s.compare, "runs");              // the best mixer of each width and number of pairs
  bool attention = false;                    // Zoology's baseline: two layers of global attention
  for (size_t i = 0; i < s.runs.size(); ++i) {
    attention |= s.runs[i].config == "attention-w128-kv16";
    EXPECT_EQ(load_config(s.base, s.set_items(i)).train.max_tokens, 2048000) << s.runs[i].name;  // 500 steps
  }
  EXPECT_TRUE(attention);
}

}  // namespace
}  // namespace linattn
