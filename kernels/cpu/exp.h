// The exponentials of the CPU kernels: e^x for x <= 0 (decays, elu, softmax and cross-entropy rows
// less their maximum) and the sigmoid built on it (SiLU, SwiGLU, the swish gate, beta).
//
// float: a branch-free polynomial that the compiler vectorizes inside `#pragma omp simd` loops
// (glibc's expf is a scalar call without -ffast-math, ~10x slower: at width 64 the scalar SiLU of
// the MLPs took a fifth of a training step). double: the float64 instantiations are the ones the
// gradient checks use, so they take the libm value.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace linattn::cpu {

// x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2, then e^r by the degree-7 Taylor-like
// minimax polynomial of Cephes' expf; about 1 ulp. Results below e^-87 (float's normal range) are 0.
// It holds for 0 < x < 88 too (the cross-entropy's rows less their log-sum-exp may round a hair above
// 0); past that the exponent bits overflow, so a caller with larger x passes min(x, 0).
inline float exp_nonpos(float x) {
  // No clamp of x (a select there stops GCC's vectorizer): below -87 the exponent bits are garbage
  // and the mask at the end zeroes them. NaN stays NaN.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = x - n * 0.693359375f;                                          // ln2 split hi + lo: n * hi is exact
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_n = std::bit_cast<float>((int32_t(n) + 127) << 23);
  const int32_t keep = -int32_t(!(x < -87.0f));  // all ones, or zero where e^x underflows
  return std::bit_cast<float>(std::bit_cast<int32_t>(p * two_n) & keep);
}
inline double exp_nonpos(double x) { return std::exp(x); }

// 1 / (1 + e^-x), from e^-|x| (which never overflows): e^-|x| / (1 + e^-|x|) for x < 0. At most 2.1
// ulp in float over [-30, 30] (1 / (1 + expf(-x)): 2.5); NaN stays NaN.
inline float sigmoid(float x) {
  const float e = exp_nonpos(-std::abs(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}
inline double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace linattn::cpu
