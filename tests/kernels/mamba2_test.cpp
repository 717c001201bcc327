// Mamba2 (SSD) kernels: both backward passes against central finite differences for every input,
// chunkwise == recurrent (float64, every output and gradient) over sequence lengths that are and are not
// multiples of the chunk, with and without an initial state, for G = 1, 1 < G < H and G = H groups;
// strong decays; decoding token by token == the forward; float32 against float64.
#include "kernels/cpu/mamba2.h"

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

// One random problem (float64): inputs, initial state, and random upstream gradients on y and ht.
struct Problem {
  cpu::Mamba2Dims dims;
  Tensor x, dt, A, B, C, h0, dy, dht;
  bool with_h0 = true, with_dht = true;

  // dt uniform in [dt_lo, dt_hi] (> 0), A in [A_lo, A_hi] (< 0): log-decays dt A between about
  // dt_hi A_lo and dt_lo A_hi.
  Problem(int64_t batch, int64_t T, int64_t H, int64_t G, uint64_t seed, double dt_lo = 0.05, double dt_hi = 1.0,
          double A_lo = -2.0, double A_hi = -0.2, int64_t N = 8, int64_t P = 6)
      : dims{batch, T, H, G, N, P} {
    Rng rng(seed);
    x = random_tensor({batch, T, H, P}, rng);
    dt = random_tensor({batch, T, H}, rng, dt_lo, dt_hi);
    A = random_tensor({H}, rng, A_lo, A_hi);
    B = random_tensor({batch, T, G, N}, rng);
    C = random_tensor({batch, T, G, N}, rng);
    h0 = random_tensor({batch, H, N, P}, rng);
    dy = random_tensor({batch, T, H, P}, rng);
    dht = random_tensor({batch, H, N, P}, rng);
  }
};

struct Result {
  Tensor y, ht, dx, ddt, dA, dB, dC, dh0;
  std::vector<Tensor*> all() { return {&y, &ht, &dx, &ddt, &dA, &dB, &dC, &dh0}; }
};

template <class F>
F* ptr(const Tensor& t) {
  return t.data<F>();
}

// Forward (and backward) of the recurrent form (chunk == 0) or the chunk form, in F (float32 runs
// on p's inputs rounded to float32). The gradient buffers start from `seed_value`, subtracted after,
// so that a kernel that overwrites instead of accumulating fails.
template <class F>
Result run(const Problem& p, int64_t chunk, bool backward = true, double seed_value = 0.0) {
  const DType dtype = std::is_same_v<F, float> ? DType::f32 : DType::f64;
  auto in = [&](const Tensor& t) { return t.to(dtype); };
  const Tensor x = in(p.x), dt = in(p.dt), A = in(p.A), B = in(p.B), C = in(p.C), dy = in(p.dy);
  const Tensor h0_in = in(p.h0), dht_in = in(p.dht);
  F* h0 = p.with_h0 ? h0_in.data<F>() : nullptr;
  F* dht = p.with_dht ? dht_in.data<F>() : nullptr;
  const cpu::Mamba2Dims& d = p.dims;
  Result r;
  r.y = Tensor::zeros(p.x.shape(), dtype);
  r.ht = Tensor::zeros(p.h0.shape(), dtype);
  std::vector<F> saved(chunk ? cpu::mamba2_chunk_saved_size(d, chunk) : 0);
  const cpu::Mamba2Forward<F> f{.y = ptr<F>(r.y), .ht = ptr<F>(r.ht), .saved = saved.data(), .x = ptr<F>(x),
                                .dt = ptr<F>(dt), .A = ptr<F>(A), .B = ptr<F>(B), .C = ptr<F>(C), .h0 = h0,
                                .dims = d, .chunk_size = chunk ? chunk : 1};
  chunk ? cpu::mamba2_chunk_forward(f) : cpu::mamba2_recurrent_forward(f);
  if (!backward) return r;
  r.dx = Tensor::zeros(p.x.shape(), dtype), r.ddt = Tensor::zeros(p.dt.shape(), dtype);
  r.dA = Tensor::zeros(p.A.shape(), dtype), r.dB = Tensor::zeros(p.B.shape(), dtype);
  r.dC = Tensor::zeros(p.C.shape(), dtype), r.dh0 = Tensor::zeros(p.h0.shape(), dtype);
  for (Tensor* t : {&r.dx, &r.ddt, &r.dA, &r.dB, &r.dC, &r.dh0}) t->fill_(seed_value);
  const cpu::Mamba2Backward<F> g{.dx = ptr<F>(r.dx), .ddt = ptr<F>(r.ddt), .dA = ptr<F>(r.dA), .dB = ptr<F>(r.dB),
                                 .dC = ptr<F>(r.dC), .dh0 = ptr<F>(r.dh0), .saved = saved.data(), .x = ptr<F>(x),
                                 .dt = ptr<F>(dt), .A = ptr<F>(A), .B = ptr<F>(B), .C = ptr<F>(C), .h0 = h0,
                                 .dy = ptr<F>(dy), .dht = dht, .dims = d, .chunk_size = chunk ? chunk : 1};
  chunk ? cpu::mamba2_chunk_backward(g) : cpu::mamba2_recurrent_backward(g);
  for (Tensor* t : {&r.dx, &r.ddt, &r.dA, &r.dB, &r.dC, &r.dh0})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<F>()[i] -= F(seed_value);
  return r;
}

// The scalar the gradients are of: <y, dy> + <ht, dht>.
double loss(const Problem& p, int64_t chunk) {
  Result r = run<double>(p, chunk, /*backward=*/false);
  return dot(r.y, p.dy) + (p.with_dht ? dot(r.ht, p.dht) : 0.0);
}

void expect_all_close(Result got, Result want, double tol) {
  const char* names[] = {"y", "ht", "dx", "ddt", "dA", "dB", "dC", "dh0"};
  for (size_t i = 0; i < got.all().size(); ++i) {
    SCOPED_TRACE(names[i]);
    EXPECT_CLOSE(*got.all()[i], *want.all()[i], tol);
  }
}

std::string label(const Problem& p, int64_t chunk) {
  const cpu::Mamba2Dims& d = p.dims;
  return "T=" + std::to_string(d.T) + " H=" + std::to_string(d.H) + " G=" + std::to_string(d.G) +
         " C=" + std::to_string(chunk) + (p.with_h0 ? " h0" : " no h0");
}

// Chunkwise vs recurrent in float64. Both are exact to rounding (the chunk form reorders the sums and
// takes e^(l_i - l_j) where the recurrence multiplies decays step by step; the decay gradient is a
// sum over T terms): they agree to at most 4e-15 (measured); 1e-10 leaves margin and still catches any missing term.
TEST(Mamba2, ChunkMatchesRecurrent) {
  for (auto [H, G] : {std::pair<int64_t, int64_t>{4, 1}, {4, 2}, {4, 4}})
    for (int64_t T : {1, 37, 64, 150})
      for (bool h0 : {true, false}) {
        Problem p(2, T, H, G, 100 + T + 10 * G, 0.05, 1.0);
        p.with_h0 = h0;
        const Result want = run<double>(p, 0);
        for (int64_t chunk : {16, 64, 40}) {
          SCOPED_TRACE(label(p, chunk));
          expect_all_close(run<double>(p, chunk, true, /*seed_value=*/0.5), want, 1e-10);
        }
      }
}

// Analytic gradients vs central differences of <y, dy> + <ht, dht> for every input (x, dt, A, B, C, h0),
// with 1 < G < H so that the sums over a group's heads are exercised. The difference quotient with
// h = 1e-6 is good to ~1e-9 relative (testing.h); 1e-6 is the bar.
void check_gradients(int64_t chunk, int64_t H, int64_t G) {
  Problem p(2, 21, H, G, 17 + chunk + G, 0.05, 1.0, -2.0, -0.2, /*N=*/4, /*P=*/3);
  SCOPED_TRACE(label(p, chunk));
  const Result grad = run<double>(p, chunk);
  auto f = [&] { return loss(p, chunk); };
  EXPECT_CLOSE(grad.dx, finite_difference(f, p.x), 1e-6);
  EXPECT_CLOSE(grad.ddt, finite_difference(f, p.dt), 1e-6);
  EXPECT_CLOSE(grad.dA, finite_difference(f, p.A), 1e-6);
  EXPECT_CLOSE(grad.dB, finite_difference(f, p.B), 1e-6);
  EXPECT_CLOSE(grad.dC, finite_difference(f, p.C), 1e-6);
  EXPECT_CLOSE(grad.dh0, finite_difference(f, p.h0), 1e-6);
}

TEST(Mamba2, RecurrentBackwardMatchesFiniteDifferences) {
  check_gradients(0, 4, 2);
  check_gradients(0, 2, 1);
}

// C = 8: two full chunks and a partial one; C = 64: one partial chunk of 21 tokens.
TEST(Mamba2, ChunkBackwardMatchesFiniteDifferences) {
  check_gradients(8, 4, 2);
  check_gradients(8, 3, 3);
  check_gradients(64, 2, 1);
}

// The check has teeth: dA off by 1e-4 of its scale in a single entry fails it.
TEST(Mamba2, PerturbedGradientFailsCheck) {
  Problem p(2, 21, 4, 2, 19, 0.05, 1.0, -2.0, -0.2, 4, 3);
  Result grad = run<double>(p, 8);
  const Tensor fd = finite_difference([&] { return loss(p, 8); }, p.A);
  EXPECT_LE(compare(grad.dA, fd).relative, 1e-6);
  grad.dA.data<double>()[2] += 1e-4 * testing::max_abs(fd);
  EXPECT_GT(compare(grad.dA, fd).relative, 1e-6);
}

bool all_finite(const Tensor& t) {
  Tensor d = t.to(DType::f64);
  for (int64_t i = 0; i < d.numel(); ++i)
    if (!std::isfinite(d.data<double>()[i])) return false;
  return true;
}

// Strong decays (dt A around -6 per step: a 64-token chunk's cumulative log-decay reaches -400, whose
// e^+400 would overflow even float64): every exponent the chunk form takes is <= 0, so float64 still
// matches the recurrence and float32 stays finite.
TEST(Mamba2, StrongDecayStaysFiniteAndExact) {
  Problem p(2, 150, 4, 2, 23, 2.0, 3.0, -3.0, -2.0);
  const Result want = run<double>(p, 0);
  for (int64_t chunk : {16, 64}) {
    SCOPED_TRACE("C=" + std::to_string(chunk));
    expect_all_close(run<double>(p, chunk), want, 1e-10);
    Result f = run<float>(p, chunk);
    for (Tensor* t : f.all()) EXPECT_TRUE(all_finite(*t)) << t->str();
    // float32: measured at most 4e-7 relative on outputs and gradients, except dA (a sum over all 300
    // tokens of both batches of terms that are all tiny here) at 2e-5; 1e-4 covers both.
    expect_all_close(f, want, 1e-4);
  }
}

// Decoding: the recurrent form one token at a time, each call's ht the next call's h0 (as a cache
// would carry it), gives the chunk forward's outputs and final state to 1e-10.
TEST(Mamba2, DecodingTokenByTokenMatchesTheForward) {
  Problem p(2, 70, 4, 2, 29);
  const Result want = run<double>(p, 64, /*backward=*/false);
  const cpu::Mamba2Dims& d = p.dims;
  Tensor y = Tensor::zeros(p.x.shape(), DType::f64), state = p.h0.clone();
  for (int64_t t = 0; t < d.T; ++t) {
    auto at = [&](const Tensor& s) {  // token t of [B, T, ...], as [B, 1, ...]
      Shape shape = s.shape();
      shape[1] = 1;
      Tensor out = Tensor::empty(shape, DType::f64);
      const int64_t row = out.numel() / d.batch;
      for (int64_t b = 0; b < d.batch; ++b)
        std::copy(s.data<double>() + (b * d.T + t) * row, s.data<double>() + (b * d.T + t + 1) * row,
                  out.data<double>() + b * row);
      return out;
    };
    const Tensor x = at(p.x), dt = at(p.dt), B = at(p.B), C = at(p.C);
    Tensor yt = Tensor::zeros(x.shape(), DType::f64), next = Tensor::zeros(state.shape(), DType::f64);
    cpu::mamba2_recurrent_forward<double>({.y = yt.data<double>(), .ht = next.data<double>(), .saved = nullptr,
                                           .x = x.data<double>(), .dt = dt.data<double>(), .A = p.A.data<double>(),
                                           .B = B.data<double>(), .C = C.data<double>(), .h0 = state.data<double>(),
                                           .dims = {d.batch, 1, d.H, d.G, d.N, d.P}});
    for (int64_t b = 0; b < d.batch; ++b)
      std::copy(yt.data<double>() + b * d.H * d.P, yt.data<double>() + (b + 1) * d.H * d.P,
                y.data<double>() + (b * d.T + t) * d.H * d.P);
    state = next;
  }
  EXPECT_CLOSE(y, want.y, 1e-10);
  EXPECT_CLOSE(state, want.ht, 1e-10);
}

// Without an initial state and a final-state gradient (nullptr), the same as with zeros (dh0 included:
// the gradient wrt the zero initial state); T < C.
TEST(Mamba2, NullStatesEqualZeros) {
  Problem p(2, 5, 4, 2, 41);
  Problem zeros = p;
  zeros.h0 = Tensor::zeros(p.h0.shape(), DType::f64), zeros.dht = Tensor::zeros(p.dht.shape(), DType::f64);
  p.with_h0 = p.with_dht = false;
  for (int64_t chunk : {0, 64}) {
    SCOPED_TRACE("C=" + std::to_string(chunk));
    Result got = run<double>(p, chunk), want = run<double>(zeros, chunk);
    expect_all_close(got, want, 1e-14);
  }
}

// The float32 instantiation (the one that trains) against float64, with decays as the layer makes them
// (dt from softplus around 0.001-0.1, A = -exp(A_log) in [-16, -1]). B * H = 6 (batch, head) pairs,
// split over the threads so a thread's range starts and ends inside a batch.
TEST(Mamba2, Float32ChunkMatchesFloat64) {
  Problem p(2, 300, 3, 1, 43, 0.001, 0.1, -16.0, -1.0);
  const Result want = run<double>(p, 0);
  // float32 rounding (6e-8) accumulated over sums of up to T = 300 terms: measured at most 1.1e-6 (dA);
  // 1e-5 relative is ample.
  expect_all_close(run<float>(p, 64), want, 1e-5);
}

// Sizes that do not fit say so.
TEST(Mamba2, GroupsMustDivideHeads) {
  Problem p(1, 4, 4, 2, 47);
  p.dims.G = 3;
  const std::string message = testing::error_of([&] { run<double>(p, 0, false); });
  EXPECT_NE(message.find("4 heads do not split into 3 groups"), std::string::npos) << message;
}

}  // namespace
}  // namespace linattn
