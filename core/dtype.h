// Scalar types and devices a tensor can have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace linattn {

enum class DType { f32, f64, i32 };
enum class Device { cpu, cuda };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : 4; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
  }
  return "?";
}

inline const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

// Calls f(T{}) with T the C++ type of a floating dtype: dispatch_float(t, [&](auto zero) { using T = decltype(zero); ... }).
template <class F>
decltype(auto) dispatch_float(DType t, F&& f) {
  if (t == DType::f32) return f(float{});
  LINATTN_CHECK(t == DType::f64, "expected a floating dtype (f32 or f64), got ", dtype_name(t));
  return f(double{});
}

}  // namespace linattn
