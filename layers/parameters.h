// The model's parameters: declared by name while the model is built, then laid out in one flat
// value buffer and one flat gradient buffer (each parameter a view into both), and under
// train.precision: bf16 a flat buffer of their bf16 copies.
#pragma once

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/flat_buffer.h"
#include "core/rng.h"

namespace linattn {

struct Init {
  // log_of_uniform: log(u), u ~ U(a, b) (fla's A_log); softplus_inverse_of_log_uniform: softplus^-1(dt) with
  // log(dt) ~ U(log a, log b) (fla's dt_bias, so that softplus(dt_bias) is dt).
  enum Kind { normal, uniform, constant, range, log_of_uniform, softplus_inverse_of_log_uniform } kind = normal;
  double a = 0.02;  // normal: stddev; uniform: bound (+-a); constant: the value; range: first value; lower bound
  double b = 0;     // range: last value (entries evenly spaced from a to b); upper bound
  static Init Normal(double std) { return {normal, std, 0}; }
  static Init Uniform(double bound) { return {uniform, bound, 0}; }
  static Init Constant(double v) { return {constant, v, 0}; }
  static Init Range(double first, double last) { return {range, first, last}; }
  static Init LogOfUniform(double lo, double hi) { return {log_of_uniform, lo, hi}; }
  static Init SoftplusInverseOfLogUniform(double lo, double hi) { return {softplus_inverse_of_log_uniform, lo, hi}; }
};

class Parameters {
 public:
  // Declares a parameter (before allocate). weight_decay: whether AdamW decays it.
  int add(const std::string& name, const Shape& shape, Init init, bool weight_decay);
  // Lays every declared parameter out in one value and one gradient buffer.
  void allocate(DType dtype);
  // Draws every parameter from its init, in declaration order, from one seeded stream.
  void initialize(uint64_t seed);
  void zero_grad();
  // Moves the value and gradient buffers (and the bf16 copy) to `device` (a copy, then the old
  // buffers are freed). Variables taken with operator[] before the move still view the old
  // buffers: move first.
  void to(Device device);
  // train.precision: bf16: adds a third flat buffer, the weights in bfloat16, and gives every
  // parameter's Variable its view there (Variable::bf16), which the linear layers' products read.
  // The float32 values stay the masters that the optimizer updates and checkpoints keep; the copy is
  // written from them by refresh_bf16_weights (train/optimizer.h) after every change. Zero until then.
  void keep_bf16_copy();
  bool has_bf16_copy() const { return bf16_.size() > 0; }
  const FlatBuffer& bf16_values() const { return bf16_; }

  const Variable& operator[](int id) const { return vars_.at(size_t(id)); }
  // Matrices first, first + 1, ..., first + count - 1 as one [sum of rows, columns] parameter, its
  // value, gradient and bf16 copy views over theirs, when they share their columns and lie back to
  // back (no padding between them; ops::linears); else an undefined Variable.
  Variable joined(int first, int count) const;
  size_t size() const { return layout_.entries().size(); }
  const std::string& name(int id) const { return layout_.entries().at(size_t(id)).name; }
  bool weight_decay(int id) const { return decay_.at(size_t(id)); }
  int64_t count() const { return layout_.count(); }  // number of scalars

  const FlatLayout& layout() const { return layout_; }
  const FlatBuffer& values() const { return values_; }
  const FlatBuffer& grads() const { return grads_; }
  bool allocated() const { return values_.size() > 0; }

 private:
  FlatLayout layout_;
  std::vector<Init> inits_;
  std::vector<bool> decay_;
  FlatBuffer values_, grads_, bf16_;
  std::vector<Variable> vars_;
  void make_variables();
};

}  // namespace linattn
