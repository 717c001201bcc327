// The learning-rate schedule: a linear warm-up over train.warmup_steps, then train.schedule (cosine,
// linear or constant) from train.lr down to train.lr_min over the rest of the run.
#pragma once

#include <cstdint>

#include "train/config.h"

namespace linattn {

// How far the decay has gone when `step` begins, in [0, 1]: the furthest along of the run's bounds.
// `tokens` are the training tokens of the steps taken so far, `elapsed` the training seconds so far.
//   max_steps:  (step - warmup_steps) / (max_steps - 1 - warmup_steps): the first step after the
//               warm-up runs at lr, the last step (max_steps - 1) at lr_min.
//   max_tokens: the same, counting the steps in tokens: the bound allows ceil(max_tokens /
//               tokens_per_step) steps, and tokens / tokens_per_step of them are done.
//   max_time:   elapsed / max_time. The run's length in steps is not known in advance, so the decay
//               follows the clock from the start (the warm-up's time included), and the last step
//               taken, which began before the time was up, runs a little above lr_min.
double schedule_progress(const TrainConfig& config, int64_t step, int64_t tokens, int64_t tokens_per_step,
                         double elapsed);

// The learning rate of `step`: lr * (step + 1) / warmup_steps during the warm-up (steps 0 to
// warmup_steps - 1, so the last warm-up step runs at lr), then the schedule at `progress`:
//   constant: lr;  linear: lr + (lr_min - lr) * p;  cosine: lr_min + (lr - lr_min) * (1 + cos(pi p)) / 2.
double learning_rate(const TrainConfig& config, int64_t step, double progress);

}  // namespace linattn
