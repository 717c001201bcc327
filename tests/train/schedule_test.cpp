// The learning-rate schedule at its edges: the warm-up's first and last steps, the first step after
// it, the last step of the run, no warm-up, and runs bounded by tokens or time instead of steps.
// Expected values are written out from the formulas in train/schedule.h; every comparison is of a
// few float64 operations, so the tolerance is 1e-14 relative (a few ulps).
#include <gtest/gtest.h>

#include <cmath>

#include "train/schedule.h"

namespace linattn {
namespace {

constexpr double kLr = 1e-3, kLrMin = 1e-4, kTol = 1e-14 * kLr;

TrainConfig config(Schedule schedule, int64_t warmup, int64_t max_steps, int64_t max_tokens = 0,
                   double max_time = 0) {
  TrainConfig c;
  c.lr = kLr;
  c.lr_min = kLrMin;
  c.schedule = schedule;
  c.warmup_steps = warmup;
  c.max_steps = max_steps;
  c.max_tokens = max_tokens;
  c.max_time = max_time;
  return c;
}

// The learning rate of `step` in a run bounded by steps only.
double lr_at(const TrainConfig& c, int64_t step) {
  return learning_rate(c, step, schedule_progress(c, step, /*tokens=*/0, /*tokens_per_step=*/1, /*elapsed=*/0));
}

TEST(Schedule, WarmupRampsToLrOnItsLastStep) {
  for (Schedule s : {Schedule::cosine, Schedule::linear, Schedule::constant}) {
    TrainConfig c = config(s, /*warmup=*/10, /*max_steps=*/100);
    EXPECT_NEAR(lr_at(c, 0), kLr / 10, kTol);  // step 0: one tenth of the way up
    EXPECT_NEAR(lr_at(c, 4), kLr / 2, kTol);
    EXPECT_NEAR(lr_at(c, 9), kLr, kTol);       // the last warm-up step reaches lr
    EXPECT_NEAR(lr_at(c, 10), kLr, kTol);      // the first step after it starts the decay at lr
  }
}

TEST(Schedule, DecayEndsAtLrMinOnTheLastStep) {
  // 100 steps, 10 of warm-up: the decay runs over steps 10..99, progress (step - 10) / 89.
  TrainConfig cosine = config(Schedule::cosine, 10, 100), linear = config(Schedule::linear, 10, 100),
              constant = config(Schedule::constant, 10, 100);
  EXPECT_NEAR(lr_at(cosine, 99), kLrMin, kTol);
  EXPECT_NEAR(lr_at(linear, 99), kLrMin, kTol);
  EXPECT_NEAR(lr_at(constant, 99), kLr, kTol);
  // One step after the start and one before the end.
  const double p1 = 1.0 / 89, p88 = 88.0 / 89;
  EXPECT_NEAR(lr_at(cosine, 11), kLrMin + (kLr - kLrMin) * (1 + std::cos(M_PI * p1)) / 2, kTol);
  EXPECT_NEAR(lr_at(cosine, 98), kLrMin + (kLr - kLrMin) * (1 + std::cos(M_PI * p88)) / 2, kTol);
  EXPECT_NEAR(lr_at(linear, 11), kLr - (kLr - kLrMin) * p1, kTol);
  EXPECT_NEAR(lr_at(linear, 98), kLr - (kLr - kLrMin) * p88, kTol);
  // Halfway through the decay (step 54.5 of 10..99 falls between steps; use 101 steps: 10..100).
  TrainConfig cosine101 = config(Schedule::cosine, 10, 101), linear101 = config(Schedule::linear, 10, 101);
  EXPECT_NEAR(lr_at(cosine101, 55), (kLr + kLrMin) / 2, kTol);
  EXPECT_NEAR(lr_at(linear101, 55), (kLr + kLrMin) / 2, kTol);
  // Past the end (a resumed run with a smaller max_steps) stays at lr_min.
  EXPECT_NEAR(lr_at(cosine, 150), kLrMin, kTol);
}

TEST(Schedule, WithoutWarmupStepZeroRunsAtLr) {
  for (Schedule s : {Schedule::cosine, Schedule::linear, Schedule::constant}) {
    TrainConfig c = config(s, /*warmup=*/0, /*max_steps=*/5);
    EXPECT_NEAR(lr_at(c, 0), kLr, kTol);
    EXPECT_NEAR(lr_at(c, 4), s == Schedule::constant ? kLr : kLrMin, kTol);
  }
  TrainConfig linear = config(Schedule::linear, 0, 5);
  EXPECT_NEAR(lr_at(linear, 2), (kLr + kLrMin) / 2, kTol);
}

TEST(Schedule, TokenBoundCountsStepsInTokens) {
  // 512 tokens a step; max_tokens = 50 * 512 + 1 allows 51 steps (the 51st crosses the bound), 5 of warm-up.
  const int64_t tps = 512;
  TrainConfig c = config(Schedule::linear, 5, /*max_steps=*/0, /*max_tokens=*/50 * tps + 1);
  auto lr = [&](int64_t step, int64_t steps_done) {
    return learning_rate(c, step, schedule_progress(c, step, steps_done * tps, tps, /*elapsed=*/0));
  };
  EXPECT_NEAR(lr(0, 0), kLr / 5, kTol);
  EXPECT_NEAR(lr(4, 4), kLr, kTol);
  EXPECT_NEAR(lr(5, 5), kLr, kTol);       // the decay starts after the warm-up, with no jump
  EXPECT_NEAR(lr(50, 50), kLrMin, kTol);  // the last step the bound allows runs at lr_min
  EXPECT_NEAR(lr(30, 30), kLr + (kLrMin - kLr) * 25.0 / 45, kTol);
  // Skipped steps add no tokens: step 7 after 2 skipped steps is the first step of the decay.
  EXPECT_NEAR(lr(7, 5), kLr, kTol);
  // A bound that is a whole number of steps: 50 steps, the last one at lr_min.
  c.max_tokens = 50 * tps;
  EXPECT_NEAR(lr(49, 49), kLrMin, kTol);
}

TEST(Schedule, TimeBoundFollowsTheClock) {
  TrainConfig c = config(Schedule::linear, 2, /*max_steps=*/0, /*max_tokens=*/0, /*max_time=*/100);
  auto lr = [&](int64_t step, double elapsed) {
    return learning_rate(c, step, schedule_progress(c, step, 0, 512, elapsed));
  };
  EXPECT_NEAR(lr(0, 30), kLr / 2, kTol);  // the warm-up goes by steps whatever the clock says
  EXPECT_NEAR(lr(1, 50), kLr, kTol);
  EXPECT_NEAR(lr(2, 25), kLr + (kLrMin - kLr) * 0.25, kTol);
  EXPECT_NEAR(lr(3, 99), kLr + (kLrMin - kLr) * 0.99, kTol);
  EXPECT_NEAR(lr(4, 120), kLrMin, kTol);  // a step that began before the bound but ends after it
}

TEST(Schedule, TheBoundNearestItsEndDecides) {
  // 1000 steps, but 20 * 512 tokens end the run first: the decay follows the tokens.
  const int64_t tps = 512;
  TrainConfig c = config(Schedule::linear, 0, /*max_steps=*/1000, /*max_tokens=*/20 * tps, /*max_time=*/1e6);
  EXPECT_NEAR(learning_rate(c, 19, schedule_progress(c, 19, 19 * tps, tps, 1.0)), kLrMin, kTol);
  EXPECT_NEAR(learning_rate(c, 10, schedule_progress(c, 10, 10 * tps, tps, 1.0)), kLr + (kLrMin - kLr) * 10 / 19,
              kTol);
  // Then the clock runs out first.
  EXPECT_NEAR(learning_rate(c, 10, schedule_progress(c, 10, 10 * tps, tps, 0.9e6)), kLr + (kLrMin - kLr) * 0.9,
              kTol);
}

}  // namespace
}  // namespace linattn
