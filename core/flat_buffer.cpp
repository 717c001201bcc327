#include "core/flat_buffer.h"

namespace linattn {

int FlatLayout::add(const std::string& name, const Shape& shape) {
  LINATTN_CHECK(find(name) < 0, "duplicate tensor name '", name, "' in a flat layout");
  entries_.push_back({name, shape, total_});
  total_ += (shape.numel() + kAlignElems - 1) / kAlignElems * kAlignElems;
  return int(entries_.size()) - 1;
}

int FlatLayout::find(const std::string& name) const {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].name == name) return int(i);
  return -1;
}

int64_t FlatLayout::count() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.shape.numel();
  return n;
}

FlatBuffer::FlatBuffer(const FlatLayout& layout, DType dtype, Device device)
    : all_(Tensor::zeros({layout.total()}, dtype, device)) {
  views_.reserve(layout.entries().size());
  for (const auto& e : layout.entries())
    views_.emplace_back(all_.storage(), size_t(e.offset) * dtype_size(dtype), e.shape, dtype);
}

}  // namespace linattn
