#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "testing.h"

namespace linattn {
namespace {

using testing::compare;
using testing::dot;
using testing::finite_difference;
using testing::random_tensor;

Tensor rope(const Tensor& x, int64_t pos_offset, double theta = kRopeTheta) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  cpu::rope_forward<double>(y.data<double>(), x.data<double>(), x.size(0), x.size(1), x.size(2), x.size(3), pos_offset,
                            theta);
  return y;
}

// The rotate-half formula written out: channel i pairs with channel i + d/2 and the pair turns by
// (t + offset) * theta^(-2i/d).
Tensor reference_rope(const Tensor& x, int64_t pos_offset, double theta) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), d = x.size(3), half = d / 2;
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double* xr = x.data<double>() + ((b * T + t) * H + h) * d;
        double* yr = y.data<double>() + ((b * T + t) * H + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const double a = double(t + pos_offset) / std::pow(theta, double(2 * i) / double(d));
          yr[i] = xr[i] * std::cos(a) - xr[i + half] * std::sin(a);
          yr[i + half] = xr[i + half] * std::cos(a) + xr[i] * std::sin(a);
        }
      }
  return y;
}

TEST(Rope, MatchesRotateHalfFormula) {
  Rng rng(21);
  Tensor x = random_tensor({2, 9, 3, 8}, rng);
  for (int64_t offset : {0, 5, 1000})
    for (double theta : {10000.0, 500.0}) {
      SCOPED_TRACE("offset=" + std::to_string(offset) + " theta=" + std::to_string(theta));
      // Same formula in float64; the angles reach ~1000 rad, where computing theta^(-2i/d) by pow
      // or by division differs by ~1e-16 relative, i.e. ~1e-13 rad: 1e-12.
      EXPECT_CLOSE(rope(x, offset, theta), reference_rope(x, offset, theta), 1e-12);
    }
  // By hand, d=4 at position 1: x = e_0 turns by 1 rad within the pair (0, 2), not (0, 1) as in
  // the interleaved convention: y = (cos 1, 0, sin 1, 0).
  Tensor e0 = Tensor::zeros({1, 2, 1, 4}, DType::f64);
  e0.data<double>()[4] = 1;  // position 1, channel 0
  Tensor y = rope(e0, 0);
  const double want[] = {0, 0, 0, 0, std::cos(1.0), 0, std::sin(1.0), 0};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.data<double>()[i], want[i], 1e-15) << "entry " << i;
}

// Rows t0.. of a long sequence equal the same rows rotated on their own with offset t0
// (what decoding does, one token at a time).
TEST(Rope, OffsetContinuesTheSequence) {
  Rng rng(22);
  Tensor x = random_tensor({1, 10, 2, 6}, rng);
  Tensor full = rope(x, 0);
  Tensor tail = Tensor::empty({1, 4, 2, 6}, DType::f64);
  std::copy_n(x.data<double>() + 6 * 12, 4 * 12, tail.data<double>());
  Tensor tail_full = Tensor::empty({1, 4, 2, 6}, DType::f64);
  std::copy_n(full.data<double>() + 6 * 12, 4 * 12, tail_full.data<double>());
  EXPECT_CLOSE(rope(tail, 6), tail_full, 1e-15);
}

TEST(Rope, InPlace) {
  Rng rng(23);
  Tensor x = random_tensor({2, 5, 2, 8}, rng);
  Tensor want = rope(x, 2);
  cpu::rope_forward<double>(x.data<double>(), x.data<double>(), 2, 5, 2, 8, 2, kRopeTheta);
  EXPECT_CLOSE(x, want, 0.0);
}

// q.k after the rotation depends only on the difference of the positions: shifting both by s
// leaves it unchanged (to rounding; the angles are O(100) rad, so cos/sin carry ~1e-14 error).
TEST(Rope, DotProductDependsOnlyOnRelativePosition) {
  Rng rng(24);
  const int64_t d = 16;
  Tensor q = random_tensor({1, 1, 1, d}, rng), k = random_tensor({1, 1, 1, d}, rng);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 3}, {3, 7}, {20, 20}, {100, 1}}) {
    const double want = dot(rope(q, m), rope(k, n));
    for (int64_t shift : {1, 13, 250}) {
      const double got = dot(rope(q, m + shift), rope(k, n + shift));
      EXPECT_NEAR(got, want, 1e-12 * std::abs(want) + 1e-13) << "m=" << m << " n=" << n << " shift=" << shift;
    }
    // and it does depend on the difference
    EXPECT_GT(std::abs(dot(rope(q, m + 1), rope(k, n)) - want), 1e-3) << "m=" << m << " n=" << n;
  }
}

// Backward: loss = <rope(x), dy>, against central differences (rope is linear in x, so the
// difference quotient is exact up to rounding, ~1e-10 relative); bar 1e-6 as for every backward.
TEST(Rope, GradientMatchesFiniteDifferences) {
  Rng rng(25);
  for (int64_t offset : {0, 37}) {
    Tensor x = random_tensor({2, 5, 3, 6}, rng), dy = random_tensor({2, 5, 3, 6}, rng);
    Tensor fd = finite_difference([&] { return dot(rope(x, offset), dy); }, x);
    Tensor dx = Tensor::zeros(x.shape(), DType::f64);
    cpu::rope_backward<double>(dx.data<double>(), dy.data<double>(), 2, 5, 3, 6, offset, kRopeTheta);
    EXPECT_CLOSE(dx, fd, 1e-6);
    // a gradient perturbed by 1e-5 of its scale in one entry fails the same check
    dx.data<double>()[3] += 1e-5 * testing::max_abs(dx);
    EXPECT_GT(compare(dx, fd).relative, 1e-6);
  }
}

TEST(Rope, BackwardAccumulates) {
  Rng rng(26);
  Tensor dy = random_tensor({1, 7, 2, 4}, rng), dx0 = random_tensor({1, 7, 2, 4}, rng);
  Tensor fresh = Tensor::zeros(dy.shape(), DType::f64), acc = dx0.clone();
  cpu::rope_backward<double>(fresh.data<double>(), dy.data<double>(), 1, 7, 2, 4, 3, kRopeTheta);
  cpu::rope_backward<double>(acc.data<double>(), dy.data<double>(), 1, 7, 2, 4, 3, kRopeTheta);
  for (int64_t i = 0; i < acc.numel(); ++i) acc.data<double>()[i] -= dx0.data<double>()[i];
  EXPECT_CLOSE(acc, fresh, 1e-14);
}

// float32 against float64: the angles are computed in float64 and rounded once.
TEST(Rope, Float32) {
  Rng rng(27);
  Tensor x = random_tensor({2, 50, 2, 64}, rng);
  Tensor x32 = x.to(DType::f32), y32 = Tensor::empty(x.shape(), DType::f32);
  cpu::rope_forward<float>(y32.data<float>(), x32.data<float>(), 2, 50, 2, 64, 100, kRopeTheta);
  EXPECT_CLOSE(y32, reference_rope(x, 100, kRopeTheta), 1e-6);
}

}  // namespace
}  // namespace linattn
