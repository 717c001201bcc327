#include "train/optimizer.h"

#include <cmath>

#include "kernels/backend.h"

namespace linattn {

AdamW::AdamW(const Parameters& params, const TrainConfig& c)
    : params_(params),
      beta1_(c.beta1),
      beta2_(c.beta2),
      eps_(c.adam_eps),
      weight_decay_(c.weight_decay),
      m_(params.layout(), params.values().all().dtype(), params.values().all().device()),
      v_(params.layout(), params.values().all().dtype(), params.values().all().device()) {}

void AdamW::step(double lr) {
  ++t_;
  backend::AdamWStep s{beta1_, beta2_, eps_, lr / (1.0 - std::pow(beta1_, double(t_))),
                       1.0 / (1.0 - std::pow(beta2_, double(t_))), 0.0};
  const Device dev = params_.values().all().device();
  for (size_t i = 0; i < params_.size(); ++i) {
    s.decay = params_.weight_decay(int(i)) ? lr * weight_decay_ : 0.0;
    backend::adamw_step(dev, params_.values()[int(i)], params_.grads()[int(i)], m_[int(i)], v_[int(i)], s);
  }
  refresh_bf16_weights(params_);
}

void refresh_bf16_weights(const Parameters& params) {
  if (!params.has_bf16_copy()) return;
  const Tensor& w = params.values().all();
  backend::convert(w.device(), params.bf16_values().all(), w);
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
