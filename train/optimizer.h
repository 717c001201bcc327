// AdamW over the flat parameter buffers, and the gradient norm and scaling that clipping uses.
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
// sqrt(sum of squared gradients) of parameter `id` alone, accumulated in float64.
double grad_norm(const Parameters& params, int id);
// Multiplies every gradient by c.
void scale_grads(const Parameters& params, double c);

}  // namespace linattn
