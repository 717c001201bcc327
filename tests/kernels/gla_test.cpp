// GLA kernels: chunkwise == recurrent (float64, outputs, final states and every gradient), both
// backward passes against central finite differences, strong decays, and RetNet as a constant gate.
#include "kernels/cpu/gla.h"

#include <cmath>
#include <string>
#include <vector>

#include "testing.h"

namespace linattn {
namespace {

using testing::compare;
using testing::dot;
using testing::finite_difference;
using testing::random_tensor;

// One random problem: inputs, initial state, and random upstream gradients on o and ht.
struct GlaProblem {
  int64_t B = 2, T = 37, H = 2, Dk = 8, Dv = 6;
  double scale = 0;
  Tensor q, k, v, g, h0, do_, dht;

  // Log-gates uniform in [g_lo, g_hi] (<= 0).
  GlaProblem(int64_t T_, uint64_t seed, double g_lo = -0.7, double g_hi = -0.01, int64_t B_ = 2, int64_t Dk_ = 8,
             int64_t Dv_ = 6, int64_t H_ = 2)
      : B(B_), T(T_), H(H_), Dk(Dk_), Dv(Dv_) {
    Rng rng(seed);
    scale = 1.0 / std::sqrt(double(Dk));
    q = random_tensor({B, T, H, Dk}, rng);
    k = random_tensor({B, T, H, Dk}, rng);
    v = random_tensor({B, T, H, Dv}, rng);
    g = random_tensor({B, T, H, Dk}, rng, g_lo, g_hi);
    h0 = random_tensor({B, H, Dk, Dv}, rng);
    do_ = random_tensor({B, T, H, Dv}, rng);
    dht = random_tensor({B, H, Dk, Dv}, rng);
  }
};

struct GlaResult {
  Tensor o, ht, dq, dk, dv, dg, dh0;
};

double* ptr(const Tensor& t) { return t.data<double>(); }

// Forward of the recurrent form (C == 0) or of the chunk form; `saved` receives the chunk form's states.
GlaResult gla_forward(const GlaProblem& p, int64_t C, std::vector<double>* saved = nullptr) {
  GlaResult r;
  r.o = Tensor::zeros({p.B, p.T, p.H, p.Dv}, DType::f64);
  r.ht = Tensor::zeros({p.B, p.H, p.Dk, p.Dv}, DType::f64);
  if (C == 0) {
    cpu::gla_recurrent_forward<double>(ptr(r.o), ptr(r.ht), ptr(p.q), ptr(p.k), ptr(p.v), ptr(p.g), ptr(p.h0), p.B,
                                       p.T, p.H, p.Dk, p.Dv, p.scale);
  } else {
    std::vector<double> local;
    if (!saved) saved = &local;
    saved->assign(cpu::gla_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, C), 0.0);
    cpu::gla_chunk_forward<double>(ptr(r.o), ptr(r.ht), saved->data(), ptr(p.q), ptr(p.k), ptr(p.v), ptr(p.g),
                                   ptr(p.h0), p.B, p.T, p.H, p.Dk, p.Dv, p.scale, C);
  }
  return r;
}

// Forward and backward; the gradient buffers start from `seed_value` to check that they accumulate.
GlaResult gla_forward_backward(const GlaProblem& p, int64_t C, double seed_value = 0.0) {
  std::vector<double> saved;
  GlaResult r = gla_forward(p, C, &saved);
  r.dq = Tensor::zeros(p.q.shape(), DType::f64);
  r.dk = Tensor::zeros(p.k.shape(), DType::f64);
  r.dv = Tensor::zeros(p.v.shape(), DType::f64);
  r.dg = Tensor::zeros(p.g.shape(), DType::f64);
  r.dh0 = Tensor::zeros(p.h0.shape(), DType::f64);
  for (Tensor* t : {&r.dq, &r.dk, &r.dv, &r.dg, &r.dh0}) t->fill_(seed_value);
  if (C == 0)
    cpu::gla_recurrent_backward<double>(ptr(r.dq), ptr(r.dk), ptr(r.dv), ptr(r.dg), ptr(r.dh0), ptr(p.q), ptr(p.k),
                                        ptr(p.v), ptr(p.g), ptr(p.h0), ptr(p.do_), ptr(p.dht), p.B, p.T, p.H, p.Dk,
                                        p.Dv, p.scale);
  else
    cpu::gla_chunk_backward<double>(ptr(r.dq), ptr(r.dk), ptr(r.dv), ptr(r.dg), ptr(r.dh0), saved.data(), ptr(p.q),
                                    ptr(p.k), ptr(p.v), ptr(p.g), ptr(p.do_), ptr(p.dht), p.B, p.T, p.H, p.Dk, p.Dv,
                                    p.scale, C);
  for (Tensor* t : {&r.dq, &r.dk, &r.dv, &r.dg, &r.dh0})
    for (int64_t i = 0; i < t->numel(); ++i) ptr(*t)[i] -= seed_value;
  return r;
}

// The scalar the gradients are of: <o, do> + <ht, dht>.
double gla_loss(const GlaProblem& p, int64_t C) {
  GlaResult f = gla_forward(p, C);
  return dot(f.o, p.do_) + dot(f.ht, p.dht);
}

void expect_all_close(const GlaResult& got, const GlaResult& want, double tol) {
  EXPECT_CLOSE(got.o, want.o, tol);
  EXPECT_CLOSE(got.ht, want.ht, tol);
  EXPECT_CLOSE(got.dq, want.dq, tol);
  EXPECT_CLOSE(got.dk, want.dk, tol);
  EXPECT_CLOSE(got.dv, want.dv, tol);
  EXPECT_CLOSE(got.dg, want.dg, tol);
  EXPECT_CLOSE(got.dh0, want.dh0, tol);
}

// Chunkwise vs recurrent in float64. The chunk form reorders sums and takes e^(a-b) where the recurrence
// multiplies e^g step by step: both are exact to rounding, and agree to ~2e-15 even at T = 1000 (the gate
// gradient is a reverse sum over T terms); 1e-10 leaves margin and still catches any missing term.
TEST(Gla, ChunkMatchesRecurrent) {
  for (int64_t T : {1, 63, 64, 100, 1000}) {
    GlaProblem p(T, 200 + T);
    GlaResult want = gla_forward_backward(p, 0);
    for (int64_t C : {16, 32, 64, 40}) {  // 40: sub-chunks 16 + 16 + 8
      SCOPED_TRACE("T=" + std::to_string(T) + " C=" + std::to_string(C));
      expect_all_close(gla_forward_backward(p, C, /*seed_value=*/0.5), want, 1e-10);
    }
  }
}

// Analytic gradients vs central differences of <o, do> + <ht, dht>, for every input (q, k, v, g, h0).
// The difference quotient with h = 1e-6 is good to ~1e-9 relative (testing.h); 1e-6 is the bar.
void check_gla_gradients(int64_t C) {
  SCOPED_TRACE("C=" + std::to_string(C));
  GlaProblem p(37, 17, -0.7, -0.01, /*B=*/1, /*Dk=*/6, /*Dv=*/4);
  GlaResult grad = gla_forward_backward(p, C);
  auto f = [&] { return gla_loss(p, C); };
  EXPECT_CLOSE(grad.dq, finite_difference(f, p.q), 1e-6);
  EXPECT_CLOSE(grad.dk, finite_difference(f, p.k), 1e-6);
  EXPECT_CLOSE(grad.dv, finite_difference(f, p.v), 1e-6);
  EXPECT_CLOSE(grad.dg, finite_difference(f, p.g), 1e-6);
  EXPECT_CLOSE(grad.dh0, finite_difference(f, p.h0), 1e-6);
}

TEST(Gla, RecurrentBackwardMatchesFiniteDifferences) { check_gla_gradients(0); }
// C = 16: 2 full chunks and a partial one (one sub-chunk each); C = 64: one partial chunk of 37 tokens
// with sub-chunks 16 + 16 + 5, so the anchored off-diagonal blocks are differentiated too.
TEST(Gla, ChunkBackwardMatchesFiniteDifferences) {
  check_gla_gradients(16);
  check_gla_gradients(64);
}

// The check has teeth: a gate gradient off by 1e-4 of its scale in a single entry fails it.
TEST(Gla, PerturbedGradientFailsCheck) {
  GlaProblem p(37, 19, -0.7, -0.01, /*B=*/1, /*Dk=*/6, /*Dv=*/4);
  GlaResult grad = gla_forward_backward(p, 64);
  Tensor fd = finite_difference([&] { return gla_loss(p, 64); }, p.g);
  EXPECT_LE(compare(grad.dg, fd).relative, 1e-6);
  ptr(grad.dg)[57] += 1e-4 * testing::max_abs(fd);
  EXPECT_GT(compare(grad.dg, fd).relative, 1e-6);
}

bool all_finite(const Tensor& t) {
  Tensor d = t.to(DType::f64);
  for (int64_t i = 0; i < d.numel(); ++i)
    if (!std::isfinite(d.data<double>()[i])) return false;
  return true;
}

// Run the float32 chunk kernels on p's inputs (rounded to float32).
GlaResult gla_float32_chunk(const GlaProblem& p, int64_t C) {
  auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  Tensor q = f32(p.q), k = f32(p.k), v = f32(p.v), g = f32(p.g), h0 = f32(p.h0), do_ = f32(p.do_), dht = f32(p.dht);
  GlaResult r;
  r.o = Tensor::zeros({p.B, p.T, p.H, p.Dv}, DType::f32);
  r.ht = Tensor::zeros(h0.shape(), DType::f32);
  r.dq = Tensor::zeros(q.shape(), DType::f32), r.dk = Tensor::zeros(k.shape(), DType::f32);
  r.dv = Tensor::zeros(v.shape(), DType::f32), r.dg = Tensor::zeros(g.shape(), DType::f32);
  r.dh0 = Tensor::zeros(h0.shape(), DType::f32);
  std::vector<float> saved(cpu::gla_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, C));
  cpu::gla_chunk_forward<float>(r.o.data<float>(), r.ht.data<float>(), saved.data(), q.data<float>(), k.data<float>(),
                                v.data<float>(), g.data<float>(), h0.data<float>(), p.B, p.T, p.H, p.Dk, p.Dv,
                                float(p.scale), C);
  cpu::gla_chunk_backward<float>(r.dq.data<float>(), r.dk.data<float>(), r.dv.data<float>(), r.dg.data<float>(),
                                 r.dh0.data<float>(), saved.data(), q.data<float>(), k.data<float>(), v.data<float>(),
                                 g.data<float>(), do_.data<float>(), dht.data<float>(), p.B, p.T, p.H, p.Dk, p.Dv,
                                 float(p.scale), C);
  return r;
}

// Strong decays (g around -5 per step: a 64-token chunk's cumulative gate reaches -320, and e^320 ~ 1e139
// overflows float32): every exponent the chunk form takes is <= 0, so float64 still matches the
// recurrence to 1e-10 and float32 stays finite and close to it.
TEST(Gla, StrongDecayStaysFiniteAndExact) {
  GlaProblem p(300, 23, -6.0, -4.0);
  GlaResult want = gla_forward_backward(p, 0);
  for (int64_t C : {16, 64}) {
    SCOPED_TRACE("C=" + std::to_string(C));
    expect_all_close(gla_forward_backward(p, C), want, 1e-10);
    GlaResult f = gla_float32_chunk(p, C);
    for (const Tensor* t : {&f.o, &f.ht, &f.dq, &f.dk, &f.dv, &f.dg, &f.dh0}) EXPECT_TRUE(all_finite(*t)) << t->str();
    // float32: outputs and most gradients come out at ~2e-7 relative; the gate gradient, a difference
    // q ⊙ dq - k ⊙ dk of terms that nearly cancel under such decays, at ~3e-5. 1e-4 covers both.
    expect_all_close(f, want, 1e-4);
  }
  // Decays so strong that everything but the current token underflows (g ~ -50: e^-50 per step).
  GlaProblem extreme(100, 29, -60.0, -40.0);
  GlaResult f = gla_float32_chunk(extreme, 64);
  for (const Tensor* t : {&f.o, &f.ht, &f.dq, &f.dk, &f.dv, &f.dg, &f.dh0}) EXPECT_TRUE(all_finite(*t)) << t->str();
  GlaResult got = gla_forward_backward(extreme, 64), want_extreme = gla_forward_backward(extreme, 0);
  EXPECT_CLOSE(got.o, want_extreme.o, 1e-10);
  EXPECT_CLOSE(got.ht, want_extreme.ht, 1e-10);
  EXPECT_CLOSE(got.dq, want_extreme.dq, 1e-10);
  EXPECT_CLOSE(got.dk, want_extreme.dk, 1e-10);
  EXPECT_CLOSE(got.dv, want_extreme.dv, 1e-10);
  EXPECT_CLOSE(got.dh0, want_extreme.dh0, 1e-10);
  // Here the true dg is ~1e-18: the chunk form gets it as the difference q ⊙ dq - k ⊙ dk of O(1) terms
  // that cancel, so its error is absolute, a few ulps of those terms (the recurrence multiplies by e^g
  // instead). Bound it against their scale.
  EXPECT_LE(compare(got.dg, want_extreme.dg).max_abs, 1e-13 * testing::max_abs(got.dq));
}

// RetNet: a fixed decay per head, gamma_h = 1 - 2^(-5-h), as the constant gate g = log(gamma_h),
// against the plain recurrence S_t = gamma_h S_{t-1} + k_t v_t^T, o_t = scale S_t^T q_t written out here.
TEST(Gla, ConstantGateIsRetNet) {
  const int64_t B = 2, T = 200, H = 4, Dk = 8, Dv = 6;
  GlaProblem p(T, 31, -0.7, -0.01, B, Dk, Dv, H);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double log_gamma = std::log(1.0 - std::ldexp(1.0, -5 - int(h)));
        for (int64_t d = 0; d < Dk; ++d) ptr(p.g)[((b * T + t) * H + h) * Dk + d] = log_gamma;
      }

  Tensor o = Tensor::zeros({B, T, H, Dv}, DType::f64), ht = Tensor::zeros({B, H, Dk, Dv}, DType::f64);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const double gamma = 1.0 - std::ldexp(1.0, -5 - int(h));
      std::vector<double> S(ptr(p.h0) + (b * H + h) * Dk * Dv, ptr(p.h0) + (b * H + h + 1) * Dk * Dv);
      for (int64_t t = 0; t < T; ++t) {
        const double* kt = ptr(p.k) + ((b * T + t) * H + h) * Dk;
        const double* qt = ptr(p.q) + ((b * T + t) * H + h) * Dk;
        const double* vt = ptr(p.v) + ((b * T + t) * H + h) * Dv;
        for (int64_t i = 0; i < Dk; ++i)
          for (int64_t j = 0; j < Dv; ++j) S[i * Dv + j] = gamma * S[i * Dv + j] + kt[i] * vt[j];
        for (int64_t j = 0; j < Dv; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < Dk; ++i) acc += S[i * Dv + j] * qt[i];
          ptr(o)[((b * T + t) * H + h) * Dv + j] = p.scale * acc;
        }
      }
      std::copy(S.begin(), S.end(), ptr(ht) + (b * H + h) * Dk * Dv);
    }
  for (int64_t C : {16, 64}) {
    GlaResult got = gla_forward(p, C);
    EXPECT_CLOSE(got.o, o, 1e-10);
    EXPECT_CLOSE(got.ht, ht, 1e-10);
  }
}

// Without an initial state or a final-state gradient (nullptr), and with T < C.
TEST(Gla, NullStatesAndShortSequence) {
  GlaProblem p(5, 41);
  GlaProblem zeros = p;
  zeros.h0 = Tensor::zeros(p.h0.shape(), DType::f64), zeros.dht = Tensor::zeros(p.dht.shape(), DType::f64);
  GlaResult want = gla_forward_backward(zeros, 0);
  Tensor o = Tensor::zeros(want.o.shape(), DType::f64);
  Tensor dq = Tensor::zeros(p.q.shape(), DType::f64), dk = Tensor::zeros(p.k.shape(), DType::f64),
         dv = Tensor::zeros(p.v.shape(), DType::f64), dg = Tensor::zeros(p.g.shape(), DType::f64);
  std::vector<double> saved(cpu::gla_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv));
  cpu::gla_chunk_forward<double>(ptr(o), nullptr, saved.data(), ptr(p.q), ptr(p.k), ptr(p.v), ptr(p.g), nullptr, p.B,
                                 p.T, p.H, p.Dk, p.Dv, p.scale);
  cpu::gla_chunk_backward<double>(ptr(dq), ptr(dk), ptr(dv), ptr(dg), nullptr, saved.data(), ptr(p.q), ptr(p.k),
                                  ptr(p.v), ptr(p.g), ptr(p.do_), nullptr, p.B, p.T, p.H, p.Dk, p.Dv, p.scale);
  EXPECT_CLOSE(o, want.o, 1e-12);
  EXPECT_CLOSE(dq, want.dq, 1e-12);
  EXPECT_CLOSE(dk, want.dk, 1e-12);
  EXPECT_CLOSE(dv, want.dv, 1e-12);
  EXPECT_CLOSE(dg, want.dg, 1e-12);
}

// The float32 instantiation (the one that trains) against the float64 reference, with gates as the
// layer makes them (logsigmoid(x) / 16: between about -0.3 and 0). B * H = 9 (batch, head) pairs: split
// over two threads, a thread's range starts and ends inside a batch.
TEST(Gla, Float32ChunkMatchesFloat64) {
  GlaProblem p(300, 43, -0.3, 0.0, /*B=*/3, /*Dk=*/8, /*Dv=*/6, /*H=*/3);
  GlaResult want = gla_forward_backward(p, 0);
  // float32 rounding (6e-8) accumulated over sums of up to T = 300 terms: 1e-5 relative is ample.
  expect_all_close(gla_float32_chunk(p, 64), want, 1e-5);
}

}  // namespace
}  // namespace linattn
