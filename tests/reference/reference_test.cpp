// linattn's mixers against the independent references of reference.h, through linattn-ops: the
// fixed cases in tests/reference/cases/ (regenerated as cases.h says) and fresh random problems of
// realistic size, in both forms and both dtypes. Also checks the references themselves: their
// gradients against finite differences of their forward, and a few values worked out by hand.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cases.h"
#include "testing.h"

namespace linattn::reference {
namespace {

namespace fs = std::filesystem;

// Tolerances, relative to the largest entry of the expected array (testing::compare).
// float64: the kernels and the reference sum the same terms in different orders (chunks, GEMM
// blocking), so they differ by rounding: ~1e-16 per operation over sums of at most a few hundred
// terms; measured at most 3e-15. 1e-10 leaves a wide margin while a wrong convention or scale
// moves results by 1e-2 or more.
constexpr double kTolF64 = 1e-10;
// float32: linattn-ops rounds the inputs to float32 (relative 6e-8) and computes in float32; over
// the cases' short sequences the measured errors are at most 5e-7; 1e-5 leaves a 20x margin.
constexpr double kTolF32 = 1e-5;

double loss(const Problem& p, const Arrays& out) {
  double s = 0;
  for (const auto& [name, upstream] : {std::pair<std::string, std::string>{"o", "do"}, {"ht", "dht"}, {"zt", "dzt"}})
    if (out.count(name) && p.in.count(upstream))
      for (size_t i = 0; i < out.at(name).data.size(); ++i) s += out.at(name).data[i] * p.in.at(upstream).data[i];
  return s;
}

// What the reference gives for p: its outputs and its gradients, one map.
Arrays expected(const Problem& p) {
  Arrays all = forward(p);
  all.merge(backward(p));
  return all;
}

// Compares every array of `got` with `want` (the same names, each within tol) and prints the worst
// error of the set: "gla_h0.h5 chunk f64: worst dg, max abs error 2e-16, relative error 1e-16, tolerance 1e-10".
void expect_match(const std::string& what, const Arrays& got, const Arrays& want, double tol) {
  std::vector<std::string> got_names, want_names;
  for (const auto& kv : got) got_names.push_back(kv.first);
  for (const auto& kv : want) want_names.push_back(kv.first);
  EXPECT_EQ(got_names, want_names) << what << ": linattn-ops wrote other datasets than the reference has";
  std::string worst;
  testing::Error worst_error;
  for (const auto& [name, w] : want) {
    if (!got.count(name)) continue;
    testing::Error e = testing::compare(to_tensor(got.at(name)), to_tensor(w));
    EXPECT_LE(e.relative, tol) << what << ": " << name << " differs from the reference: " << e.str()
                               << ", tolerance " << tol;
    if (worst.empty() || e.relative > worst_error.relative) worst = name, worst_error = e;
  }
  std::printf("  %s: worst %s, %s, tolerance %g\n", what.c_str(), worst.c_str(), worst_error.str().c_str(), tol);
}

// A case's seed, from its name: adding a case leaves the others' files unchanged.
uint64_t seed_of(const std::string& name) {
  uint64_t x = 1469598103934665603ULL;  // FNV-1a
  for (char c : name) x = (x ^ uint8_t(c)) * 1099511628211ULL;
  return x;
}

class Reference : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linattn-reference-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs linattn-ops OP on `in` with `args` and returns everything it wrote.
  Arrays run_ops(const std::string& op, const std::string& in, const std::string& args) {
    const std::string out = (dir_ / "out.h5").string();
    const std::string command = linattn::testing::built_binary("linattn-ops") + " " + op + " " + in + " " + out + " " + args;
    const linattn::testing::CommandResult r = linattn::testing::run_command(command);
    if (r.status != 0) {
      ADD_FAILURE() << command << " failed (status " << r.status << "):\n" << r.output;
      return {};
    }
    return read_arrays(out);
  }

  fs::path dir_;
};

// The reverse passes of reference.cpp against central finite differences of its forward, in
// float64 with h = 1e-6 on every input entry of every case: the difference error is
// O(h^2 f''') ~ 1e-12 plus rounding ~1e-16 |loss| / h ~ 1e-10, so 1e-6 relative is a safe bar
// that any wrong term of a reverse pass misses by orders of magnitude.
TEST_F(Reference, GradientsMatchFiniteDifferencesOfTheForward) {
  const double h = 1e-6;
  for (const Spec& s : case_specs()) {
    SCOPED_TRACE(s.name);
    Problem p = random_problem(s, seed_of(s.name) + 1);
    Arrays grads = backward(p);
    for (const std::string& name : differentiable_inputs(p)) {
      Array numeric = p.in.at(name);
      for (size_t i = 0; i < numeric.data.size(); ++i) {
        double& x = p.in.at(name).data[i];
        const double saved = x;
        x = saved + h;
        const double up = loss(p, forward(p));
        x = saved - h;
        const double down = loss(p, forward(p));
        x = saved;
        numeric.data[i] = (up - down) / (2 * h);
      }
      SCOPED_TRACE("d" + name);
      EXPECT_CLOSE(to_tensor(grads.at("d" + name)), to_tensor(numeric), 1e-6);
    }
  }
}

// Single-channel problems (dk = dv = 1, so scale = 1) whose values follow from ops.md's formulas by
// hand: they pin the conventions (gate before the update, exp of the log-gate, where beta enters,
// the normalizer, the window, Mamba2's dt in both the decay and the input) independently of how
// reference.cpp loops.
TEST_F(Reference, MatchesValuesWorkedOutByHand) {
  auto scalars = [](std::initializer_list<double> values) {
    return Array{{1, int64_t(values.size()), 1, 1}, std::vector<double>(values)};
  };
  auto head_scalars = [](std::initializer_list<double> values) {
    return Array{{1, int64_t(values.size()), 1}, std::vector<double>(values)};
  };
  const Array h0{{1, 1, 1, 1}, {0.5}};
  const double q1 = 0.3, q2 = -0.7, k1 = 0.9, k2 = -0.4, v1 = 1.5, v2 = 0.25, g1 = -0.2, g2 = -1.1;

  const Problem gla{.op = "gla",
                    .in = {{"q", scalars({q1, q2})}, {"k", scalars({k1, k2})}, {"v", scalars({v1, v2})},
                           {"g", scalars({g1, g2})}, {"h0", h0}}};
  const double s1 = std::exp(g1) * 0.5 + k1 * v1, s2 = std::exp(g2) * s1 + k2 * v2;
  Arrays out = forward(gla);
  EXPECT_NEAR(out["o"].data[0], s1 * q1, 1e-15);
  EXPECT_NEAR(out["o"].data[1], s2 * q2, 1e-15);
  EXPECT_NEAR(out["ht"].data[0], s2, 1e-15);

  const double beta1 = 0.6, a1 = -0.3;
  const Problem gated{.op = "gated_deltanet",
                      .in = {{"q", scalars({q1})}, {"k", scalars({k1})}, {"v", scalars({v1})},
                             {"beta", head_scalars({beta1})}, {"a", head_scalars({a1})}, {"h0", h0}}};
  const double gated_s = std::exp(a1) * (1 - beta1 * k1 * k1) * 0.5 + beta1 * k1 * v1;
  EXPECT_NEAR(forward(gated)["o"].data[0], gated_s * q1, 1e-15);

  const double dt1 = 0.4, dt2 = 0.9, A = -1.3, c1 = 0.6, c2 = -0.8;  // mamba2: q, k, v as C, B, x
  const Problem mamba2{.op = "mamba2",
                       .in = {{"x", scalars({v1, v2})}, {"dt", head_scalars({dt1, dt2})}, {"A", Array{{1}, {A}}},
                              {"B", scalars({k1, k2})}, {"C", scalars({c1, c2})}, {"h0", h0}}};
  const double m1 = std::exp(dt1 * A) * 0.5 + dt1 * k1 * v1, m2 = std::exp(dt2 * A) * m1 + dt2 * k2 * v2;
  out = forward(mamba2);
  EXPECT_NEAR(out["o"].data[0], c1 * m1, 1e-15);
  EXPECT_NEAR(out["o"].data[1], c2 * m2, 1e-15);  // no 1/sqrt(N) scale
  EXPECT_NEAR(out["ht"].data[0], m2, 1e-15);

  const Problem normalized{.op = "linear_attn",
                           .in = {{"q", scalars({q1, q2})}, {"k", scalars({k1, k2})}, {"v", scalars({v1, v2})}},
                           .feature_map = "elu1",
                           .normalize = true};
  auto elu1 = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
  const double num2 = (elu1(k1) * v1 + elu1(k2) * v2) * elu1(q2), den2 = elu1(q2) * (elu1(k1) + elu1(k2)) + 1e-6;
  EXPECT_NEAR(forward(normalized)["o"].data[1], num2 / den2, 1e-15);

  const Problem window{.op = "attention",
                       .in = {{"q", scalars({q1, q2, 0.1})}, {"k", scalars({k1, k2, 0.8})}, {"v", scalars({v1, v2, -2.0})}},
                       .window = 2};
  const double w1 = std::exp(q2 * k1), w2 = std::exp(q2 * k2), w3 = std::exp(0.1 * k2), w4 = std::exp(0.1 * 0.8);
  out = forward(window);
  EXPECT_NEAR(out["o"].data[0], v1, 1e-15);
  EXPECT_NEAR(out["o"].data[1], (w1 * v1 + w2 * v2) / (w1 + w2), 1e-15);
  EXPECT_NEAR(out["o"].data[2], (w3 * v2 + w4 * -2.0) / (w3 + w4), 1e-15);  // token 0 is outside the window
}

// The committed files hold what the reference computes today for their inputs.
TEST_F(Reference, CaseFilesHoldTheReferenceResults) {
  for (const Spec& s : case_specs()) {
    const std::string path = cases_dir() + "/" + s.name + ".h5";
    ASSERT_TRUE(fs::exists(path)) << path << " is missing: run the tests from the repository root (ctest does), "
                                  << "or regenerate the cases as tests/reference/cases.h says";
    Case c = read_case(path);
    expect_match(c.name + " reference", expected(c.problem), c.want, 1e-14);
  }
}

// Every fixed case through linattn-ops, chunk form (at the case's chunk size, which never divides T)
// and recurrent form, float64 and float32.
TEST_F(Reference, LinattnOpsMatchesTheCaseFiles) {
  for (const Spec& s : case_specs()) {
    const std::string path = cases_dir() + "/" + s.name + ".h5";
    ASSERT_TRUE(fs::exists(path)) << path << " is missing: run the tests from the repository root (ctest does)";
    Case c = read_case(path);
    SCOPED_TRACE(c.name);
    for (const char* form : {"chunk", "recurrent"})
      for (const char* dtype : {"f64", "f32"}) {
        std::string args = std::string("--form ") + form + " --dtype " + dtype;
        if (std::string(form) == "chunk") args += " --chunk-size " + std::to_string(c.chunk_size);
        expect_match(c.name + " " + form + " " + dtype, run_ops(c.problem.op, path, args), c.want,
                     std::string(dtype) == "f64" ? kTolF64 : kTolF32);
      }
  }
}

// Fresh random problems, larger than the fixed cases (several chunks of the default 64 and a
// partial one; attention longer than a window of 33), so the committed files are not the only evidence.
TEST_F(Reference, LinattnOpsMatchesTheReferenceOnRandomProblems) {
  const std::vector<Spec> specs{
      {.name = "linear_attn", .op = "linear_attn", .B = 2, .T = 150, .H = 3, .dk = 8, .dv = 6, .h0 = true,
       .feature_map = "relu", .chunk_size = 64},
      {.name = "linear_attn_normalized", .op = "linear_attn", .B = 2, .T = 150, .H = 3, .dk = 8, .dv = 6,
       .h0 = true, .feature_map = "elu1", .normalize = true, .chunk_size = 64},
      {.name = "gla", .op = "gla", .B = 2, .T = 150, .H = 3, .dk = 8, .dv = 6, .h0 = true, .chunk_size = 64},
      {.name = "deltanet", .op = "deltanet", .B = 2, .T = 150, .H = 3, .dk = 8, .dv = 6, .h0 = true,
       .chunk_size = 64},
      {.name = "gated_deltanet", .op = "gated_deltanet", .B = 2, .T = 150, .H = 3, .dk = 8, .dv = 6, .h0 = true,
       .chunk_size = 64},
      {.name = "mamba2", .op = "mamba2", .B = 2, .T = 150, .H = 4, .dk = 8, .dv = 6, .G = 2, .h0 = true,
       .chunk_size = 64},
      {.name = "attention_gqa", .op = "attention", .B = 2, .T = 150, .H = 4, .Hkv = 2, .dk = 8, .dv = 6},
      {.name = "attention_window_gqa", .op = "attention", .B = 2, .T = 150, .H = 4, .Hkv = 1, .dk = 8, .dv = 6,
       .window = 33},
  };
  for (const Spec& s : specs) {
    SCOPED_TRACE(s.name);
    Problem p = random_problem(s, 2026);
    const std::string in = (dir_ / "in.h5").string();
    write_case(in, s, p, nullptr);
    const Arrays want = expected(p);
    expect_match(s.name + " random chunk f64", run_ops(s.op, in, "--chunk-size 64"), want, kTolF64);
    expect_match(s.name + " random recurrent f64", run_ops(s.op, in, "--form recurrent"), want, kTolF64);
  }
}

// Writes every case file; disabled, so it runs only when asked for (see cases.h).
TEST_F(Reference, DISABLED_WriteCases) {
  fs::create_directories(cases_dir());
  for (const Spec& s : case_specs()) {
    Problem p = random_problem(s, seed_of(s.name));
    const Arrays want = expected(p);
    const std::string path = cases_dir() + "/" + s.name + ".h5";
    write_case(path, s, p, &want);
    std::printf("wrote %s (%ld bytes)\n", path.c_str(), long(fs::file_size(path)));
  }
}

}  // namespace
}  // namespace linattn::reference
