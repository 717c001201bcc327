// Tensor shapes: up to 4 dimensions, row-major.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace linattn {

class Shape {
 public:
  static constexpr int kMaxDims = 4;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) {
    LINATTN_CHECK(dims.size() <= kMaxDims, "a shape has at most ", kMaxDims, " dims, got ", dims.size());
    for (int64_t d : dims) {
      LINATTN_CHECK(d >= 0, "negative dimension ", d, " in a shape");
      dims_[ndim_++] = d;
    }
  }

  int ndim() const { return ndim_; }
  int64_t operator[](int i) const { return dims_[normalize(i)]; }
  int64_t& operator[](int i) { return dims_[normalize(i)]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  // Product of all dims but the last: the number of rows when the tensor is seen as [rows, last].
  int64_t rows() const { return ndim_ == 0 ? 1 : numel() / (dims_[ndim_ - 1] ? dims_[ndim_ - 1] : 1); }
  int64_t last() const { return ndim_ == 0 ? 1 : dims_[ndim_ - 1]; }

  // This shape with one more trailing dim.
  Shape appended(int64_t d) const {
    LINATTN_CHECK(ndim_ < kMaxDims, "cannot append a dim to ", str(), ": at most ", kMaxDims, " dims");
    Shape s = *this;
    s.dims_[s.ndim_++] = d;
    return s;
  }

  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }

  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + "]";
  }

 private:
  int normalize(int i) const {
    int j = i < 0 ? i + ndim_ : i;
    LINATTN_CHECK(j >= 0 && j < ndim_, "dim ", i, " out of range for shape ", str());
    return j;
  }
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

}  // namespace linattn
