// The float64 reference and the error bounds of the bf16 products (the gemm entry on bf16 operands),
// shared by the CPU test (tests/kernels/matmul_bf16_test.cpp) and the CUDA one
// (tests/cuda/gemm_bf16_test.cpp).
//
// The bounds, entry by entry, with u = 2^-24 (float32's unit roundoff):
// - On the bf16 operands themselves: each product of two bf16 values (8-bit significands) is exact
//   in float32 (16 bits), so what is left is float32 accumulation over K terms, the alpha scale and
//   the beta add, at most K + 2 roundings of relative size u whatever the order of the sum:
//     |c - c_exact| <= (K + 2) u (|alpha| sum_k |a_ik b_kj| + |beta c0_ij|).
// - On the float32 values they were rounded from: rounding to bf16 moves each operand by at most
//   2^-9 relative (7 stored mantissa bits, to nearest), so each product by (1 + 2^-9)^2 - 1 < 2^-8 +
//   2^-17, the 2^-8 per product basis of every bf16 tolerance in this project; plus the above.
#pragma once

#include <cmath>
#include <vector>

#include "core/dtype.h"

namespace linattn::testing {

constexpr double kFloat32Roundoff = 0x1.0p-24;
constexpr double kBf16ProductRounding = 0x1.0p-8 + 0x1.0p-17;

// The float nearest in bf16 (core/dtype.h's rounding).
inline float round_bf16(float x) { return to_float(from_float(x)); }

// A row-major [rows, cols] float matrix stored with leading dimension ld >= cols (padding NaN, so
// that a product reading it shows).
struct HostMatrix {
  int64_t rows = 0, cols = 0, ld = 0;
  std::vector<float> data;
  float at(int64_t i, int64_t j) const { return data[size_t(i * ld + j)]; }
  std::vector<bfloat16> bf16() const {  // every stored element rounded, NaN padding included
    std::vector<bfloat16> b(data.size());
    for (size_t i = 0; i < data.size(); ++i) b[i] = from_float(data[i]);
    return b;
  }
  HostMatrix rounded() const {  // the same, each element rounded to bf16 (held as float)
    HostMatrix r = *this;
    for (float& x : r.data) x = round_bf16(x);
    return r;
  }
};

// alpha op(A) op(B) + beta C0 in float64 on the values as given, and for each entry its bound
// against that reference: `rounding` per product (0 when the operands are the bf16 ones, else
// kBf16ProductRounding) plus K + 2 float32 roundings.
struct GemmReference {
  std::vector<double> c, bound;  // [M, N] dense
};

inline GemmReference gemm_reference(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                                    const HostMatrix& a, const HostMatrix& b, double beta, const HostMatrix& c0,
                                    double rounding) {
  GemmReference r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, s_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(ta ? a.at(k, i) : a.at(i, k)) * double(tb ? b.at(j, k) : b.at(k, j));
        s += p;
        s_abs += std::abs(p);
      }
      const double old = beta == 0 ? 0.0 : beta * double(c0.at(i, j));
      r.c[size_t(i * N + j)] = alpha * s + old;
      r.bound[size_t(i * N + j)] = std::abs(alpha) * s_abs * (rounding + double(K + 2) * kFloat32Roundoff) +
                                   double(K + 2) * kFloat32Roundoff * std::abs(old);
    }
  return r;
}

// The entry of `c` ([M, N] with leading dimension c.ld) with the largest error over its bound.
struct WorstEntry {
  double error = 0, bound = 0, ratio = 0;
};

inline WorstEntry worst_entry(const HostMatrix& c, const GemmReference& r) {
  WorstEntry w;
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) {
      const double e = std::abs(double(c.at(i, j)) - r.c[size_t(i * c.cols + j)]);
      const double b = r.bound[size_t(i * c.cols + j)];
      const double ratio = std::isnan(e) ? INFINITY : b > 0 ? e / b : (e > 0 ? INFINITY : 0.0);
      if (ratio >= w.ratio) w = {std::isnan(e) ? INFINITY : e, b, ratio};
    }
  return w;
}

}  // namespace linattn::testing
