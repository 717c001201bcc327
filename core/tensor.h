// Tensor: a shape, a dtype and a device over contiguous row-major storage. Views share storage.
#pragma once

#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/memory.h"
#include "core/shape.h"

namespace linattn {

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape, DType dtype);

  // Heap tensors, owned by their storage.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::cpu);
  // Activation tensors: from the current ArenaScope's arena if one is active (a slice that goes back
  // to it with the last tensor viewing it), else the heap.
  static Tensor scratch(const Shape& shape, DType dtype, Device device = Device::cpu);
  static Tensor scratch_zeros(const Shape& shape, DType dtype, Device device = Device::cpu);
  // An activation a tape node keeps until its backward: from the arena's part for those (Arena::
  // allocate's `kept`), else as scratch.
  static Tensor scratch_kept(const Shape& shape, DType dtype, Device device = Device::cpu);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  int64_t size(int dim) const { return shape_[dim]; }
  int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::cpu; }
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw() const { return static_cast<char*>(storage_->ptr) + offset_; }
  template <class T>
  T* data() const {
    LINATTN_CHECK(dtype_ == dtype_of<T>(), "tensor ", str(), " accessed as ", dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

  // Same storage, another shape with the same number of elements.
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor narrow(int64_t begin, int64_t end) const;
  // `shape`'s elements from element `offset` on, sharing storage (they must lie inside this tensor).
  Tensor view_at(int64_t offset, const Shape& shape) const;

  Tensor clone() const;
  Tensor to(DType dtype) const;      // a converted copy (CPU)
  Tensor to(Device device) const;    // a copy on another device (needs the CUDA backend for cuda)
  void copy_from(const Tensor& src) const;  // any devices; the handle is const, the data it views is not
  void zero_() const;
  void fill_(double value) const;

  // The value of a one-element tensor (from any device: a device tensor is copied to the host).
  double item() const;
  std::string str() const;  // e.g. "f32[2, 3]"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
};

// Throws with both shapes and `where` in the message when a and b differ in shape.
void check_same_shape(const Tensor& a, const Tensor& b, const char* where);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* where);

}  // namespace linattn
