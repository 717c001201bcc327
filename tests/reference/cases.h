// The fixed reference cases: small random problems for every mixer, and their files.
//
// A case file tests/reference/cases/NAME.h5 is a linattn-ops input file (q, k, v, g/beta/a, h0,
// z0, do, dht, dzt; attributes op, scale, feature_map, normalize, window_size) that also holds what the
// reference computes for it, as datasets want_o, want_ht, want_dq, ... and the attribute
// chunk_size, the --chunk-size the test runs the chunk form with (never a divisor of T).
//
// To regenerate every case file after changing the reference or the list below, from the
// repository root:
//   build/test_reference --gtest_also_run_disabled_tests --gtest_filter='Reference.DISABLED_WriteCases'
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "reference.h"

namespace linattn::reference {

struct Spec {
  std::string name, op;
  int64_t B = 1, T = 11, H = 2, Hkv = 0, dk = 4, dv = 3;  // Hkv = 0: as many key/value heads as H
  int64_t G = 0;  // mamba2: groups of heads sharing B and C, 0 = H (its N is dk, its P is dv)
  bool h0 = false;  // an initial state (linear mixers): h0, and z0 for the normalized form
  std::string feature_map = "identity";
  bool normalize = false;
  int64_t window = 0;
  double scale = 0;      // 0: the default dk^-1/2, not written to the file
  bool retnet = false;   // gla with RetNet's constant gate g = log(1 - 2^(-5-h))
  int64_t chunk_size = 4;
};

// Every fixed case: each mixer with and without an initial state, each feature map, the
// normalized form, RetNet's gate, a scale attribute, global, grouped-query and windowed attention.
const std::vector<Spec>& case_specs();

// Random inputs for spec s: q, k, v, do in [-1, 1] (unit-norm q and k for the DeltaNets, as their
// layer makes them), g in [-2, 0), beta in [0.05, 0.95], a in [-1, 0), h0, dht, dzt in [-1, 1],
// z0 in [0.5, 1.5]; mamba2: x, B, C, do in [-1, 1], dt in [0.05, 1], A in [-2, -0.2]. The seed picks
// the values; the same spec and seed give the same problem.
Problem random_problem(const Spec& s, uint64_t seed);

struct Case {
  std::string name;
  Problem problem;
  int64_t chunk_size;
  Arrays want;  // o, ht, dq, ... as the reference computed them when the file was written
};

std::string cases_dir();  // tests/reference/cases, relative to the repository root
void write_case(const std::string& path, const Spec& s, const Problem& p, const Arrays* want);
Case read_case(const std::string& path);
// name -> array of every dataset in an HDF5 file (linattn-ops' output).
Arrays read_arrays(const std::string& path);
Tensor to_tensor(const Array& x);  // a float64 tensor

}  // namespace linattn::reference
