#include "layers/parameters.h"

#include <algorithm>
#include <cmath>

namespace linattn {

int Parameters::add(const std::string& name, const Shape& shape, Init init, bool weight_decay) {
  LINATTN_CHECK(!allocated(), "parameter '", name, "' declared after the parameters were allocated");
  inits_.push_back(init);
  decay_.push_back(weight_decay);
  return layout_.add(name, shape);
}

void Parameters::allocate(DType dtype) {
  values_ = FlatBuffer(layout_, dtype);
  grads_ = FlatBuffer(layout_, dtype);
  make_variables();
}

void Parameters::make_variables() {
  vars_.clear();
  for (size_t i = 0; i < values_.size(); ++i)
    vars_.push_back(Variable::parameter(values_[int(i)], grads_[int(i)], has_bf16_copy() ? bf16_[int(i)] : Tensor()));
}

Variable Parameters::joined(int first, int count) const {
  LINATTN_CHECK(allocated(), "joined() before allocate()");
  const auto& entries = layout_.entries();
  LINATTN_CHECK(first >= 0 && count >= 1 && size_t(first + count) <= entries.size(), "joined: parameters ", first,
                " to ", first + count - 1, " of ", entries.size());
  const FlatLayout::Entry& head = entries[size_t(first)];
  if (head.shape.ndim() != 2) return {};
  int64_t rows = 0;
  for (int i = first; i < first + count; ++i) {
    const FlatLayout::Entry& e = entries[size_t(i)];
    if (e.shape.ndim() != 2 || e.shape[1] != head.shape[1] || e.offset != head.offset + rows * head.shape[1]) return {};
    rows += e.shape[0];
  }
  auto view = [&](const FlatBuffer& b) { return b.all().view_at(head.offset, {rows, head.shape[1]}); };
  return Variable::parameter(view(values_), view(grads_), has_bf16_copy() ? view(bf16_) : Tensor());
}

void Parameters::keep_bf16_copy() {
  LINATTN_CHECK(allocated(), "keep_bf16_copy() before allocate()");
  LINATTN_CHECK(values_.all().dtype() == DType::f32, "a bf16 copy of the weights needs float32 masters, got ",
                values_.all().str(), " (train.precision: bf16 needs train.dtype: f32)");
  if (has_bf16_copy()) return;
  bf16_ = FlatBuffer(layout_, DType::bf16, values_.all().device());
  make_variables();
}

void Parameters::initialize(uint64_t seed) {
  LINATTN_CHECK(allocated(), "initialize() before allocate()");
  Rng rng(seed);
  for (size_t i = 0; i < values_.size(); ++i) {
    const Tensor& t = values_[int(i)];
    const Init& init = inits_[i];
    switch (init.kind) {
      case Init::normal: rng.fill_normal(t, 0.0, init.a); break;
      case Init::uniform: rng.fill_uniform(t, -init.a, init.a); break;
      case Init::constant: t.fill_(init.a); break;
      case Init::range:
        dispatch_float(t.dtype(), [&](auto zero) {
          using T = decltype(zero);
          int64_t n = t.numel();
          for (int64_t j = 0; j < n; ++j)
            t.data<T>()[j] = T(n == 1 ? init.a : init.a + (init.b - init.a) * double(j) / double(n - 1));
        });
        break;
      case Init::log_of_uniform:
      case Init::softplus_inverse_of_log_uniform:
        dispatch_float(t.dtype(), [&](auto zero) {
          using T = decltype(zero);
          for (int64_t j = 0; j < t.numel(); ++j) {
            double v;
            if (init.kind == Init::log_of_uniform) {
              v = std::log(std::max(rng.uniform(init.a, init.b), 1e-300));
            } else {
              const double dt = std::exp(rng.uniform(std::log(init.a), std::log(init.b)));
              v = dt + std::log(-std::expm1(-dt));  // softplus(v) = dt
            }
            t.data<T>()[j] = T(v);
          }
        });
        break;
    }
  }
}

void Parameters::zero_grad() { grads_.all().zero_(); }

void Parameters::to(Device device) {
  LINATTN_CHECK(allocated(), "Parameters::to() before allocate()");
  const Tensor& old = values_.all();
  if (old.device() == device) return;
  FlatBuffer values(layout_, old.dtype(), device), grads(layout_, old.dtype(), device);
  values.all().copy_from(old);
  grads.all().copy_from(grads_.all());
  values_ = std::move(values);
  grads_ = std::move(grads);
  if (has_bf16_copy()) {
    FlatBuffer bf16(layout_, DType::bf16, device);
    bf16.all().copy_from(bf16_.all());
    bf16_ = std::move(bf16);
  }
  make_variables();
}

}  // namespace linattn
