// AdamW over the flat parameter buffers, and the gradient norm and scaling that clipping uses.
#pragma once

#include "layers/parameters.h"
#include "train/config.h"

namespace linattn {

class AdamW {
 public:
  AdamW(const Parameters& params, const TrainConfig& config);

  // One update at learning rate lr from the gradients in params.grads(). Decoupled weight decay
  // (lr * weight_decay * w) applies to the parameters declared with weight_decay. Then the bf16
  // copy of the weights, if the parameters keep one (refresh_bf16_weights).
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

// train.precision: bf16: writes the weights' bf16 copy (Parameters::bf16_values) from the float32
// masters, one conversion over the whole flat buffer; nothing when the parameters keep no copy.
// AdamW::step calls it after its update; call it after anything else writes the weights
// (initialization, a checkpoint, --init-from).
void refresh_bf16_weights(const Parameters& params);

// sqrt(sum of squared gradients) over the whole flat gradient buffer, accumulated in float64.
double grad_norm(const Parameters& params);
// sqrt(sum of squared gradients) of parameter `id` alone, accumulated in float64.
double grad_norm(const Parameters& params, int id);
// Multiplies every gradient by c.
void scale_grads(const Parameters& params, double c);

}  // namespace linattn
