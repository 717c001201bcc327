// Test helpers: random tensors, error measures and central finite differences (float64).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"

namespace linattn::testing {

inline Tensor random_tensor(const Shape& shape, Rng& rng, double lo = -1.0, double hi = 1.0,
                            DType dtype = DType::f64) {
  Tensor t = Tensor::empty(shape, dtype);
  rng.fill_uniform(t, lo, hi);
  return t;
}

inline double max_abs(const Tensor& t) {
  Tensor d = t.to(DType::f64);
  double m = 0;
  for (int64_t i = 0; i < d.numel(); ++i) m = std::max(m, std::abs(d.data<double>()[i]));
  return m;
}

// Error of `got` against `want`: the largest absolute difference, and that difference relative to
// the largest |want| entry (infinity norms; a per-entry ratio would blow up on entries near zero).
struct Error {
  double max_abs = 0;
  double relative = 0;
  std::string str() const {
    std::ostringstream os;
    os << "max abs error " << max_abs << ", relative error " << relative;
    return os.str();
  }
};

inline Error compare(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape()) << got.str() << " vs " << want.str();
  Tensor g = got.to(DType::f64), w = want.to(DType::f64);
  Error e;
  double scale = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    double a = g.data<double>()[i], b = w.data<double>()[i];
    e.max_abs = std::isnan(a - b) ? INFINITY : std::max(e.max_abs, std::abs(a - b));
    scale = std::max(scale, std::abs(b));
  }
  e.relative = e.max_abs / std::max(scale, 1e-300);
  return e;
}

// Passes when compare(got, want).relative <= tol; a failure prints both errors and the tolerance.
#define EXPECT_CLOSE(got, want, tol)                                                          \
  do {                                                                                        \
    ::linattn::testing::Error err_ = ::linattn::testing::compare((got), (want));              \
    EXPECT_LE(err_.relative, (tol)) << #got << " vs " << #want << ": " << err_.str()          \
                                    << ", tolerance " << (tol);                               \
  } while (0)

// d loss / d x by central differences, perturbing each entry of the float64 tensor x in place
// (and restoring it). The error of a central difference is O(h^2 f'''), so with h = 1e-6 and
// O(1) inputs the estimate is good to ~1e-9 relative, far inside the 1e-6 bar of the checks.
inline Tensor finite_difference(const std::function<double()>& loss, const Tensor& x, double h = 1e-6) {
  Tensor grad = Tensor::zeros(x.shape(), DType::f64);
  double* p = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    double saved = p[i];
    p[i] = saved + h;
    double up = loss();
    p[i] = saved - h;
    double down = loss();
    p[i] = saved;
    grad.data<double>()[i] = (up - down) / (2 * h);
  }
  return grad;
}

// The message of the linattn::Error that f throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const linattn::Error& e) {
    return e.what();
  }
  return "";
}

// A binary of this build: $LINATTN_BUILD_DIR/NAME (ctest sets the variable), else build/NAME.
inline std::string built_binary(const std::string& name) {
  const char* dir = std::getenv("LINATTN_BUILD_DIR");
  return std::string(dir ? dir : "build") + "/" + name;
}

// What a shell command printed (stdout and stderr together) and its exit status (-1 when a signal
// ended it).
struct CommandResult {
  int status = -1;
  std::string output;
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* p = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// sum(a * b) over all entries, in float64: the scalar loss <output, random upstream gradient>.
inline double dot(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(DType::f64), y = b.to(DType::f64);
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += x.data<double>()[i] * y.data<double>()[i];
  return s;
}

}  // namespace linattn::testing
