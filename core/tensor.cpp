#include "core/tensor.h"

#include <cstring>
#include <type_traits>

#include "core/cuda/runtime.h"

namespace linattn {

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape, DType dtype)
    : storage_(std::move(storage)), offset_(byte_offset), shape_(shape), dtype_(dtype) {
  LINATTN_CHECK(offset_ + nbytes() <= storage_->bytes, "a ", str(), " view at byte ", offset_,
                " does not fit in a storage of ", storage_->bytes, " bytes");
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  size_t bytes = size_t(shape.numel()) * dtype_size(dtype);
  return Tensor(std::make_shared<Storage>(bytes, device), 0, shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::scratch(const Shape& shape, DType dtype, Device device) {
  Arena* arena = current_arena();
  if (!arena || arena->device() != device) return empty(shape, dtype, device);
  return Tensor(arena->allocate(size_t(shape.numel()) * dtype_size(dtype)), 0, shape, dtype);
}

Tensor Tensor::scratch_kept(const Shape& shape, DType dtype, Device device) {
  Arena* arena = current_arena();
  if (!arena || arena->device() != device) return empty(shape, dtype, device);
  return Tensor(arena->allocate(size_t(shape.numel()) * dtype_size(dtype), true), 0, shape, dtype);
}

Tensor Tensor::scratch_zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = scratch(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  LINATTN_CHECK(shape.numel() == numel(), "cannot view ", str(), " as ", shape.str(), ": ", numel(),
                " elements vs ", shape.numel());
  return Tensor(storage_, offset_, shape, dtype_);
}

Tensor Tensor::narrow(int64_t begin, int64_t end) const {
  LINATTN_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= size(0), "narrow(", begin, ", ", end,
                ") out of range for ", str());
  Shape s = shape_;
  s[0] = end - begin;
  size_t row_bytes = size(0) ? nbytes() / size_t(size(0)) : 0;
  return Tensor(storage_, offset_ + size_t(begin) * row_bytes, s, dtype_);
}

Tensor Tensor::view_at(int64_t offset, const Shape& shape) const {
  LINATTN_CHECK(offset >= 0 && offset + shape.numel() <= numel(), "cannot view ", shape.str(), " at element ", offset,
                " of ", str());
  return Tensor(storage_, offset_ + size_t(offset) * dtype_size(dtype_), shape, dtype_);
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  LINATTN_CHECK(device() == Device::cpu, "to() needs a CPU tensor, got ", device_name(device()));
  if (dtype == dtype_) return clone();
  Tensor t = empty(shape_, dtype, device());
  int64_t n = numel();
  // Through float for bf16 (its only arithmetic type), a plain cast otherwise.
  auto value = [](auto x) {
    if constexpr (std::is_same_v<decltype(x), bfloat16>) return to_float(x);
    else return x;
  };
  auto convert = [&](auto* dst, const auto* src) {
    using D = std::remove_pointer_t<decltype(dst)>;
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<D, bfloat16>) dst[i] = from_float(float(value(src[i])));
      else dst[i] = static_cast<D>(value(src[i]));
    }
  };
  auto from = [&](auto* dst) {
    switch (dtype_) {
      case DType::f32: convert(dst, data<float>()); break;
      case DType::f64: convert(dst, data<double>()); break;
      case DType::i32: convert(dst, data<int32_t>()); break;
      case DType::bf16: convert(dst, data<bfloat16>()); break;
    }
  };
  switch (dtype) {
    case DType::f32: from(t.data<float>()); break;
    case DType::f64: from(t.data<double>()); break;
    case DType::i32: from(t.data<int32_t>()); break;
    case DType::bf16: from(t.data<bfloat16>()); break;
  }
  return t;
}

Tensor Tensor::to(Device target) const {
  Tensor t = empty(shape_, dtype_, target);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  check_same_shape(*this, src, "copy_from");
  check_same_dtype(*this, src, "copy_from");
  if (device() == Device::cpu && src.device() == Device::cpu) std::memcpy(raw(), src.raw(), nbytes());
  else cuda::copy(raw(), src.raw(), nbytes());  // returns once a host destination holds the data
}

void Tensor::zero_() const {
  if (device() == Device::cpu) std::memset(raw(), 0, nbytes());
  else cuda::zero(raw(), nbytes());
}

void Tensor::fill_(double value) const {
  if (device() != Device::cpu) {  // rare (a seed, a constant): fill on the host, copy over (queued)
    Tensor host = empty(shape_, dtype_);
    host.fill_(value);
    cuda::upload_pageable(raw(), host.raw(), nbytes());
    return;
  }
  int64_t n = numel();
  switch (dtype_) {
    case DType::f32: std::fill_n(data<float>(), n, float(value)); break;
    case DType::f64: std::fill_n(data<double>(), n, value); break;
    case DType::i32: std::fill_n(data<int32_t>(), n, int32_t(value)); break;
    case DType::bf16: std::fill_n(data<bfloat16>(), n, from_float(float(value))); break;
  }
}

double Tensor::item() const {
  LINATTN_CHECK(numel() == 1, "item() needs a one-element tensor, got ", str());
  if (device() != Device::cpu) return to(Device::cpu).item();
  switch (dtype_) {
    case DType::f32: return double(data<float>()[0]);
    case DType::f64: return data<double>()[0];
    case DType::i32: return double(data<int32_t>()[0]);
    case DType::bf16: return double(to_float(data<bfloat16>()[0]));
  }
  return 0;
}

std::string Tensor::str() const { return std::string(dtype_name(dtype_)) + shape_.str(); }

void check_same_shape(const Tensor& a, const Tensor& b, const char* where) {
  LINATTN_CHECK(a.shape() == b.shape(), where, ": shape mismatch, ", a.str(), " vs ", b.str());
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* where) {
  LINATTN_CHECK(a.dtype() == b.dtype(), where, ": dtype mismatch, ", a.str(), " vs ", b.str());
}

}  // namespace linattn
