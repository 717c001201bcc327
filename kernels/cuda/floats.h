// A device array of floats that a kernel reads or writes as float32 but that may be stored as
// bfloat16: an activation a tape node keeps in bf16 (autograd/saved.h), or a product's bf16 operand.
// A bf16 element is read exactly (its bits are a float32's top half) and written rounded to nearest
// even, NaN kept a NaN, as core/dtype.h's from_float and the GPU's __float2bfloat16 do. Which storage
// an array has is one flag for the whole launch, so the branch costs nothing. Host code makes them
// from pointers (kernels/cuda/entries.cpp); a float* converts by itself. No CUDA header is included.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/host_device.h"

namespace linattn::cuda {

// (memcpy is a register move in device code too.)
LINATTN_HD inline float float_from_bf16_bits(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

LINATTN_HD inline uint16_t bf16_bits_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const bool nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu);
  return nan ? uint16_t((u >> 16) | 0x40) : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Read-only: n floats, float32 or (bf16) bfloat16 bits.
struct Floats {
  const void* data = nullptr;
  bool bf16 = false;

  Floats() = default;
  Floats(const float* p) : data(p) {}  // NOLINT(google-explicit-constructor): a float* is the common case
  Floats(const void* p, bool is_bf16) : data(p), bf16(is_bf16) {}

  LINATTN_HD explicit operator bool() const { return data != nullptr; }
  LINATTN_HD float operator[](int64_t i) const {
    return bf16 ? float_from_bf16_bits(static_cast<const uint16_t*>(data)[i]) : static_cast<const float*>(data)[i];
  }
  // The array shifted by `offset` elements.
  LINATTN_HD Floats operator+(int64_t offset) const {
    Floats f;
    f.data = bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(data) + offset)
                  : static_cast<const void*>(static_cast<const float*>(data) + offset);
    f.bf16 = bf16;
    return f;
  }
};

// Written: n floats, float32 or (bf16) bfloat16 bits, rounded on the way in.
struct FloatsOut {
  void* data = nullptr;
  bool bf16 = false;

  FloatsOut() = default;
  FloatsOut(float* p) : data(p) {}  // NOLINT(google-explicit-constructor)
  FloatsOut(void* p, bool is_bf16) : data(p), bf16(is_bf16) {}

  LINATTN_HD void set(int64_t i, float v) const {
    if (bf16) static_cast<uint16_t*>(data)[i] = bf16_bits_from_float(v);
    else static_cast<float*>(data)[i] = v;
  }
};

}  // namespace linattn::cuda
