// metrics.jsonl lines: valid JSON for any number (JSON has no NaN or infinity).
#include "train/metrics_log.h"

#include <gtest/gtest.h>

#include <cmath>

namespace linattn {
namespace {

TEST(MetricsLog, LinesAreJsonWithNullForNonFiniteNumbers) {
  EXPECT_EQ(metrics_json_line(10, {{"loss", 2.5}, {"lr", 3e-4}, {"val_bpb", NAN}, {"mfu", INFINITY}}),
            "{\"step\": 10, \"loss\": 2.5, \"lr\": 0.0003, \"val_bpb\": null, \"mfu\": null}");
  EXPECT_EQ(metrics_json_line(1, {{"loss", 1.0 / 3.0}}), "{\"step\": 1, \"loss\": 0.333333333}");
}

}  // namespace
}  // namespace linattn
