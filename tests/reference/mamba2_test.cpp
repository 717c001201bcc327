// The Mamba2 kernels (kernels/cpu/mamba2.h) against the independent reference of reference.h: the fixed
// mamba2 cases in tests/reference/cases/ and fresh random problems of realistic size, both forms, both
// dtypes, outputs and every gradient, calling the kernels directly (reference_test.cpp checks the op
// through linattn-ops on the same files).
#include <cstdio>
#include <filesystem>

#include "cases.h"
#include "kernels/cpu/mamba2.h"
#include "testing.h"

namespace linattn::reference {
namespace {

// Tolerances relative to the largest entry of the expected array, on the same basis as
// reference_test.cpp's: float64 differs from the reference by the rounding of reordered sums
// (measured at most 5e-14, dA of the random problems: a sum over 300 tokens); float32 rounds the
// inputs and computes in float32: measured at most 4e-7 on the case files and 4e-6 on the random
// problems (dA again), so 3e-5 leaves a 7x margin while a wrong term moves results by 1e-2 or more.
constexpr double kTolF64 = 1e-10;
constexpr double kTolF32 = 3e-5;

// What the kernels give for p, named as the reference names it: o, ht, and d<input> (dh0 only with h0).
// chunk == 0: the recurrent form.
template <class F>
Arrays run_kernels(const Problem& p, int64_t chunk) {
  const DType dtype = std::is_same_v<F, float> ? DType::f32 : DType::f64;
  auto in = [&](const std::string& name) { return to_tensor(p.in.at(name)).to(dtype); };
  const Tensor x = in("x"), dt = in("dt"), A = in("A"), B = in("B"), C = in("C"), dy = in("do"), dht = in("dht");
  const bool with_h0 = p.in.count("h0");
  const Tensor h0 = with_h0 ? in("h0") : Tensor::zeros(dht.shape(), dtype);
  const Shape& xs = x.shape();
  const cpu::Mamba2Dims d{xs[0], xs[1], xs[2], B.shape()[2], B.shape()[3], xs[3]};
  std::map<std::string, Tensor> out{{"o", Tensor::zeros(xs, dtype)},        {"ht", Tensor::zeros(h0.shape(), dtype)},
                                    {"dx", Tensor::zeros(xs, dtype)},       {"ddt", Tensor::zeros(dt.shape(), dtype)},
                                    {"dA", Tensor::zeros(A.shape(), dtype)}, {"dB", Tensor::zeros(B.shape(), dtype)},
                                    {"dC", Tensor::zeros(C.shape(), dtype)}, {"dh0", Tensor::zeros(h0.shape(), dtype)}};
  auto ptr = [&](const std::string& name) { return out.at(name).data<F>(); };
  std::vector<F> saved(chunk ? cpu::mamba2_chunk_saved_size(d, chunk) : 0);
  const cpu::Mamba2Forward<F> f{.y = ptr("o"), .ht = ptr("ht"), .saved = saved.data(), .x = x.data<F>(),
                                .dt = dt.data<F>(), .A = A.data<F>(), .B = B.data<F>(), .C = C.data<F>(),
                                .h0 = with_h0 ? h0.data<F>() : nullptr, .dims = d, .chunk_size = chunk ? chunk : 1};
  const cpu::Mamba2Backward<F> g{.dx = ptr("dx"), .ddt = ptr("ddt"), .dA = ptr("dA"), .dB = ptr("dB"),
                                 .dC = ptr("dC"), .dh0 = with_h0 ? ptr("dh0") : nullptr, .saved = saved.data(),
                                 .x = f.x, .dt = f.dt, .A = f.A, .B = f.B, .C = f.C, .h0 = f.h0,
                                 .dy = dy.data<F>(), .dht = dht.data<F>(), .dims = d, .chunk_size = f.chunk_size};
  if (chunk) {
    cpu::mamba2_chunk_forward(f);
    cpu::mamba2_chunk_backward(g);
  } else {
    cpu::mamba2_recurrent_forward(f);
    cpu::mamba2_recurrent_backward(g);
  }
  if (!with_h0) out.erase("dh0");
  Arrays result;
  for (const auto& [name, t] : out) {
    const Tensor t64 = t.to(DType::f64);
    result[name] = {t64.shape(), std::vector<double>(t64.data<double>(), t64.data<double>() + t64.numel())};
  }
  return result;
}

// Every array of `want` within tol of `got`'s, and the same names; prints the worst.
void expect_match(const std::string& what, const Arrays& got, const Arrays& want, double tol) {
  std::vector<std::string> got_names, want_names;
  for (const auto& kv : got) got_names.push_back(kv.first);
  for (const auto& kv : want) want_names.push_back(kv.first);
  EXPECT_EQ(got_names, want_names) << what;
  std::string worst;
  testing::Error worst_error;
  for (const auto& [name, w] : want) {
    if (!got.count(name)) continue;
    const testing::Error e = testing::compare(to_tensor(got.at(name)), to_tensor(w));
    EXPECT_LE(e.relative, tol) << what << ": " << name << " differs from the reference: " << e.str()
                               << ", tolerance " << tol;
    if (worst.empty() || e.relative > worst_error.relative) worst = name, worst_error = e;
  }
  std::printf("  %s: worst %s, %s, tolerance %g\n", what.c_str(), worst.c_str(), worst_error.str().c_str(), tol);
}

void check_both_forms(const std::string& name, const Problem& p, int64_t chunk, const Arrays& want) {
  expect_match(name + " chunk f64", run_kernels<double>(p, chunk), want, kTolF64);
  expect_match(name + " recurrent f64", run_kernels<double>(p, 0), want, kTolF64);
  expect_match(name + " chunk f32", run_kernels<float>(p, chunk), want, kTolF32);
  expect_match(name + " recurrent f32", run_kernels<float>(p, 0), want, kTolF32);
}

// The fixed cases (G = 1, 1 < G < H, G = H; with and without h0), chunk form at the case's chunk size,
// which never divides T.
TEST(Mamba2Reference, KernelsMatchTheCaseFiles) {
  int cases = 0;
  for (const Spec& s : case_specs()) {
    if (s.op != "mamba2") continue;
    const std::string path = cases_dir() + "/" + s.name + ".h5";
    ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run the tests from the repository root "
                                               << "(ctest does), or regenerate the cases as cases.h says";
    const Case c = read_case(path);
    SCOPED_TRACE(c.name);
    check_both_forms(c.name, c.problem, c.chunk_size, c.want);
    ++cases;
  }
  EXPECT_EQ(cases, 3);
}

// Fresh random problems with several chunks of the default 64 and a partial one.
TEST(Mamba2Reference, KernelsMatchTheReferenceOnRandomProblems) {
  for (int64_t G : {1, 2, 4}) {
    const Spec s{.name = "mamba2", .op = "mamba2", .B = 2, .T = 150, .H = 4, .dk = 8, .dv = 6, .G = G, .h0 = true};
    SCOPED_TRACE("G=" + std::to_string(G));
    const Problem p = random_problem(s, 2026 + G);
    Arrays want = forward(p);
    want.merge(backward(p));
    check_both_forms("mamba2 random G=" + std::to_string(G), p, 64, want);
  }
}

}  // namespace
}  // namespace linattn::reference
