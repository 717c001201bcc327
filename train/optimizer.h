// AdamW over the flat parameter buffers, the learning-rate schedule, and gradient clipping.
#pragma once

#include "layers/parameters.h"
#include "train/config.h"

namespace linattn {

class AdamW {
 public:
  AdamW(const Parameters& params, const TrainConfig& config);

  // One update at learning rate lr from the gradients in params.grads(). Decoupled weight decay
  // (lr * weight_decay * w) applies to the parameters declared with weight_decay.
  void step(double lr);

  int64_t steps() const { return t_; }
  const FlatBuffer& m() const { return m_; }
  const FlatBuffer& v() const { return v_; }
  void set_steps(int64_t t) { t_ = t; }

 private:
  const Parameters& params_;
  double beta1_, beta2_, eps_, weight_decay_;
  FlatBuffer m_, v_;
  int64_t t_ = 0;
};

// sqrt(sum of squared gradients) over the whole flat gradient buffer, accumulated in float64.
double grad_norm(const Parameters& params);
// Multiplies every gradient by c.
void scale_grads(const Parameters& params, double c);

// The learning rate at a step: linear warmup over warmup_steps, then the schedule down to lr_min
// as `progress` (the fraction of the run's bound used up, in [0, 1]) goes from 0 to 1.
double learning_rate(const TrainConfig& config, int64_t step, double progress);

}  // namespace linattn
