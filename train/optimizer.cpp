#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cuda/runtime.h"
#include "kernels/backend.h"

namespace linattn {

namespace {

// The element ranges of the decayed parameters as ascending bounds begin_0, end_0, begin_1, ...;
// neighbours in the layout that both decay share one range (the padding between them is zero, and
// stays zero under AdamW with or without decay).
Tensor decay_ranges(const Parameters& params) {
  std::vector<double> bounds;
  const auto& entries = params.layout().entries();
  bool open = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t begin = entries[i].offset, end = begin + entries[i].shape.numel();
    if (!params.weight_decay(int(i))) {
      open = false;
      continue;
    }
    if (open) {
      bounds.back() = double(end);
    } else {
      bounds.push_back(double(begin));
      bounds.push_back(double(end));
      open = true;
    }
  }
  Tensor t = Tensor::empty({int64_t(bounds.size())}, DType::f64);
  for (size_t i = 0; i < bounds.size(); ++i) t.data<double>()[i] = bounds[i];
  return t;
}

}  // namespace

AdamW::AdamW(const Parameters& params, const TrainConfig& c)
    : params_(params),
      beta1_(c.beta1),
      beta2_(c.beta2),
      eps_(c.adam_eps),
      weight_decay_(c.weight_decay),
      m_(params.layout(), params.values().all().dtype(), params.values().all().device()),
      v_(params.layout(), params.values().all().dtype(), params.values().all().device()) {
  const Device device = params.values().all().device();
  decay_ranges_ = device == Device::cpu ? decay_ranges(params) : decay_ranges(params).to(device);
  Tensor no_clip = make_step_control(Device::cpu);
  no_clip.data<double>()[step_control::clip] = 1.0;
  no_clip_ = device == Device::cpu ? no_clip : no_clip.to(device);
}

void AdamW::step(double lr) { step(lr, no_clip_); }

void AdamW::schedule(double lr, const Tensor& control) {
  ++t_;
  static_assert(step_control::rbc2 == step_control::step_size + 1 && step_control::decay == step_control::rbc2 + 1);
  const double numbers[3] = {lr / (1.0 - std::pow(beta1_, double(t_))), 1.0 / (1.0 - std::pow(beta2_, double(t_))),
                             lr * weight_decay_};
  double* slots = control.data<double>() + step_control::step_size;
  if (control.device() == Device::cpu) std::copy(numbers, numbers + 3, slots);
  else cuda::upload_pageable(slots, numbers, sizeof numbers);  // staged before it returns
}

void AdamW::update(const Tensor& control) const {
  const backend::AdamWStep s{beta1_, beta2_, eps_};
  const Tensor& w = params_.values().all();
  // The bf16 copy the products read is written in the same pass (no conversion of its own).
  const Tensor w16 = params_.has_bf16_copy() ? params_.bf16_values().all() : Tensor();
  backend::adamw_step(w.device(), w, w16, params_.grads().all(), m_.all(), v_.all(), decay_ranges_, control, s);
}

void refresh_bf16_weights(const Parameters& params) {
  if (!params.has_bf16_copy()) return;
  const Tensor& w = params.values().all();
  backend::convert(w.device(), params.bf16_values().all(), w);
}

Tensor make_step_control(Device device) { return Tensor::zeros({step_control::size}, DType::f64, device); }

void set_step_loss(const Tensor& control, const Tensor& losses) {
  backend::step_loss(control.device(), control, losses);
}

void set_step_control(const Tensor& control, const Parameters& params, double max_norm) {
  const Tensor& g = params.grads().all();
  backend::step_control(g.device(), control, g, max_norm);
}

double grad_norm(const Parameters& params) {
  const Tensor& g = params.grads().all();
  return std::sqrt(backend::sum_squares(g.device(), g));
}

double grad_norm(const Parameters& params, int id) {
  const Tensor& g = params.grads()[id];
  return std::sqrt(backend::sum_squares(g.device(), g));
}

void scale_grads(const Parameters& params, double c) {
  const Tensor& g = params.grads().all();
  backend::scale_inplace(g.device(), g, c);
}

}  // namespace linattn
