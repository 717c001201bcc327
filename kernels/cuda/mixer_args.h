// The backend's MixerArgs (kernels/backend.h) as the raw pointers of a chunk::Mixer, the form the CUDA
// linear attention and GLA kernels take (kernels/cuda/chunk_gla.h). Host code only; used by the
// CUDA entries.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/chunk_gla.h"

namespace linattn::cuda::chunk {

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// A float32 tensor's data or a bf16 one's bits; none when t is absent.
inline Floats floats_or_null(const Tensor& t) {
  if (!t.defined()) return Floats();
  return t.dtype() == DType::bf16 ? Floats(t.data<bfloat16>(), true) : Floats(t.data<float>());
}

// Both forms run the chunk-parallel passes (kChunk tokens a chunk, whatever r.chunk_size says): the
// chunk size changes the result only by rounding. The intra-chunk products take
// backend::matmul_precision() (train.precision: bf16, train.tf32): bf16 or tf32 on the tensor cores.
template <class T>
Mixer<T> to_mixer(const backend::MixerArgs& r) {
  Mixer<T> m;
  m.B = r.B, m.len = r.T, m.H = r.H, m.Dk = r.Dk, m.Dv = r.Dv;
  m.scale = T(r.scale);
  m.phi = r.phi, m.normalize = r.normalize;
  m.precision = backend::matmul_precision();
  m.seqs = r.seqs;
  m.o = data_or_null<T>(r.o), m.ht = data_or_null<T>(r.ht), m.zt = data_or_null<T>(r.zt);
  m.q = floats_or_null(r.q), m.k = floats_or_null(r.k), m.v = floats_or_null(r.v), m.g = floats_or_null(r.gate);
  m.h0 = data_or_null<T>(r.h0), m.z0 = data_or_null<T>(r.z0);
  m.dq = data_or_null<T>(r.dq), m.dk = data_or_null<T>(r.dk), m.dv = data_or_null<T>(r.dv);
  m.dg = data_or_null<T>(r.dgate), m.dh0 = data_or_null<T>(r.dh0), m.dz0 = data_or_null<T>(r.dz0);
  m.dO = data_or_null<T>(r.dO), m.dht = data_or_null<T>(r.dht), m.dzt = data_or_null<T>(r.dzt);
  m.write = r.write, m.final_state = r.final_state;
  return m;
}

}  // namespace linattn::cuda::chunk
