#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace linattn {

namespace {

// The decay's fraction at step `done` of a run of `total` steps whose first `warmup` are the warm-up.
double decay_fraction(int64_t done, int64_t total, int64_t warmup) {
  return double(done - warmup) / double(std::max<int64_t>(1, total - 1 - warmup));
}

}  // namespace

double schedule_progress(const TrainConfig& c, int64_t step, int64_t tokens, int64_t tokens_per_step,
                         double elapsed) {
  double progress = 0;
  if (c.max_steps) progress = std::max(progress, decay_fraction(step, c.max_steps, c.warmup_steps));
  if (c.max_tokens) {
    const int64_t total = (c.max_tokens + tokens_per_step - 1) / tokens_per_step;
    progress = std::max(progress, decay_fraction(tokens / tokens_per_step, total, c.warmup_steps));
  }
  if (c.max_time) progress = std::max(progress, elapsed / c.max_time);
  return std::clamp(progress, 0.0, 1.0);
}

double learning_rate(const TrainConfig& c, int64_t step, double progress) {
  if (step < c.warmup_steps) return c.lr * double(step + 1) / double(c.warmup_steps);
  const double p = std::clamp(progress, 0.0, 1.0);
  switch (c.schedule) {
    case Schedule::constant: return c.lr;
    case Schedule::linear: return c.lr + (c.lr_min - c.lr) * p;
    case Schedule::cosine: return c.lr_min + 0.5 * (c.lr - c.lr_min) * (1.0 + std::cos(M_PI * p));
  }
  return c.lr;
}

}  // namespace linattn
