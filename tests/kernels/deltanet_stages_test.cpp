// Each stage of the chunkwise DeltaNet (kernels/cpu/deltanet_stages.h) alone, in float64, on one
// chunk of one head inside a [T, H, D] layout (head 1 of 2, so the token strides are exercised):
// the forward stages against naive loops written here from the formulas of kernels/cpu/deltanet.h,
// the backward stages against central finite differences of those naive forwards (the gradient of
// <forward, random upstream>), except state_backward, which is a sum of three products checked
// against its formula. Both mixers: without gates, and with decays (the gated form). Chunks that
// fill their block (n = C) and that do not (n < C, the last chunk of a sequence), and a chunk of 64
// for the 8-column blocks of the triangular solve.
//
// Tolerances: the naive forwards differ from the stages only by summation order, ~1e-15 relative;
// central differences with h = 1e-6 on these O(1), at most quadratic functions are good to ~1e-9.
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "kernels/cpu/deltanet_stages.h"
#include "testing.h"

namespace linattn {
namespace {

using namespace cpu::deltanet;
using Vec = std::vector<double>;

constexpr double kExact = 1e-12;  // stage vs naive loops
constexpr double kFd = 1e-7;      // backward stage vs central differences

// Max |got - want| relative to max |want|, over the first `count` entries read through index maps.
void expect_close(const char* what, const std::function<double(int64_t)>& got,
                  const std::function<double(int64_t)>& want, int64_t count, double tol) {
  double err = 0, scale = 0;
  for (int64_t i = 0; i < count; ++i) {
    err = std::max(err, std::abs(got(i) - want(i)));
    scale = std::max(scale, std::abs(want(i)));
  }
  const double rel = err / std::max(scale, 1e-300);
  EXPECT_LE(rel, tol) << what << ": max abs error " << err << ", relative " << rel << ", tolerance " << tol;
}
void expect_close(const char* what, const Vec& got, const Vec& want, double tol) {
  ASSERT_EQ(got.size(), want.size()) << what;
  expect_close(what, [&](int64_t i) { return got[i]; }, [&](int64_t i) { return want[i]; }, int64_t(want.size()), tol);
}

// d<f(x), w>/dx by central differences, where loss() evaluates <f(x), w> at the current x.
Vec finite_difference(Vec& x, const std::function<double()>& loss) {
  const double h = 1e-6;
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// One chunk of n tokens of head 1 of H = 2: q, k [n, H, Dk] and v, dO [n, H, Dv] (the stages see
// the head-1 rows through the strides), beta and a [n, H], a state S0 [Dk, Dv]. The token rows are
// also kept dense ([n, D], head 1 only) for the naive loops.
struct Chunk {
  static constexpr int64_t H = 2;
  int64_t n, C, Dk, Dv;
  bool gated;
  Vec q, k, v, dO, beta, a, S0;  // strided, as the kernels read them
  Vec decay_G, decay_gamma, decay_inv, decay_lambda, decay_D;
  ChunkDecays<double> g{};

  Chunk(uint64_t seed, int64_t n_, int64_t C_, int64_t Dk_, int64_t Dv_, bool gated_, double a_lo = -1.0,
        double a_hi = -0.01)
      : n(n_), C(C_), Dk(Dk_), Dv(Dv_), gated(gated_) {
    Rng rng(seed);
    auto fill = [&](Vec& x, int64_t count, double lo, double hi) {
      x.resize(size_t(count));
      for (double& e : x) e = rng.uniform(lo, hi);
    };
    fill(q, n * H * Dk, -1, 1);
    fill(k, n * H * Dk, -1, 1);
    for (int64_t i = 0; i < n * H; ++i) {  // unit rows, as the layer feeds them
      double s = 0;
      for (int64_t d = 0; d < Dk; ++d) s += k[i * Dk + d] * k[i * Dk + d];
      for (int64_t d = 0; d < Dk; ++d) k[i * Dk + d] /= std::sqrt(s);
    }
    fill(v, n * H * Dv, -1, 1);
    fill(dO, n * H * Dv, -1, 1);
    fill(beta, n * H, 0.05, 0.95);
    fill(a, n * H, a_lo, a_hi);
    fill(S0, Dk * Dv, -1, 1);
    for (Vec* x : {&decay_G, &decay_gamma, &decay_inv, &decay_lambda}) x->assign(size_t(C), 0.0);
    decay_D.assign(size_t(C * C), 1.0);  // ones: the ungated form's D
    g = {gated, decay_G.data(), decay_gamma.data(), decay_inv.data(), decay_lambda.data(), decay_D.data()};
    if (gated) chunk_decays(g, a.data() + 1, shape());
  }

  ChunkShape shape() const { return {n, C, Dk, Dv, H * Dk, H * Dv, H}; }
  // Head 1's rows and scalars (what the stages get as their first row).
  const double* Q() const { return q.data() + Dk; }
  const double* K() const { return k.data() + Dk; }
  const double* V() const { return v.data() + Dv; }
  const double* DO() const { return dO.data() + Dv; }
  const double* Beta() const { return beta.data() + 1; }
  double& qa(int64_t i, int64_t d) { return q[(i * H + 1) * Dk + d]; }
  double& ka(int64_t i, int64_t d) { return k[(i * H + 1) * Dk + d]; }
  double& va(int64_t i, int64_t d) { return v[(i * H + 1) * Dv + d]; }
  double& doa(int64_t i, int64_t d) { return dO[(i * H + 1) * Dv + d]; }
  double& ba(int64_t i) { return beta[i * H + 1]; }
  // The decays as functions of G (the naive forms): gamma, lambda, D. All 1 without gates.
  double gamma(const Vec& G, int64_t i) const { return gated ? std::exp(G[i]) : 1.0; }
  double lambda(const Vec& G, int64_t i) const { return gated ? std::exp(G[n - 1] - G[i]) : 1.0; }
  double D(const Vec& G, int64_t i, int64_t j) const { return gated ? std::exp(-std::abs(G[i] - G[j])) : 1.0; }
  Vec G() const { return Vec(decay_G.begin(), decay_G.begin() + n); }
};

// The cases every stage runs on: (n, C, Dk, Dv) with gates off and on.
struct Case {
  int64_t n, C, Dk, Dv;
};
const Case kCases[] = {{16, 16, 8, 6}, {13, 16, 8, 6}, {64, 64, 12, 10}, {37, 40, 5, 7}};

template <class F>
void for_cases(F&& f) {
  uint64_t seed = 100;
  for (bool gated : {false, true})
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::Message() << "n=" << c.n << " C=" << c.C << " Dk=" << c.Dk << " Dv=" << c.Dv
                                        << (gated ? " gated" : " plain"));
      Chunk ch(++seed, c.n, c.C, c.Dk, c.Dv, gated);
      f(ch);
    }
}

// ---- naive forwards (dense [n, .] row-major results) ----------------------------------------------

Vec naive_gram(Chunk& c, const Vec& G) {  // K K^T . D
  Vec gd(size_t(c.n * c.n));
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t d = 0; d < c.Dk; ++d) s += c.ka(i, d) * c.ka(j, d);
      gd[i * c.n + j] = s * c.D(G, i, j);
    }
  return gd;
}

// Solves (I + tril(diag(beta) gd, -1)) X = Y for X [n, m], row by row.
Vec naive_solve(Chunk& c, const Vec& gd, const Vec& Y, int64_t m) {
  Vec X(Y);
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t j = 0; j < i; ++j)
      for (int64_t e = 0; e < m; ++e) X[i * m + e] -= c.ba(i) * gd[i * c.n + j] * X[j * m + e];
  return X;
}

Vec naive_R(Chunk& c, const Vec& G, bool with_state) {  // V - diag(gamma) K S0
  Vec R(size_t(c.n * c.Dv));
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t e = 0; e < c.Dv; ++e) {
      double s = 0;
      for (int64_t d = 0; d < c.Dk && with_state; ++d) s += c.ka(i, d) * c.S0[d * c.Dv + e];
      R[i * c.Dv + e] = c.va(i, e) - c.gamma(G, i) * s;
    }
  return R;
}

Vec naive_U(Chunk& c, const Vec& G, bool with_state) {  // A^-1 diag(beta) R
  Vec rb = naive_R(c, G, with_state);
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t e = 0; e < c.Dv; ++e) rb[i * c.Dv + e] *= c.ba(i);
  return naive_solve(c, naive_gram(c, G), rb, c.Dv);
}

Vec naive_P(Chunk& c, const Vec& G) {  // tril(Q K^T) . D
  Vec P(size_t(c.n * c.n), 0.0);
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t d = 0; d < c.Dk; ++d) s += c.qa(i, d) * c.ka(j, d);
      P[i * c.n + j] = s * c.D(G, i, j);
    }
  return P;
}

// scale (diag(gamma) Q S0 + P U'), U' [n, Dv] dense
Vec naive_output(Chunk& c, const Vec& G, const Vec& U, double scale, bool with_state) {
  const Vec P = naive_P(c, G);
  Vec O(size_t(c.n * c.Dv));
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t e = 0; e < c.Dv; ++e) {
      double inter = 0, intra = 0;
      for (int64_t d = 0; d < c.Dk && with_state; ++d) inter += c.qa(i, d) * c.S0[d * c.Dv + e];
      for (int64_t j = 0; j <= i; ++j) intra += P[i * c.n + j] * U[j * c.Dv + e];
      O[i * c.Dv + e] = scale * (c.gamma(G, i) * inter + intra);
    }
  return O;
}

// gamma_last S0 + K^T diag(lambda) U'; `lam` overrides lambda when not empty.
Vec naive_state(Chunk& c, const Vec& G, const Vec& U, const Vec& lam = {}) {
  Vec S1(size_t(c.Dk * c.Dv));
  for (int64_t d = 0; d < c.Dk; ++d)
    for (int64_t e = 0; e < c.Dv; ++e) {
      double s = c.gamma(G, c.n - 1) * c.S0[d * c.Dv + e];
      for (int64_t i = 0; i < c.n; ++i)
        s += c.ka(i, d) * (lam.empty() ? c.lambda(G, i) : lam[i]) * U[i * c.Dv + e];
      S1[d * c.Dv + e] = s;
    }
  return S1;
}

// The stages' own forward values of the chunk (what the backward stages read).
struct Forward {
  Vec gd, ainv, u, r, rb, P, pg, l, ul;
};
Forward run_forward(Chunk& c, bool with_state) {
  const ChunkShape s = c.shape();
  Forward f;
  for (Vec* x : {&f.gd, &f.ainv, &f.P, &f.pg}) x->assign(size_t(c.C * c.C), 0.0);
  for (Vec* x : {&f.u, &f.r, &f.rb, &f.ul}) x->assign(size_t(c.C * c.Dv), 0.0);
  f.l.assign(size_t(c.C), 0.0);
  gram_kkt(f.gd.data(), c.K(), c.g, s);
  solve_unit_lower(f.ainv.data(), f.gd.data(), c.Beta(), s, f.l.data());
  wy_updates(f.u.data(), f.r.data(), f.rb.data(), f.ainv.data(), c.K(), c.V(), c.Beta(),
             with_state ? c.S0.data() : nullptr, c.g, s);
  causal_scores_qk(f.P.data(), f.pg.data(), c.Q(), c.K(), f.gd.data(), c.g, s);
  return f;
}

// [n, m] dense view of a [C, ldx] block
std::function<double(int64_t)> block(const Vec& x, int64_t m, int64_t ld) {
  return [&x, m, ld](int64_t e) { return x[(e / m) * ld + e % m]; };
}
std::function<double(int64_t)> dense(const Vec& x) {
  return [&x](int64_t e) { return x[e]; };
}
// head 1's [n, D] rows of a strided [n, H, D] tensor
std::function<double(int64_t)> rows(const Vec& x, int64_t D) {
  return [&x, D](int64_t e) { return x[((e / D) * Chunk::H + 1) * D + e % D]; };
}

Vec random_vec(uint64_t seed, int64_t count) {
  Rng rng(seed);
  Vec x(static_cast<size_t>(count));
  for (double& e : x) e = rng.uniform(-1, 1);
  return x;
}

// ---- forward stages ------------------------------------------------------------------------------

TEST(DeltaNetStages, ChunkDecays) {
  for (auto [lo, hi] : {std::pair{-1.0, -0.01}, std::pair{-30.0, -5.0}}) {  // ratios; below G = -60 the exp fallback
    SCOPED_TRACE(::testing::Message() << "a in [" << lo << ", " << hi << "]");
    Chunk c(7, 37, 40, 4, 4, true, lo, hi);
    Vec G(size_t(c.n));
    double acc = 0;
    for (int64_t i = 0; i < c.n; ++i) G[i] = acc += c.a[i * Chunk::H + 1];
    expect_close("G", c.G(), G, kExact);
    expect_close("gamma", dense(c.decay_gamma), [&](int64_t i) { return std::exp(G[i]); }, c.n, kExact);
    expect_close("lambda", dense(c.decay_lambda), [&](int64_t i) { return std::exp(G[c.n - 1] - G[i]); }, c.n, kExact);
    expect_close("D", block(c.decay_D, c.n, c.C), [&](int64_t e) {
      const int64_t i = e / c.n, j = e % c.n;
      return j <= i ? std::exp(G[i] - G[j]) : std::exp(G[j] - G[i]);
    }, c.n * c.n, kExact);
  }
}

TEST(DeltaNetStages, GramKKt) {
  for_cases([](Chunk& c) {
    Vec gd(size_t(c.C * c.C));
    gram_kkt(gd.data(), c.K(), c.g, c.shape());
    expect_close("K K^T . D", block(gd, c.n, c.C), dense(naive_gram(c, c.G())), c.n * c.n, kExact);
  });
}

TEST(DeltaNetStages, SolveUnitLower) {
  for_cases([](Chunk& c) {
    const Vec gd = naive_gram(c, c.G());
    Vec gd_block(size_t(c.C * c.C), 0.0), ainv(size_t(c.C * c.C), 7.0), l(size_t(c.C));
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.n; ++j) gd_block[i * c.C + j] = gd[i * c.n + j];
    solve_unit_lower(ainv.data(), gd_block.data(), c.Beta(), c.shape(), l.data());
    Vec I(size_t(c.n * c.n), 0.0);
    for (int64_t i = 0; i < c.n; ++i) I[i * c.n + i] = 1;
    const Vec want = naive_solve(c, gd, I, c.n);  // A^-1, column by column
    expect_close("A^-1", block(ainv, c.n, c.C), dense(want), c.n * c.n, kExact);
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = i + 1; j < c.n; ++j) ASSERT_EQ(ainv[i * c.C + j], 0.0) << "above the diagonal at " << i << ", " << j;
  });
}

TEST(DeltaNetStages, WyUpdates) {
  for_cases([](Chunk& c) {
    for (bool with_state : {true, false}) {
      SCOPED_TRACE(with_state ? "S0" : "zero state");
      const Forward f = run_forward(c, with_state);
      expect_close("R", block(f.r, c.Dv, c.Dv), dense(naive_R(c, c.G(), with_state)), c.n * c.Dv, kExact);
      expect_close("U'", block(f.u, c.Dv, c.Dv), dense(naive_U(c, c.G(), with_state)), c.n * c.Dv, kExact);
    }
  });
}

TEST(DeltaNetStages, CausalScoresQk) {
  for_cases([](Chunk& c) {
    const Forward f = run_forward(c, true);
    const Vec P = naive_P(c, c.G()), gd = naive_gram(c, c.G());
    expect_close("P", block(f.P, c.n, c.C), dense(P), c.n * c.n, kExact);
    expect_close("PG", block(f.pg, c.n, c.C), [&](int64_t e) {
      return e % c.n <= e / c.n ? P[e] : gd[e];
    }, c.n * c.n, kExact);
  });
}

TEST(DeltaNetStages, ChunkOutput) {
  for_cases([](Chunk& c) {
    for (bool with_state : {true, false}) {
      SCOPED_TRACE(with_state ? "S0" : "zero state");
      const Forward f = run_forward(c, with_state);
      const double scale = 0.3;
      Vec o(size_t(c.n * Chunk::H * c.Dv), 5.0);  // overwritten
      chunk_output(o.data() + c.Dv, c.Q(), with_state ? c.S0.data() : nullptr, f.P.data(), f.u.data(), scale, c.g,
                   c.shape());
      const Vec U = naive_U(c, c.G(), with_state);
      expect_close("O", rows(o, c.Dv), dense(naive_output(c, c.G(), U, scale, with_state)), c.n * c.Dv, kExact);
    }
  });
}

TEST(DeltaNetStages, StatePass) {
  for_cases([](Chunk& c) {
    Forward f = run_forward(c, true);
    Vec S1(size_t(c.Dk * c.Dv));
    state_pass(S1.data(), c.S0.data(), c.K(), f.u.data(), c.g, c.shape(), f.ul.data());
    expect_close("S1", S1, naive_state(c, c.G(), naive_U(c, c.G(), true)), kExact);
  });
}

// ---- backward stages -----------------------------------------------------------------------------

// Central differences over head 1's [n, D] rows of a strided [n, H, D] tensor (dense result), or
// over head 1's n scalars of a [n, H] one (D = 1).
Vec fd_rows(Vec& x, int64_t n, int64_t D, const std::function<double()>& loss) {
  Vec head(size_t(n * D)), g;
  for (int64_t e = 0; e < n * D; ++e) head[e] = x[((e / D) * Chunk::H + 1) * D + e % D];
  auto put = [&] {
    for (int64_t e = 0; e < n * D; ++e) x[((e / D) * Chunk::H + 1) * D + e % D] = head[e];
  };
  g = finite_difference(head, [&] {
    put();
    return loss();
  });
  put();
  return g;
}

// head 1's [n, D] rows of a strided [n, H, D] tensor, dense
Vec take_rows(const Vec& x, int64_t n, int64_t D) {
  Vec y(size_t(n * D));
  for (int64_t e = 0; e < n * D; ++e) y[e] = rows(x, D)(e);
  return y;
}

// [n, m] dense copy of a [., ld] block
Vec take(const Vec& x, int64_t n, int64_t m, int64_t ld) {
  Vec y(size_t(n * m));
  for (int64_t e = 0; e < n * m; ++e) y[e] = x[(e / m) * ld + e % m];
  return y;
}

// The gradients a backward stage accumulates into: strided dq, dk, dv (head 1 through the
// pointers), and the chunk's accumulators, all zero.
struct Grads {
  Vec dq, dk, dv, gdg, dlambda, dG, db;
  ChunkGateGrads<double> gg{};
  const Chunk& c;
  explicit Grads(const Chunk& c_) : c(c_) {
    dq.assign(size_t(c.n * Chunk::H * c.Dk), 0.0);
    dk = dq;
    dv.assign(size_t(c.n * Chunk::H * c.Dv), 0.0);
    for (Vec* x : {&gdg, &dlambda, &dG, &db}) x->assign(size_t(c.C), 0.0);
    gg = {gdg.data(), dlambda.data(), dG.data(), db.data()};
  }
  double* DQ() { return dq.data() + c.Dk; }
  double* DK() { return dk.data() + c.Dk; }
  double* DV() { return dv.data() + c.Dv; }
};

Vec gammas(Chunk& c) {
  Vec g(size_t(c.n));
  for (int64_t i = 0; i < c.n; ++i) g[i] = c.gamma(c.G(), i);
  return g;
}

TEST(DeltaNetStages, IntraOutputBackwardDu) {
  for_cases([](Chunk& c) {
    const Forward f = run_forward(c, true);
    const double scale = 0.3;
    Vec du(size_t(c.C * c.Dv));
    intra_output_backward_du(du.data(), f.P.data(), c.DO(), scale, c.shape());
    // forward: O = scale P U' + (terms without U')
    Vec U = take(f.u, c.n, c.Dv, c.Dv);
    auto loss = [&] { return dot(naive_output(c, c.G(), U, scale, false), take_rows(c.dO, c.n, c.Dv)); };
    expect_close("dU'", block(du, c.Dv, c.Dv), dense(finite_difference(U, loss)), c.n * c.Dv, kFd);
  });
}

TEST(DeltaNetStages, StatePassBackward) {
  for_cases([](Chunk& c) {
    Forward f = run_forward(c, true);
    const Vec dS = random_vec(3, c.Dk * c.Dv);
    Vec du(size_t(c.C * c.Dv), 0.0), y(size_t(c.C * c.Dv)), ul(size_t(c.C * c.Dv));
    Grads gr(c);
    state_pass_backward(du.data(), gr.DK(), gr.gg, dS.data(), c.K(), f.u.data(), c.g, c.shape(), y.data(), ul.data());
    // forward: S1 = gamma_last S0 + K^T diag(lambda) U'
    Vec U = take(f.u, c.n, c.Dv, c.Dv), lam(size_t(c.n));
    for (int64_t i = 0; i < c.n; ++i) lam[i] = c.lambda(c.G(), i);
    auto loss = [&] { return dot(naive_state(c, c.G(), U, lam), dS); };
    expect_close("dU'", block(du, c.Dv, c.Dv), dense(finite_difference(U, loss)), c.n * c.Dv, kFd);
    expect_close("dK", rows(gr.dk, c.Dk), dense(fd_rows(c.k, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
    if (c.gated) expect_close("dlambda", dense(gr.dlambda), dense(finite_difference(lam, loss)), c.n, kFd);
  });
}

TEST(DeltaNetStages, WyBackward) {
  for_cases([](Chunk& c) {
    for (bool with_state : {true, false}) {
      SCOPED_TRACE(with_state ? "S0" : "zero state");
      Forward f = run_forward(c, with_state);
      const Vec du = random_vec(4, c.C * c.Dv);
      Vec x(size_t(c.C * c.Dv)), dr(size_t(c.C * c.Dv));
      Grads gr(c);
      const double* S0 = with_state ? c.S0.data() : nullptr;
      wy_backward(x.data(), dr.data(), gr.DV(), gr.DK(), gr.gg, du.data(), f.ainv.data(), f.r.data(), c.V(), c.Beta(),
                  S0, c.g, c.shape());
      // forward, with A^-1 held fixed: U' = A^-1 diag(beta) (V - diag(gamma) K S0)
      const Vec ainv = take(f.ainv, c.n, c.n, c.C), dU = take(du, c.n, c.Dv, c.Dv);
      Vec gam = gammas(c);
      auto loss = [&] {
        Vec rb(size_t(c.n * c.Dv));  // diag(beta) (V - diag(gamma) K S0)
        for (int64_t m = 0; m < c.n; ++m)
          for (int64_t e = 0; e < c.Dv; ++e) {
            double ks = 0;
            for (int64_t d = 0; d < c.Dk && with_state; ++d) ks += c.ka(m, d) * c.S0[d * c.Dv + e];
            rb[m * c.Dv + e] = c.ba(m) * (c.va(m, e) - gam[m] * ks);
          }
        double l = 0;
        for (int64_t i = 0; i < c.n; ++i)
          for (int64_t m = 0; m <= i; ++m)
            for (int64_t e = 0; e < c.Dv; ++e) l += ainv[i * c.n + m] * rb[m * c.Dv + e] * dU[i * c.Dv + e];
        return l;
      };
      Vec X(size_t(c.n * c.Dv), 0.0);  // A^-T dU'
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t m = 0; m < c.n; ++m)
          for (int64_t e = 0; e < c.Dv; ++e) X[i * c.Dv + e] += ainv[m * c.n + i] * dU[m * c.Dv + e];
      expect_close("X", block(x, c.Dv, c.Dv), dense(X), c.n * c.Dv, kExact);
      expect_close("diag(gamma) dR", block(dr, c.Dv, c.Dv), [&](int64_t e) {
        return gam[e / c.Dv] * c.ba(e / c.Dv) * X[e];
      }, c.n * c.Dv, kExact);
      expect_close("dV", rows(gr.dv, c.Dv), dense(fd_rows(c.v, c.n, c.Dv, loss)), c.n * c.Dv, kFd);
      expect_close("dbeta", dense(gr.db), dense(fd_rows(c.beta, c.n, 1, loss)), c.n, kFd);
      if (with_state) {
        expect_close("dK", rows(gr.dk, c.Dk), dense(fd_rows(c.k, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
      } else {
        for (double e : gr.dk) ASSERT_EQ(e, 0.0) << "dK from the zero state";
      }
      if (c.gated && with_state) {
        const Vec dgam = finite_difference(gam, loss);
        expect_close("gamma dgamma", dense(gr.gdg), [&](int64_t i) { return gam[i] * dgam[i]; }, c.n, kFd);
      }
    }
  });
}

TEST(DeltaNetStages, ScoresBackward) {
  for_cases([](Chunk& c) {
    Forward f = run_forward(c, true);
    const double scale = 0.3;
    Vec dP(size_t(c.C * c.C));
    Grads gr(c);
    scores_backward(gr.DQ(), gr.DK(), gr.gg, f.P.data(), c.Q(), c.K(), c.DO(), f.u.data(), scale, c.g, c.shape(),
                    dP.data());
    // forward: O = scale (tril(Q K^T) . D(G)) U' + (terms without P)
    const Vec U = take(f.u, c.n, c.Dv, c.Dv), dO = take_rows(c.dO, c.n, c.Dv);
    Vec G = c.G();
    auto loss = [&] { return dot(naive_output(c, G, U, scale, false), dO); };
    expect_close("dQ", rows(gr.dq, c.Dk), dense(fd_rows(c.q, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
    expect_close("dK", rows(gr.dk, c.Dk), dense(fd_rows(c.k, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
    if (c.gated) expect_close("dG", dense(gr.dG), dense(finite_difference(G, loss)), c.n, kFd);
  });
}

TEST(DeltaNetStages, InterOutputBackward) {
  for_cases([](Chunk& c) {
    for (bool with_state : {true, false}) {
      SCOPED_TRACE(with_state ? "S0" : "zero state");
      const double scale = 0.3;
      Vec z(size_t(c.C * c.Dk));
      Grads gr(c);
      inter_output_backward(gr.DQ(), gr.gg, c.Q(), c.DO(), with_state ? c.S0.data() : nullptr, scale, c.g,
                            c.shape(), z.data());
      if (!with_state) {
        for (double e : gr.dq) ASSERT_EQ(e, 0.0) << "dQ from the zero state";
        continue;
      }
      // forward: O = scale diag(gamma) Q S0 + (terms without Q S0)
      const Vec dO = take_rows(c.dO, c.n, c.Dv);
      Vec gam = gammas(c);
      auto loss = [&] {
        double l = 0;
        for (int64_t i = 0; i < c.n; ++i)
          for (int64_t e = 0; e < c.Dv; ++e) {
            double qs = 0;
            for (int64_t d = 0; d < c.Dk; ++d) qs += c.qa(i, d) * c.S0[d * c.Dv + e];
            l += scale * gam[i] * qs * dO[i * c.Dv + e];
          }
        return l;
      };
      expect_close("dQ", rows(gr.dq, c.Dk), dense(fd_rows(c.q, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
      if (c.gated) {
        const Vec dgam = finite_difference(gam, loss);
        expect_close("gamma dgamma", dense(gr.gdg), [&](int64_t i) { return gam[i] * dgam[i]; }, c.n, kFd);
      }
    }
  });
}

TEST(DeltaNetStages, GramSolveBackward) {
  for_cases([](Chunk& c) {
    Forward f = run_forward(c, true);
    const Vec Rb = take(f.rb, c.n, c.Dv, c.Dv), dU = random_vec(5, c.n * c.Dv);
    // x = A^-T dU', as wy_backward hands it on
    const Vec ainv = take(f.ainv, c.n, c.n, c.C);
    Vec x(size_t(c.C * c.Dv), 0.0), bt(size_t(c.C)), dLT(size_t(c.C * c.C)), F(size_t(c.C * c.C));
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t m = 0; m < c.n; ++m)
        for (int64_t e = 0; e < c.Dv; ++e) x[i * c.Dv + e] += ainv[m * c.n + i] * dU[m * c.Dv + e];
    for (int64_t i = 0; i < c.n; ++i) bt[i] = c.ba(i);
    Grads gr(c);
    gram_solve_backward(gr.DK(), gr.gg, f.u.data(), x.data(), f.pg.data(), c.K(), bt.data(), c.g, c.shape(),
                        dLT.data(), F.data());
    // forward, with Rb = diag(beta) R held fixed: U' = (I + tril(diag(beta) (K K^T . D(G)), -1))^-1 Rb
    Vec G = c.G();
    auto loss = [&] { return dot(naive_solve(c, naive_gram(c, G), Rb, c.Dv), dU); };
    expect_close("dK", rows(gr.dk, c.Dk), dense(fd_rows(c.k, c.n, c.Dk, loss)), c.n * c.Dk, kFd);
    expect_close("dbeta", dense(gr.db), dense(fd_rows(c.beta, c.n, 1, loss)), c.n, kFd);
    if (c.gated) expect_close("dG", dense(gr.dG), dense(finite_difference(G, loss)), c.n, kFd);
  });
}

TEST(DeltaNetStages, StateBackward) {
  for_cases([](Chunk& c) {
    const double scale = 0.3;
    const Vec dS1 = random_vec(6, c.Dk * c.Dv), dr = random_vec(7, c.C * c.Dv);
    Vec dS = dS1, dog(size_t(c.C * c.Dv));
    Grads gr(c);
    state_backward(dS.data(), gr.gg, c.S0.data(), c.Q(), c.K(), c.DO(), dr.data(), scale, c.g, c.shape(), dog.data());
    // dS0 = gamma_last dS1 + scale Q^T diag(gamma) dO - K^T dr;  gamma_last dgamma_last = gamma_last <dS1, S0>
    const Vec gam = gammas(c);
    Vec want(size_t(c.Dk * c.Dv));
    for (int64_t d = 0; d < c.Dk; ++d)
      for (int64_t e = 0; e < c.Dv; ++e) {
        double s = gam[c.n - 1] * dS1[d * c.Dv + e];
        for (int64_t i = 0; i < c.n; ++i)
          s += scale * c.qa(i, d) * gam[i] * c.doa(i, e) - c.ka(i, d) * dr[i * c.Dv + e];
        want[d * c.Dv + e] = s;
      }
    expect_close("dS0", dS, want, kExact);
    if (c.gated) {
      const double want_gdg = gam[c.n - 1] * dot(dS1, c.S0);
      EXPECT_NEAR(gr.gdg[c.n - 1], want_gdg, 1e-12 * std::abs(want_gdg)) << "gamma_last dgamma_last";
    }
  });
}

TEST(DeltaNetStages, DecayBackward) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(::testing::Message() << "n=" << k.n << " C=" << k.C);
    Chunk c(9, k.n, k.C, k.Dk, k.Dv, true);
    Grads gr(c);
    const Vec dG = random_vec(10, c.n), gdg = random_vec(11, c.n), dlambda = random_vec(12, c.n);
    std::copy(dG.begin(), dG.end(), gr.dG.begin());
    std::copy(gdg.begin(), gdg.end(), gr.gdg.begin());
    std::copy(dlambda.begin(), dlambda.end(), gr.dlambda.begin());
    Vec da(size_t(c.n * Chunk::H), 0.0);
    decay_backward(da.data() + 1, gr.gg, c.g, c.shape());
    // forward: G = cumsum(a), gamma = exp(G), lambda = exp(G_last - G), with the given gradients
    // dLoss/dG = dG, gamma dLoss/dgamma = gdg, dLoss/dlambda = dlambda at this point
    const Vec gamma0 = gammas(c);
    auto loss = [&] {
      double l = 0, G = 0;
      Vec Gs(size_t(c.n));
      for (int64_t i = 0; i < c.n; ++i) Gs[i] = G += c.a[i * Chunk::H + 1];
      for (int64_t i = 0; i < c.n; ++i)
        l += dG[i] * Gs[i] + gdg[i] / gamma0[i] * std::exp(Gs[i]) + dlambda[i] * std::exp(Gs[c.n - 1] - Gs[i]);
      return l;
    };
    expect_close("da", rows(da, 1), dense(fd_rows(c.a, c.n, 1, loss)), c.n, kFd);
  }
}

}  // namespace
}  // namespace linattn
