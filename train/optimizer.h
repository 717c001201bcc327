// AdamW over the flat parameter buffers, the step's control numbers (loss, gradient norm, clip
// factor, skip decision) that it reads on the device, and the gradient norm and scaling tools use.
#pragma once

#include "layers/parameters.h"
#include "train/config.h"

namespace linattn {

class AdamW {
 public:
  AdamW(const Parameters& params, const TrainConfig& config);

  // One update at learning rate lr from the gradients in params.grads(), as they are (no clipping).
  // Decoupled weight decay (lr * weight_decay * w) applies to the parameters declared with weight_decay.
  // The same pass writes the bf16 copy of the weights, if the parameters keep one (as
  // refresh_bf16_weights would); so does step(lr, control).
  void step(double lr);
  // The training step's update, schedule then update: step(lr, control).
  void step(double lr, const Tensor& control) {
    schedule(lr, control);
    update(control);
  }
  // Counts the step and writes its numbers at learning rate lr into control[step_size, rbc2, decay]
  // (on a GPU queued, without waiting): before the step's work, so that a replayed CUDA graph of the
  // step reads them. Call skipped() when control turns out to have said skip.
  void schedule(double lr, const Tensor& control);
  // One pass over the flat buffers (one launch on a GPU) of the gradients times control[clip], with
  // control's step numbers, skipped on the device when control[skip] is set. control: the step's
  // control numbers (make_step_control; schedule, set_step_loss, set_step_control); it is read where
  // it lives, so queuing the update waits for nothing.
  void update(const Tensor& control) const;
  // The update queued after the last schedule was skipped on the device: it does not count.
  void skipped() { --t_; }

  int64_t steps() const { return t_; }
  const FlatBuffer& m() const { return m_; }
  const FlatBuffer& v() const { return v_; }
  void set_steps(int64_t t) { t_ = t; }

 private:
  const Parameters& params_;
  double beta1_, beta2_, eps_, weight_decay_;
  FlatBuffer m_, v_;
  Tensor decay_ranges_;  // f64 [2 r]: the element ranges [begin, end) of the decayed parameters
  Tensor no_clip_;       // control numbers that clip nothing and skip nothing, for step(lr)
  int64_t t_ = 0;
};

// The step's control numbers (f64 [step_control::size], kernels/op_types.h names the slots), zeroed,
// on `device`.
Tensor make_step_control(Device device);
// control[loss], control[bad] from the micro-batches' losses (on control's device).
void set_step_loss(const Tensor& control, const Tensor& losses);
// control[sum_squares, norm, clip, skip] from the gradients in params.grads() and control[bad]:
// clip = max_norm / norm when max_norm > 0 and norm > max_norm, else 1; skip when bad or the norm is
// not finite. On a GPU all of it stays there until the host reads control.
void set_step_control(const Tensor& control, const Parameters& params, double max_norm);

// train.precision: bf16: writes the weights' bf16 copy (Parameters::bf16_values) from the float32
// masters, one conversion over the whole flat buffer; nothing when the parameters keep no copy.
// AdamW::step writes the copy in its own pass; call this after anything else writes the weights
// (initialization, a checkpoint, --init-from).
void refresh_bf16_weights(const Parameters& params);

// sqrt(sum of squared gradients) over the whole flat gradient buffer, accumulated in float64.
double grad_norm(const Parameters& params);
// sqrt(sum of squared gradients) of parameter `id` alone, accumulated in float64.
double grad_norm(const Parameters& params, int id);
// Multiplies every gradient by c.
void scale_grads(const Parameters& params, double c);

}  // namespace linattn
