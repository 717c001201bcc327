// The plots of a search on hand-made runs: the mean of the seeds at each evaluation they all made,
// in a band from their minimum to their maximum, and the search drawn against log10 of the value.
#include "sweep/plots.h"

#include <gtest/gtest.h>

#include <cmath>

namespace linattn {
namespace {

RunRecord evaluated(const std::vector<std::pair<int64_t, double>>& losses) {
  RunRecord r;
  for (auto [step, loss] : losses) {
    EvalPoint e;
    e.step = step;
    e.tokens = double(step) * 100;
    e.val_loss = loss;
    e.whole_split = true;
    r.evals.push_back(e);
  }
  return r;
}

TEST(BandCurvePlot, TheMeanOfTheSeedsAtTheStepsAllOfThemEvaluatedInABandFromMinToMax) {
  // The second seed also evaluated at step 6 (say, it is the only one finished that far).
  const std::vector<RunRecord> seeds = {evaluated({{2, 5.0}, {4, 4.0}}), evaluated({{2, 6.0}, {4, 3.0}, {6, 2.0}}),
                                        evaluated({{2, 4.0}, {4, 3.5}})};
  const LinePlot p = band_curve_plot({seeds}, {"gla (train.lr=1.0e-3)"}, "val_loss");
  ASSERT_EQ(p.series.size(), 1u);
  const Series& s = p.series[0];
  EXPECT_EQ(s.name, "gla (train.lr=1.0e-3)");
  ASSERT_EQ(s.points.size(), 2u);
  ASSERT_EQ(s.band.size(), 2u);
  EXPECT_DOUBLE_EQ(s.points[0].first, 200);
  EXPECT_DOUBLE_EQ(s.points[0].second, 5.0);  // (5 + 6 + 4) / 3
  EXPECT_DOUBLE_EQ(s.band[0].first, 4.0);
  EXPECT_DOUBLE_EQ(s.band[0].second, 6.0);
  EXPECT_DOUBLE_EQ(s.points[1].second, 3.5);  // (4 + 3 + 3.5) / 3
  EXPECT_DOUBLE_EQ(s.band[1].first, 3.0);
  EXPECT_DOUBLE_EQ(s.band[1].second, 4.0);
}

TEST(TunePlot, EachConfigurationAgainstLog10OfTheValueInOrderWithItsBand) {
  ConfigSummary c;
  c.config = "gla";
  c.points = {{"train.lr=1.0e-2", 2, spread_of({3.0, 3.4})}, {"train.lr=1.0e-3", 2, spread_of({2.0, 2.2})},
              {"train.lr=1.0e-4", 2, {}}};  // no finished run: no point
  c.chosen = 1;
  const LinePlot p = tune_plot("train.lr", {c}, "val_loss");
  EXPECT_EQ(p.x_label, "log10 train.lr");
  ASSERT_EQ(p.series.size(), 1u);
  const Series& s = p.series[0];
  ASSERT_EQ(s.points.size(), 2u);
  EXPECT_NEAR(s.points[0].first, -3, 1e-12);  // sorted by the value
  EXPECT_NEAR(s.points[0].second, 2.1, 1e-12);
  EXPECT_DOUBLE_EQ(s.band[0].first, 2.0);
  EXPECT_DOUBLE_EQ(s.band[0].second, 2.2);
  EXPECT_NEAR(s.points[1].first, -2, 1e-12);
  EXPECT_DOUBLE_EQ(s.band[1].second, 3.4);
  // A list of tuned keys is drawn against its first.
  c.points = {{"train.lr=1.0e-3, train.lr_min=1.0e-4", 1, spread_of({2.0})}};
  EXPECT_NEAR(tune_plot("train.lr", {c}, "val_loss").series[0].points.at(0).first, -3, 1e-12);
}

TEST(FinalBandPlot, TheChosenPointOfEachConfigurationAgainstTheGridValue) {
  ConfigSummary narrow, wide, unfinished;
  narrow.points = {{"train.lr=1.0e-3", 2, spread_of({0.5, 0.7})}};
  narrow.chosen = 0;
  wide.points = {{"train.lr=1.0e-3", 2, spread_of({0.9, 1.0})}};
  wide.chosen = 0;
  unfinished.points = {{"train.lr=1.0e-3", 2, {}}};
  const LinePlot p = final_band_plot("model.hidden_size", {wide, narrow, unfinished}, {128, 64, 256},
                                     {"gla", "gla", "gla"}, "recall_accuracy");
  ASSERT_EQ(p.series.size(), 1u);
  const Series& s = p.series[0];
  ASSERT_EQ(s.points.size(), 2u);  // the unfinished configuration has no point
  EXPECT_DOUBLE_EQ(s.points[0].first, 64);
  EXPECT_DOUBLE_EQ(s.points[0].second, 0.6);
  EXPECT_DOUBLE_EQ(s.band[0].first, 0.5);
  EXPECT_DOUBLE_EQ(s.points[1].first, 128);
  EXPECT_DOUBLE_EQ(s.band[1].second, 1.0);
}

}  // namespace
}  // namespace linattn
