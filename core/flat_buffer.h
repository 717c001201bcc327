// Parameters, gradients and optimizer moments each live in one flat buffer; tensors are views.
// A FlatLayout lists named shapes; every FlatBuffer made from it has the same offsets, so the
// optimizer, the gradient norm, the all-reduce and checkpoint I/O are one loop over all().
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace linattn {

class FlatLayout {
 public:
  struct Entry {
    std::string name;
    Shape shape;
    int64_t offset;  // in elements; a multiple of kAlignElems so every view is 64-byte aligned
  };
  static constexpr int64_t kAlignElems = 16;

  int add(const std::string& name, const Shape& shape);  // returns the entry's index
  int find(const std::string& name) const;               // -1 if absent
  const std::vector<Entry>& entries() const { return entries_; }
  int64_t total() const { return total_; }  // elements, padding included
  int64_t count() const;                   // elements, padding excluded

 private:
  std::vector<Entry> entries_;
  int64_t total_ = 0;
};

class FlatBuffer {
 public:
  FlatBuffer() = default;
  FlatBuffer(const FlatLayout& layout, DType dtype, Device device = Device::cpu);  // zero-filled

  const Tensor& all() const { return all_; }  // the whole buffer, 1-D, padding included
  const Tensor& operator[](int i) const { return views_.at(i); }
  size_t size() const { return views_.size(); }

 private:
  Tensor all_;
  std::vector<Tensor> views_;
};

}  // namespace linattn
