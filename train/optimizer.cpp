#include "train/optimizer.h"

#include <cmath>

namespace linattn {

AdamW::AdamW(const Parameters& params, const TrainConfig& c)
    : params_(params),
      beta1_(c.beta1),
      beta2_(c.beta2),
      eps_(c.adam_eps),
      weight_decay_(c.weight_decay),
      m_(params.layout(), params.values().all().dtype()),
      v_(params.layout(), params.values().all().dtype()) {}

void AdamW::step(double lr) {
  ++t_;
  const double bc1 = 1.0 - std::pow(beta1_, double(t_));
  const double bc2 = 1.0 - std::pow(beta2_, double(t_));
  dispatch_float(params_.values().all().dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < params_.size(); ++i) {
      T* w = params_.values()[int(i)].template data<T>();
      const T* g = params_.grads()[int(i)].template data<T>();
      T* m = m_[int(i)].template data<T>();
      T* v = v_[int(i)].template data<T>();
      const int64_t n = params_.values()[int(i)].numel();
      const T decay = params_.weight_decay(int(i)) ? T(lr * weight_decay_) : T(0);
      const T b1 = T(beta1_), b2 = T(beta2_), step_size = T(lr / bc1), rbc2 = T(1.0 / bc2), eps = T(eps_);
#pragma omp parallel for simd if (n > (1 << 15))
      for (int64_t j = 0; j < n; ++j) {
        m[j] = b1 * m[j] + (T(1) - b1) * g[j];
        v[j] = b2 * v[j] + (T(1) - b2) * g[j] * g[j];
        w[j] -= step_size * m[j] / (std::sqrt(v[j] * rbc2) + eps) + decay * w[j];
      }
    }
  });
}

double grad_norm(const Parameters& params) {
  const Tensor& g = params.grads().all();
  double sum = 0;
  dispatch_float(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = g.data<T>();
    const int64_t n = g.numel();
#pragma omp parallel for reduction(+ : sum) if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) sum += double(p[i]) * double(p[i]);
  });
  return std::sqrt(sum);
}

void scale_grads(const Parameters& params, double c) {
  const Tensor& g = params.grads().all();
  dispatch_float(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* p = g.data<T>();
    const int64_t n = g.numel();
#pragma omp parallel for simd if (n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) p[i] *= T(c);
  });
}

}  // namespace linattn
