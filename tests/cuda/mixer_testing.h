// Helpers for the tests of the CUDA linear attention and GLA kernels: random inputs for a shape, and
// one forward + backward through a pair of backend entries (the CPU's, the CUDA's or the host run of
// the CUDA scans) with every output, final state and gradient returned in float64 on the host.
// The gradients start from the same random values everywhere, so `+=` is checked too.
#pragma once

#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/gla.h"
#include "kernels/cpu/linear_attn.h"
#include "testing.h"

namespace linattn::testing {

struct MixerCase {
  int64_t B, T, H, Dk, Dv, chunk;
  bool h0 = true;
  FeatureMap phi = FeatureMap::identity;
  bool normalize = false;
  bool recurrent = false;
  double gate_min = -3;  // GLA log-gates uniform in [gate_min, 0]
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
           " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv) +
           (recurrent ? std::string(" recurrent") : " chunk=" + std::to_string(chunk)) + (h0 ? " h0" : "") +
           " phi=" + std::to_string(int(phi)) + (normalize ? " normalized" : "") + " gate_min=" + std::to_string(gate_min);
  }
};

enum class MixerKind { linear_attention, gla };

struct MixerData {  // float64 on the host; g only for GLA, z0 and dzt only normalized, h0 and z0 only with h0
  Tensor q, k, v, g, h0, z0, dO, dht, dzt;
  Tensor dq, dk, dv, dg, dh0, dz0;  // the gradients' starting values
};

inline MixerData random_mixer_data(const MixerCase& c, MixerKind kind, Rng& rng) {
  const Shape qk{c.B, c.T, c.H, c.Dk}, vo{c.B, c.T, c.H, c.Dv}, st{c.B, c.H, c.Dk, c.Dv}, z{c.B, c.H, c.Dk};
  MixerData d;
  d.q = random_tensor(qk, rng), d.k = random_tensor(qk, rng), d.v = random_tensor(vo, rng);
  d.dO = random_tensor(vo, rng), d.dht = random_tensor(st, rng);
  d.dq = random_tensor(qk, rng), d.dk = random_tensor(qk, rng), d.dv = random_tensor(vo, rng);
  if (kind == MixerKind::gla) d.g = random_tensor(qk, rng, c.gate_min, 0), d.dg = random_tensor(qk, rng);
  if (c.h0) d.h0 = random_tensor(st, rng), d.dh0 = random_tensor(st, rng);
  if (c.normalize) {
    d.dzt = random_tensor(z, rng);
    if (c.h0) d.z0 = random_tensor(z, rng, 0.5, 1.5), d.dz0 = random_tensor(z, rng);
  }
  return d;
}

struct MixerResult {  // float64 on the host; undefined where the case has no such output
  Tensor o, ht, zt, dq, dk, dv, dg, dh0, dz0;
};

using MixerEntry = void (*)(const backend::MixerArgs&);

// The forward, then the backward, through fwd and bwd on copies of d in dtype dt on device dev.
inline MixerResult run_mixer(MixerEntry fwd, MixerEntry bwd, MixerKind kind, const MixerCase& c, const MixerData& d,
                             DType dt, Device dev) {
  auto in = [&](const Tensor& t) { return t.defined() ? t.to(dt).to(dev) : Tensor(); };
  auto out = [&](const Tensor& t) { return t.defined() ? t.to(Device::cpu).to(DType::f64) : Tensor(); };
  backend::MixerArgs r;
  r.B = c.B, r.T = c.T, r.H = c.H, r.Dk = c.Dk, r.Dv = c.Dv;
  r.scale = 1.0 / std::sqrt(double(c.Dk));
  r.chunk = !c.recurrent, r.chunk_size = c.chunk;
  r.phi = c.phi, r.normalize = c.normalize;
  r.q = in(d.q), r.k = in(d.k), r.v = in(d.v), r.gate = in(d.g), r.h0 = in(d.h0), r.z0 = in(d.z0);
  r.o = Tensor::zeros({c.B, c.T, c.H, c.Dv}, dt, dev);
  r.ht = Tensor::zeros({c.B, c.H, c.Dk, c.Dv}, dt, dev);
  if (c.normalize) r.zt = Tensor::zeros({c.B, c.H, c.Dk}, dt, dev);
  if (r.chunk) {  // sized as autograd/mixers.cpp sizes it
    const int64_t n = kind == MixerKind::gla
                          ? cpu::gla_chunk_saved_size(c.B, c.T, c.H, c.Dk, c.Dv, c.chunk)
                          : cpu::linear_attn_chunk_saved_size(c.B, c.T, c.H, c.Dk, c.Dv, c.normalize, c.chunk);
    r.saved = Tensor::zeros({n}, dt, dev);
  }
  fwd(r);
  r.dq = in(d.dq), r.dk = in(d.dk), r.dv = in(d.dv), r.dgate = in(d.dg), r.dh0 = in(d.dh0), r.dz0 = in(d.dz0);
  r.dO = in(d.dO), r.dht = in(d.dht), r.dzt = in(d.dzt);
  bwd(r);
  return {out(r.o), out(r.ht), out(r.zt), out(r.dq), out(r.dk), out(r.dv), out(r.dgate), out(r.dh0), out(r.dz0)};
}

// Every defined output of got against want, relative to want's largest entry.
#define EXPECT_MIXER_CLOSE(got, want, tol)                                                        \
  do {                                                                                            \
    const ::linattn::testing::MixerResult& g_ = (got);                                           \
    const ::linattn::testing::MixerResult& w_ = (want);                                          \
    const std::pair<const char*, const Tensor*> pairs_[] = {                                      \
        {"o", &g_.o},   {"ht", &g_.ht}, {"zt", &g_.zt},   {"dq", &g_.dq},  {"dk", &g_.dk},        \
        {"dv", &g_.dv}, {"dg", &g_.dg}, {"dh0", &g_.dh0}, {"dz0", &g_.dz0}};                      \
    const Tensor* wants_[] = {&w_.o, &w_.ht, &w_.zt, &w_.dq, &w_.dk, &w_.dv, &w_.dg, &w_.dh0, &w_.dz0}; \
    for (int i_ = 0; i_ < 9; ++i_) {                                                              \
      ASSERT_EQ(pairs_[i_].second->defined(), wants_[i_]->defined()) << pairs_[i_].first;         \
      if (!wants_[i_]->defined()) continue;                                                       \
      SCOPED_TRACE(pairs_[i_].first);                                                             \
      EXPECT_CLOSE(*pairs_[i_].second, *wants_[i_], tol);                                         \
    }                                                                                             \
  } while (0)

}  // namespace linattn::testing
