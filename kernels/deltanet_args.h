// The backend's MixerArgs (kernels/backend.h) as the DeltaNet kernels' DeltaNetArgs
// (kernels/deltanet.h): the one mapping the CPU and CUDA delta_rule entries and the host mirror
// of the CUDA kernels (tests/cuda/deltanet_test.cpp) use. Host code only.
#pragma once

#include "kernels/backend.h"
#include "kernels/deltanet.h"

namespace linattn::backend {

// Every defined tensor of r as a pointer (undefined: nullptr); r.gate is beta, r.decay the log-decay a
// (da is null without it, whatever r.ddecay holds).
template <class T>
DeltaNetArgs<T> deltanet_args(const MixerArgs& r) {
  auto in = [](const Tensor& t) -> const T* { return t.defined() ? t.data<T>() : nullptr; };
  auto out = [](const Tensor& t) -> T* { return t.defined() ? t.data<T>() : nullptr; };
  DeltaNetArgs<T> p;
  p.B = r.B, p.len = r.T, p.H = r.H, p.Dk = r.Dk, p.Dv = r.Dv, p.scale = T(r.scale), p.chunk_size = r.chunk_size;
  p.o = out(r.o), p.ht = out(r.ht), p.saved = out(r.saved);
  p.q = in(r.q), p.k = in(r.k), p.v = in(r.v), p.beta = in(r.gate), p.a = in(r.decay), p.h0 = in(r.h0);
  p.dO = in(r.dO), p.dht = in(r.dht);
  p.dq = out(r.dq), p.dk = out(r.dk), p.dv = out(r.dv), p.dbeta = out(r.dgate), p.da = r.decay.defined() ? out(r.ddecay) : nullptr;
  p.dh0 = out(r.dh0);
  p.seqs = r.seqs;
  return p;
}

}  // namespace linattn::backend
