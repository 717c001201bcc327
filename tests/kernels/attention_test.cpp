#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::compare;
using testing::dot;
using testing::finite_difference;
using testing::random_tensor;

struct Sizes {
  int64_t B, T, H, Hkv, dk, dv, window;
  double scale() const { return 1.0 / std::sqrt(double(dk)); }
};

struct Inputs {
  Tensor q, k, v, dout;  // dout: the random upstream gradient of o
};

Inputs random_inputs(const Sizes& s, Rng& rng) {
  return {random_tensor({s.B, s.T, s.H, s.dk}, rng), random_tensor({s.B, s.T, s.Hkv, s.dk}, rng),
          random_tensor({s.B, s.T, s.Hkv, s.dv}, rng), random_tensor({s.B, s.T, s.H, s.dv}, rng)};
}

struct Result {
  Tensor o, lse, dq, dk, dv;
};

// The kernels under test, float64: forward, then backward into zeroed gradients.
Result run_kernels(const Inputs& in, const Sizes& s) {
  Result r{Tensor::empty({s.B, s.T, s.H, s.dv}, DType::f64), Tensor::empty({s.B, s.H, s.T}, DType::f64),
           Tensor::zeros(in.q.shape(), DType::f64), Tensor::zeros(in.k.shape(), DType::f64),
           Tensor::zeros(in.v.shape(), DType::f64)};
  cpu::attention_forward<double>(r.o.data<double>(), r.lse.data<double>(), in.q.data<double>(), in.k.data<double>(),
                                 in.v.data<double>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, s.scale());
  cpu::attention_backward<double>(r.dq.data<double>(), r.dk.data<double>(), r.dv.data<double>(), in.q.data<double>(),
                                  in.k.data<double>(), in.v.data<double>(), r.o.data<double>(), r.lse.data<double>(),
                                  in.dout.data<double>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, s.scale());
  return r;
}

// Naive quadratic attention, row by row: the scores of row i against every visible key, a
// softmax, and the textbook softmax backward dS_j = P_j (dP_j - sum_j' P_j' dP_j').
Result reference(const Inputs& in, const Sizes& s) {
  Result r{Tensor::zeros({s.B, s.T, s.H, s.dv}, DType::f64), Tensor::zeros({s.B, s.H, s.T}, DType::f64),
           Tensor::zeros(in.q.shape(), DType::f64), Tensor::zeros(in.k.shape(), DType::f64),
           Tensor::zeros(in.v.shape(), DType::f64)};
  const double* q = in.q.data<double>();
  const double* k = in.k.data<double>();
  const double* v = in.v.data<double>();
  const double* dout = in.dout.data<double>();
  auto Q = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.H + h) * s.dk; };
  auto K = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.Hkv + h) * s.dk; };
  auto V = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.Hkv + h) * s.dv; };
  auto O = [&](int64_t b, int64_t t, int64_t h) { return ((b * s.T + t) * s.H + h) * s.dv; };
  std::vector<double> p(s.T), dp(s.T);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t hk = h / (s.H / s.Hkv);
      for (int64_t i = 0; i < s.T; ++i) {
        const int64_t lo = s.window <= 0 ? 0 : std::max<int64_t>(0, i - s.window + 1);
        double mx = -INFINITY;
        for (int64_t j = lo; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < s.dk; ++c) d += q[Q(b, i, h) + c] * k[K(b, j, hk) + c];
          p[j] = s.scale() * d;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = lo; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        r.lse.data<double>()[(b * s.H + h) * s.T + i] = mx + std::log(sum);
        double pdp = 0;
        for (int64_t j = lo; j <= i; ++j) {
          p[j] /= sum;
          double d = 0;
          for (int64_t c = 0; c < s.dv; ++c) {
            r.o.data<double>()[O(b, i, h) + c] += p[j] * v[V(b, j, hk) + c];
            r.dv.data<double>()[V(b, j, hk) + c] += p[j] * dout[O(b, i, h) + c];
            d += dout[O(b, i, h) + c] * v[V(b, j, hk) + c];
          }
          dp[j] = d;
          pdp += p[j] * d;
        }
        for (int64_t j = lo; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * s.scale();
          for (int64_t c = 0; c < s.dk; ++c) {
            r.dq.data<double>()[Q(b, i, h) + c] += ds * k[K(b, j, hk) + c];
            r.dk.data<double>()[K(b, j, hk) + c] += ds * q[Q(b, i, h) + c];
          }
        }
      }
    }
  return r;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Outputs and gradients against the quadratic reference. Both are float64 sums of at most T
// products of O(1) terms evaluated in different orders, so they agree to ~T * 1e-16; the
// bar 1e-10 leaves a wide margin and still catches any wrong mask entry (an O(1/W) change).
TEST(Attention, MatchesQuadraticReference) {
  Rng rng(11);
  for (int64_t T : {1, 17, 64, 200, 1000})
    for (int64_t W : {int64_t(1), int64_t(16), int64_t(64), T + 3}) {
      // GQA (two query heads per kv head) and dk != dv everywhere; the long case is kept small.
      Sizes s = T < 1000 ? Sizes{2, T, 4, 2, 8, 6, W} : Sizes{1, T, 2, 1, 8, 6, W};
      Inputs in = random_inputs(s, rng);
      Result got = run_kernels(in, s), want = reference(in, s);
      SCOPED_TRACE("T=" + std::to_string(T) + " W=" + std::to_string(W));
      EXPECT_CLOSE(got.o, want.o, 1e-10);
      EXPECT_CLOSE(got.lse, want.lse, 1e-10);
      EXPECT_CLOSE(got.dv, want.dv, 1e-10);
      if (W > 1 && T > 1) {
        EXPECT_CLOSE(got.dq, want.dq, 1e-10);
        EXPECT_CLOSE(got.dk, want.dk, 1e-10);
      } else {
        // One visible key per row: the softmax is constant 1, so dq = dk = 0 exactly in the
        // reference, and the kernel's P (dP - D) leaves only the rounding of dP - D (inputs are O(1)).
        EXPECT_EQ(testing::max_abs(want.dq), 0.0);
        EXPECT_EQ(testing::max_abs(want.dk), 0.0);
        EXPECT_LE(testing::max_abs(got.dq), 1e-14);
        EXPECT_LE(testing::max_abs(got.dk), 1e-14);
      }
    }
}

// The window matters: a test that passed with the mask ignored would be worthless.
TEST(Attention, WindowChangesTheResult) {
  Rng rng(12);
  Sizes s{1, 64, 2, 2, 8, 8, 16};
  Inputs in = random_inputs(s, rng);
  Result windowed = run_kernels(in, s);
  s.window = cpu::kGlobalWindow;
  Result global = run_kernels(in, s);
  EXPECT_GT(compare(windowed.o, global.o).relative, 1e-3);
  EXPECT_GT(compare(windowed.dk, global.dk).relative, 1e-3);
}

// A window of at least T masks nothing, and the kernels map it to the global case before any
// arithmetic, so the very same operations run: the bits must be equal, not merely close.
TEST(Attention, WindowAtLeastTIsGlobalBitForBit) {
  Rng rng(13);
  const Sizes global{2, 150, 4, 1, 8, 4, cpu::kGlobalWindow};
  Inputs in = random_inputs(global, rng);
  Result want = run_kernels(in, global);
  for (int64_t W : {int64_t(-1), int64_t(150), int64_t(151), int64_t(1) << 40}) {
    Sizes s = global;
    s.window = W;
    Result got = run_kernels(in, s);
    SCOPED_TRACE("W=" + std::to_string(W));
    EXPECT_TRUE(same_bits(got.o, want.o)) << compare(got.o, want.o).str();
    EXPECT_TRUE(same_bits(got.lse, want.lse)) << compare(got.lse, want.lse).str();
    EXPECT_TRUE(same_bits(got.dq, want.dq)) << compare(got.dq, want.dq).str();
    EXPECT_TRUE(same_bits(got.dk, want.dk)) << compare(got.dk, want.dk).str();
    EXPECT_TRUE(same_bits(got.dv, want.dv)) << compare(got.dv, want.dv).str();
  }
}

// Without the lse (inference), the output is the same.
TEST(Attention, ForwardWithoutLse) {
  Rng rng(20);
  const Sizes s{2, 70, 2, 1, 4, 4, 30};
  Inputs in = random_inputs(s, rng);
  Result want = run_kernels(in, s);
  Tensor o = Tensor::empty(want.o.shape(), DType::f64);
  cpu::attention_forward<double>(o.data<double>(), nullptr, in.q.data<double>(), in.k.data<double>(),
                                 in.v.data<double>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, s.scale());
  EXPECT_TRUE(same_bits(o, want.o)) << compare(o, want.o).str();
}

// Window 1: every position attends only to itself, so o = v (per group) and lse = scale q.k.
TEST(Attention, WindowOneCopiesValues) {
  Rng rng(14);
  Sizes s{1, 70, 2, 1, 4, 3, 1};
  Inputs in = random_inputs(s, rng);
  Result got = run_kernels(in, s);
  for (int64_t t = 0; t < s.T; ++t)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t c = 0; c < s.dv; ++c)
        EXPECT_NEAR(got.o.data<double>()[(t * s.H + h) * s.dv + c], in.v.data<double>()[t * s.dv + c], 1e-15);
}

// d loss / d{q, k, v} with loss = <o, dout>, against central differences (the step's O(h^2)
// error is ~1e-9 relative, see testing.h; 1e-6 is the project's bar for gradient checks).
struct GradientCheck {
  Tensor dq, dk, dv;  // finite differences
  Result analytic;
};

GradientCheck check_gradients(Inputs& in, const Sizes& s) {
  auto loss = [&] {
    Tensor o = Tensor::empty({s.B, s.T, s.H, s.dv}, DType::f64), lse = Tensor::empty({s.B, s.H, s.T}, DType::f64);
    cpu::attention_forward<double>(o.data<double>(), lse.data<double>(), in.q.data<double>(), in.k.data<double>(),
                                   in.v.data<double>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, s.scale());
    return dot(o, in.dout);
  };
  return {finite_difference(loss, in.q), finite_difference(loss, in.k), finite_difference(loss, in.v),
          run_kernels(in, s)};
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  const Sizes cases[] = {
      {2, 13, 2, 2, 5, 3, cpu::kGlobalWindow},  // global
      {2, 13, 2, 2, 4, 4, 4},                   // sliding window
      {1, 11, 4, 1, 4, 3, cpu::kGlobalWindow},  // GQA: four query heads share one kv head
      {2, 9, 4, 2, 3, 5, 3},                    // GQA and a window
      {1, 100, 2, 1, 2, 2, 45},                 // several query and key blocks, window not block-aligned
  };
  Rng rng(15);
  for (const Sizes& s : cases) {
    Inputs in = random_inputs(s, rng);
    GradientCheck g = check_gradients(in, s);
    SCOPED_TRACE("T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) + " Hkv=" + std::to_string(s.Hkv) +
                 " W=" + std::to_string(s.window));
    EXPECT_CLOSE(g.analytic.dq, g.dq, 1e-6);
    EXPECT_CLOSE(g.analytic.dk, g.dk, 1e-6);
    EXPECT_CLOSE(g.analytic.dv, g.dv, 1e-6);
  }
}

// The gradient check is sharp: a gradient off by 1e-5 of its scale in one entry fails it.
TEST(Attention, PerturbedGradientFailsTheCheck) {
  Rng rng(16);
  const Sizes s{1, 12, 2, 1, 4, 4, 5};
  Inputs in = random_inputs(s, rng);
  GradientCheck g = check_gradients(in, s);
  EXPECT_CLOSE(g.analytic.dq, g.dq, 1e-6);  // passes as computed
  for (Tensor* grad : {&g.analytic.dq, &g.analytic.dk, &g.analytic.dv})
    grad->data<double>()[7] += 1e-5 * testing::max_abs(*grad);
  EXPECT_GT(compare(g.analytic.dq, g.dq).relative, 1e-6);
  EXPECT_GT(compare(g.analytic.dk, g.dk).relative, 1e-6);
  EXPECT_GT(compare(g.analytic.dv, g.dv).relative, 1e-6);
}

// Gradients are accumulated into what the buffers already hold.
TEST(Attention, BackwardAccumulates) {
  Rng rng(17);
  const Sizes s{2, 80, 4, 2, 8, 8, 20};
  Inputs in = random_inputs(s, rng);
  Result fresh = run_kernels(in, s);
  Tensor dq = random_tensor(in.q.shape(), rng), dk = random_tensor(in.k.shape(), rng),
         dv = random_tensor(in.v.shape(), rng);
  Tensor dq0 = dq.clone(), dk0 = dk.clone(), dv0 = dv.clone();
  cpu::attention_backward<double>(dq.data<double>(), dk.data<double>(), dv.data<double>(), in.q.data<double>(),
                                  in.k.data<double>(), in.v.data<double>(), fresh.o.data<double>(),
                                  fresh.lse.data<double>(), in.dout.data<double>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv,
                                  s.window, s.scale());
  for (auto [acc, before, want] : {std::tuple{&dq, &dq0, &fresh.dq}, {&dk, &dk0, &fresh.dk}, {&dv, &dv0, &fresh.dv}}) {
    for (int64_t i = 0; i < acc->numel(); ++i) acc->data<double>()[i] -= before->data<double>()[i];
    EXPECT_CLOSE(*acc, *want, 1e-14);  // (g0 + g) - g0 = g up to one rounding of |g0| ~ 1
  }
}

// The float32 path (oneDNN products, polynomial exp) against the float64 reference. float32 rounds
// at 6e-8 relative; sums over up to 200 keys and d=64 products, and the cancellation in dP - D of
// the gradient, grow that to the ~5e-7 seen here: 5e-6 is the bar (the float64 kernels reach 1e-15).
TEST(Attention, Float32MatchesFloat64) {
  Rng rng(18);
  for (auto [T, W] : {std::pair<int64_t, int64_t>{200, cpu::kGlobalWindow}, {200, 48}, {1, cpu::kGlobalWindow}, {13, 5}}) {
    const Sizes s{2, T, 4, 2, 64, 64, W};
    Inputs in = random_inputs(s, rng);
    Result want = reference(in, s);
    Tensor q = in.q.to(DType::f32), k = in.k.to(DType::f32), v = in.v.to(DType::f32), dout = in.dout.to(DType::f32);
    Tensor o = Tensor::empty(want.o.shape(), DType::f32), lse = Tensor::empty(want.lse.shape(), DType::f32);
    Tensor dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(k.shape(), DType::f32),
           dv = Tensor::zeros(v.shape(), DType::f32);
    const float scale = float(s.scale());
    cpu::attention_forward<float>(o.data<float>(), lse.data<float>(), q.data<float>(), k.data<float>(),
                                  v.data<float>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, scale);
    cpu::attention_backward<float>(dq.data<float>(), dk.data<float>(), dv.data<float>(), q.data<float>(),
                                   k.data<float>(), v.data<float>(), o.data<float>(), lse.data<float>(),
                                   dout.data<float>(), s.B, s.T, s.H, s.Hkv, s.dk, s.dv, s.window, scale);
    SCOPED_TRACE("T=" + std::to_string(T) + " W=" + std::to_string(W));
    EXPECT_CLOSE(o, want.o, 5e-6);
    EXPECT_CLOSE(lse, want.lse, 5e-6);
    EXPECT_CLOSE(dv, want.dv, 5e-6);
    if (T > 1) {
      EXPECT_CLOSE(dq, want.dq, 5e-6);
      EXPECT_CLOSE(dk, want.dk, 5e-6);
    } else {  // one key: dq = dk = 0 up to the float32 rounding of dP - D
      EXPECT_LE(testing::max_abs(dq), 1e-6);
      EXPECT_LE(testing::max_abs(dk), 1e-6);
    }
  }
}

// Generation: feeding the sequence in blocks of new positions through the key/value cache gives
// the rows of the full forward. The windowed cache is a rolling buffer of W + (largest block) - 1
// slots, so it wraps around several times. Different summation orders: 1e-12.
TEST(Attention, DecodeMatchesFullForward) {
  Rng rng(19);
  const int64_t blocks[] = {1, 3, 1, 5, 7, 1, 1, 2, 6, 1, 4, 1, 1, 2};  // sums to 36
  for (int64_t W : {cpu::kGlobalWindow, int64_t(5), int64_t(8)}) {
    const Sizes s{2, 36, 4, 2, 6, 5, W};
    Inputs in = random_inputs(s, rng);
    Result full = run_kernels(in, s);
    const int64_t C = W <= 0 ? s.T : W + 7 - 1;
    Tensor k_cache = Tensor::zeros({s.B, C, s.Hkv, s.dk}, DType::f64);
    Tensor v_cache = Tensor::zeros({s.B, C, s.Hkv, s.dv}, DType::f64);
    Tensor o = Tensor::zeros(full.o.shape(), DType::f64);
    int64_t pos = 0;
    for (int64_t n : blocks) {
      // the new positions' rows of q, k, v as contiguous [B, n, heads, d] tensors
      auto rows = [&](const Tensor& x) {
        const int64_t width = x.numel() / (s.B * s.T);
        Tensor y = Tensor::empty({s.B, n, width}, DType::f64);
        for (int64_t b = 0; b < s.B; ++b)
          std::copy_n(x.data<double>() + (b * s.T + pos) * width, n * width, y.data<double>() + b * n * width);
        return y;
      };
      Tensor q = rows(in.q), k = rows(in.k), v = rows(in.v);
      Tensor o_new = Tensor::empty({s.B, n, s.H * s.dv}, DType::f64);
      cpu::kv_cache_write<double>(k_cache.data<double>(), v_cache.data<double>(), k.data<double>(), v.data<double>(),
                                  s.B, n, s.Hkv, s.dk, s.dv, C, pos);
      cpu::attention_decode<double>(o_new.data<double>(), q.data<double>(), k_cache.data<double>(),
                                    v_cache.data<double>(), s.B, n, s.H, s.Hkv, s.dk, s.dv, C, pos, W, s.scale());
      for (int64_t b = 0; b < s.B; ++b)
        std::copy_n(o_new.data<double>() + b * n * s.H * s.dv, n * s.H * s.dv,
                    o.data<double>() + (b * s.T + pos) * s.H * s.dv);
      pos += n;
    }
    ASSERT_EQ(pos, s.T);
    SCOPED_TRACE("W=" + std::to_string(W));
    EXPECT_CLOSE(o, full.o, 1e-12);
  }
}

TEST(Attention, DecodeRejectsTooSmallCache) {
  Tensor q = Tensor::zeros({1, 4, 1, 2}, DType::f64), o = Tensor::zeros({1, 4, 1, 2}, DType::f64);
  Tensor kc = Tensor::zeros({1, 8, 1, 2}, DType::f64), vc = Tensor::zeros({1, 8, 1, 2}, DType::f64);
  // window 6 and 4 new positions need 6 + 4 - 1 = 9 slots
  EXPECT_THROW(cpu::attention_decode<double>(o.data<double>(), q.data<double>(), kc.data<double>(),
                                             vc.data<double>(), 1, 4, 1, 1, 2, 2, 8, 20, 6, 1.0),
               Error);
  EXPECT_NO_THROW(cpu::attention_decode<double>(o.data<double>(), q.data<double>(), kc.data<double>(),
                                                vc.data<double>(), 1, 4, 1, 1, 2, 2, 8, 20, 5, 1.0));
}

}  // namespace
}  // namespace linattn
