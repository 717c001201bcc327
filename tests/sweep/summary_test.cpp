// A search's summary on hand-made rows with hand-computed figures: the spread over seeds, the
// tuned value chosen by its mean (not by its best seed), the rule that calls a difference only
// beyond the spread, and the markdown that reports them.
#include "sweep/summary.h"

#include <gtest/gtest.h>

#include <cmath>

namespace linattn {
namespace {

ResultRow run(const std::string& config, const std::string& group, const std::string& lr, const std::string& seed,
              double loss, const std::string& status = "done") {
  ResultRow r;
  r.name = config + "-lr=" + lr + "-seed=" + seed;
  r.config = config;
  r.tuned = "train.lr=" + lr;
  r.group = group;
  r.values = {"[" + config + "]", lr, seed};
  r.params = 100;
  r.state = 10;
  r.val_loss = status == "done" ? loss : NAN;
  r.val_bpb = 1.5 * r.val_loss;  // any other number would do
  r.recall = NAN;
  r.status = status;
  return r;
}

// Four configurations of one group and one of another:
//   A: 1e-3 -> 2.50 2.52 2.54 (mean 2.52); 3e-3 -> 2.40 2.45 2.41 (mean 2.42): A at 3e-3, the best mean.
//   B: 1e-3 -> 2.47 2.48 2.49 (mean 2.48); 3e-3 -> 2.30 2.70 2.65 (mean 2.55, though it holds the best
//      single run): B at 1e-3, whose range [2.47, 2.49] lies above A's [2.40, 2.45]: behind.
//   C: 1e-3 -> 2.44 2.46 2.43 (mean 2.4433); 3e-3 -> failed, 2.60 2.62: C at 1e-3, whose range
//      [2.43, 2.46] overlaps A's: tied.
//   D: 1e-3 -> 2.60 and two pending runs: one seed, not judged.
//   E, alone in group g2: 1e-3 -> 2.00.
std::vector<ResultRow> rows() {
  std::vector<ResultRow> r;
  const std::vector<std::string> seeds = {"1", "2", "3"};
  auto add = [&](const std::string& config, const std::string& group, const std::string& lr,
                 const std::vector<double>& losses, const std::vector<std::string>& status) {
    for (size_t i = 0; i < losses.size(); ++i) r.push_back(run(config, group, lr, seeds[i], losses[i], status[i]));
  };
  const std::vector<std::string> done = {"done", "done", "done"};
  add("A", "", "1.0e-3", {2.50, 2.52, 2.54}, done);
  add("A", "", "3.0e-3", {2.40, 2.45, 2.41}, done);
  for (size_t i = 3; i < 6; ++i) r[i].tokens_per_s = 1000 + 100 * double(i - 3);
  add("B", "", "1.0e-3", {2.47, 2.48, 2.49}, done);
  add("B", "", "3.0e-3", {2.30, 2.70, 2.65}, done);
  add("C", "", "1.0e-3", {2.44, 2.46, 2.43}, done);
  add("C", "", "3.0e-3", {0, 2.60, 2.62}, {"failed", "done", "done"});
  add("D", "", "1.0e-3", {2.60, 0, 0}, {"done", "pending", "pending"});
  add("E", "g2", "1.0e-3", {2.00}, {"done"});
  return r;
}

TEST(Spread, MeanSampleStandardDeviationAndRangeAsComputedByHand) {
  Spread s = spread_of({2.40, 2.45, 2.41});
  EXPECT_EQ(s.n, 3);
  EXPECT_NEAR(s.mean, 2.42, 1e-12);
  // deviations -0.02, 0.03, -0.01: (0.0004 + 0.0009 + 0.0001) / (3 - 1) = 0.0007
  EXPECT_NEAR(s.sd, std::sqrt(0.0007), 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 2.40);
  EXPECT_DOUBLE_EQ(s.max, 2.45);
  s = spread_of({1, 2, 3, 4});  // (2.25 + 0.25 + 0.25 + 2.25) / 3
  EXPECT_NEAR(s.sd, std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  s = spread_of({7});
  EXPECT_EQ(s.n, 1);
  EXPECT_DOUBLE_EQ(s.mean, 7);
  EXPECT_TRUE(std::isnan(s.sd));  // no spread from one seed
  EXPECT_DOUBLE_EQ(s.min, 7);
  EXPECT_EQ(spread_of({}).n, 0);
  EXPECT_TRUE(std::isnan(spread_of({}).mean));
}

TEST(Spread, ADifferenceIsOneOnlyWhenTheRangesDoNotOverlap) {
  const Spread a = spread_of({2.30, 2.33}), b = spread_of({2.35, 2.40}), touching = spread_of({2.33, 2.38});
  EXPECT_TRUE(better_beyond_spread(a, b, "val_loss"));
  EXPECT_FALSE(better_beyond_spread(b, a, "val_loss"));
  EXPECT_FALSE(better_beyond_spread(a, touching, "val_loss"));  // sharing an end is overlapping
  EXPECT_FALSE(better_beyond_spread(spread_of({2.0}), b, "val_loss"));  // one seed: no spread to judge by
  // Recall accuracy: higher is better.
  EXPECT_TRUE(better_beyond_spread(spread_of({0.90, 0.95}), spread_of({0.50, 0.60}), "recall_accuracy"));
  EXPECT_FALSE(better_beyond_spread(spread_of({0.50, 0.60}), spread_of({0.90, 0.95}), "recall_accuracy"));
}

TEST(Summary, EachConfigurationAtTheValueWithTheBestMeanAndItsVerdict) {
  const std::vector<ConfigSummary> c = summarize(rows(), "val_loss");
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].config, "A");
  ASSERT_EQ(c[0].points.size(), 2u);
  EXPECT_EQ(c[0].points[c[0].chosen].tuned, "train.lr=3.0e-3");
  EXPECT_NEAR(c[0].result().mean, 2.42, 1e-12);
  EXPECT_NEAR(c[0].result().sd, std::sqrt(0.0007), 1e-12);
  EXPECT_NEAR(c[0].points[0].metric.mean, 2.52, 1e-12);
  EXPECT_DOUBLE_EQ(c[0].tokens_per_s, 1100);
  EXPECT_EQ(c[1].points[c[1].chosen].tuned, "train.lr=1.0e-3");  // by the mean, not by its best run (2.30)
  EXPECT_NEAR(c[1].result().mean, 2.48, 1e-12);
  EXPECT_NEAR(c[1].result().sd, 0.01, 1e-12);
  // C at 3e-3: the failed run is one of its runs, without a value.
  EXPECT_EQ(c[2].points[1].runs, 3);
  EXPECT_EQ(c[2].points[1].metric.n, 2);
  EXPECT_NEAR(c[2].points[1].metric.mean, 2.61, 1e-12);
  EXPECT_EQ(c[3].result().n, 1);
  EXPECT_EQ(c[3].points[0].runs, 3);

  EXPECT_TRUE(c[0].best_mean);
  EXPECT_EQ(c[0].verdict, "tied for best");  // C's range overlaps A's
  EXPECT_EQ(c[1].verdict, "behind");
  EXPECT_EQ(c[2].verdict, "tied for best");
  EXPECT_EQ(c[3].verdict, "not judged");
  EXPECT_TRUE(c[4].best_mean);  // alone in its group
  EXPECT_EQ(c[4].verdict, "best");

  // Without C, A is ahead of B beyond the spread; D, with one seed, is not judged, so neither is A.
  std::vector<ResultRow> without_c;
  for (const ResultRow& r : rows())
    if (r.config != "C") without_c.push_back(r);
  std::vector<ConfigSummary> w = summarize(without_c, "val_loss");
  EXPECT_EQ(w[0].verdict, "not judged");
  EXPECT_EQ(w[1].verdict, "behind");
  // Without D too, A is the best.
  std::vector<ResultRow> a_b;
  for (const ResultRow& r : without_c)
    if (r.config != "D") a_b.push_back(r);
  w = summarize(a_b, "val_loss");
  EXPECT_EQ(w[0].verdict, "best");
}

TEST(Summary, RecallAccuracyPicksTheHighestMean) {
  std::vector<ResultRow> r = {run("x", "", "1.0e-3", "1", 0), run("x", "", "1.0e-3", "2", 0),
                              run("x", "", "3.0e-3", "1", 0), run("x", "", "3.0e-3", "2", 0)};
  const double recall[] = {0.90, 0.96, 0.99, 0.50};  // means 0.93 and 0.745
  for (size_t i = 0; i < r.size(); ++i) r[i].recall = recall[i];
  EXPECT_EQ(sweep_metric(r), "recall_accuracy");
  const std::vector<ConfigSummary> c = summarize(r, "recall_accuracy");
  EXPECT_EQ(c[0].points[c[0].chosen].tuned, "train.lr=1.0e-3");
  EXPECT_NEAR(c[0].result().mean, 0.93, 1e-12);
}

TEST(Summary, AValueWhereASeedDivergedIsNotChosenWhileAnotherTrainedOnEverySeed) {
  // lr 1e-2: 2.0, diverged, 2.1 (mean 2.05 of two); lr 1e-3: 2.3 on every seed.
  std::vector<ResultRow> r = {run("F", "", "1.0e-2", "1", 2.0), run("F", "", "1.0e-2", "2", 0, "diverged"),
                              run("F", "", "1.0e-2", "3", 2.1), run("F", "", "1.0e-3", "1", 2.3),
                              run("F", "", "1.0e-3", "2", 2.3), run("F", "", "1.0e-3", "3", 2.3)};
  std::vector<ConfigSummary> c = summarize(r, "val_loss");
  EXPECT_EQ(c[0].points[0].diverged, 1);
  EXPECT_EQ(c[0].points[c[0].chosen].tuned, "train.lr=1.0e-3");
  const std::string md = summary_markdown({"model.layers", "train.lr", "train.seed"}, {"train.lr", "train.seed"}, c,
                                          "val_loss", 3);
  EXPECT_NE(md.find("| F | 2.0500 ± 0.0707 (2/3, 1 diverged) | **2.3000 ± 0.0000** |"), std::string::npos) << md;
  // When every value has a seed that diverged, the best mean of what finished is chosen.
  for (ResultRow& row : r)
    if (row.tuned == "train.lr=1.0e-3" && row.name.back() == '1') row.status = "diverged";
  c = summarize(r, "val_loss");
  EXPECT_EQ(c[0].points[c[0].chosen].tuned, "train.lr=1.0e-2");
}

TEST(Summary, AChosenValueAtAnEndOfTheSearchIsMarkedEdge) {
  // G is best at the last of three values, H at the middle one.
  std::vector<ResultRow> r = {run("G", "", "1.0e-3", "1", 3.0), run("G", "", "3.0e-3", "1", 2.5),
                              run("G", "", "1.0e-2", "1", 2.0), run("H", "", "1.0e-3", "1", 3.0),
                              run("H", "", "3.0e-3", "1", 2.0), run("H", "", "1.0e-2", "1", 2.5)};
  const std::string md = summary_markdown({"model.layers", "train.lr", "train.seed"}, {"train.lr", "train.seed"},
                                          summarize(r, "val_loss"), "val_loss", 1);
  EXPECT_NE(md.find("| G **(best mean)** | [G] | 1.0e-2 (edge) | 1/1 | 2.0000 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| H | [H] | 3.0e-3 | 1/1 | 2.0000 |"), std::string::npos) << md;
}

TEST(Summary, TheBestRowsAreTheBestConfigurationsFinishedRunsAtTheChosenValue) {
  std::vector<ResultRow> r = rows();
  mark_best_configs(r, summarize(r, "val_loss"));
  std::vector<std::string> best;
  for (const ResultRow& row : r)
    if (row.best) best.push_back(row.name);
  EXPECT_EQ(best, (std::vector<std::string>{"A-lr=3.0e-3-seed=1", "A-lr=3.0e-3-seed=2", "A-lr=3.0e-3-seed=3",
                                            "E-lr=1.0e-3-seed=1"}));
}

TEST(Summary, MarkdownReportsTheChosenValueTheSpreadAndTheVerdictsInWords) {
  const std::string md = summary_markdown({"model.layers", "train.lr", "train.seed"}, {"train.lr", "train.seed"},
                                          summarize(rows(), "val_loss"), "val_loss", 3);
  EXPECT_NE(md.find("| configuration | model.layers | train.lr (best) | seeds done | mean ± sd | min–max | verdict | "
                    "params | state | tokens/s | bits per byte |\n|---|---|---|---|---|---|---|---|---|---|---|\n"),
            std::string::npos)
      << md;
  // Its bits per byte: of the same runs (at 3.0e-3), 1.5 times their losses here.
  EXPECT_NE(md.find("| A **(best mean)** | [A] | 3.0e-3 | 3/3 | 2.4200 ± 0.0265 | 2.4000–2.4500 | tied for best | 100 "
                    "| 10 | 1100 | 3.6300 ± 0.0397 |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| B | [B] | 1.0e-3 | 3/3 | 2.4800 ± 0.0100 | 2.4700–2.4900 | behind |"), std::string::npos) << md;
  EXPECT_NE(md.find("| D | [D] | 1.0e-3 | 1/3 | 2.6000 |  | not judged |"), std::string::npos) << md;
  EXPECT_NE(md.find("- all configurations: best mean **A** at train.lr=3.0e-3 (2.4200 ± 0.0265); ahead, beyond the "
                    "spread, of B; within the spread (no difference shown) of C; not judged against (fewer than 2 "
                    "finished seeds): D.\n- g2: best mean **E** at train.lr=1.0e-3 (2.0000).\n"),
            std::string::npos)
      << md;
  // The search: every value's mean, the chosen one bold, unfinished seeds counted.
  EXPECT_NE(md.find("| configuration | 1.0e-3 | 3.0e-3 |\n|---|---|---|\n| A | 2.5200 ± 0.0200 | **2.4200 ± 0.0265** |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| C | **2.4433 ± 0.0153** | 2.6100 ± 0.0141 (2/3) |\n| D | **2.6000** (1/3) |  |\n"),
            std::string::npos)
      << md;
}

}  // namespace
}  // namespace linattn
