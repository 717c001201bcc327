// A small, fast, reproducible random generator (xoshiro256**) whose whole state can be saved.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace linattn {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }

  void seed_with(uint64_t seed) {
    for (auto& s : state_) {  // splitmix64 expands the seed
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  uint64_t below(uint64_t n) { return next_u64() % n; }  // bias < 2^-40 for the n used here
  double normal() {  // Box-Muller; one draw per call keeps the state simple to save
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }

  void fill_normal(const Tensor& t, double mean, double stddev) {
    dispatch_float(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(mean + stddev * normal());
    });
  }
  void fill_uniform(const Tensor& t, double lo, double hi) {
    dispatch_float(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = T(uniform(lo, hi));
    });
  }

  const std::array<uint64_t, 4>& state() const { return state_; }
  void set_state(const std::array<uint64_t, 4>& s) { state_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> state_{};
};

}  // namespace linattn
