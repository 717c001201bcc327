// Scalar types and devices a tensor can have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"

namespace linattn {

// bf16: bfloat16 storage (train.precision: bf16), the top 16 bits of an IEEE float32.
enum class DType { f32, f64, i32, bf16 };
enum class Device { cpu, cuda };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : t == DType::bf16 ? 2 : 4; }

// A bfloat16 value as stored: its bits. Arithmetic happens in float: to_float / from_float.
struct bfloat16 {
  uint16_t bits = 0;
};

inline float to_float(bfloat16 x) {
  uint32_t u = uint32_t(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest, ties to even, as the GPU's conversion does; a NaN stays a (quiet) NaN.
inline bfloat16 from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  bool nan = (u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu);
  return {nan ? uint16_t((u >> 16) | 0x40) : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::bf16: return "bf16";
  }
  return "?";
}

inline const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }

// Calls f(T{}) with T the C++ type of a floating dtype: dispatch_float(t, [&](auto zero) { using T = decltype(zero); ... }).
template <class F>
decltype(auto) dispatch_float(DType t, F&& f) {
  if (t == DType::f32) return f(float{});
  LINATTN_CHECK(t == DType::f64, "expected a floating dtype (f32 or f64), got ", dtype_name(t));
  return f(double{});
}

}  // namespace linattn
