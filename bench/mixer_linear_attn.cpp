// `linattn-bench mixers` entry: chunkwise linear attention (identity feature map, unnormalized,
// chunk 64), float32 forward + backward.
#include <cmath>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/backend.h"

namespace linattn::bench {
namespace {

constexpr int64_t kChunk = 64;

// The CPU column's entries (kernels/backend.def), as the linear attention op calls them.
std::function<void()> prepare(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<backend::MixerArgs>();
  t->B = B, t->T = T, t->H = H, t->Dk = dk, t->Dv = dv;
  t->scale = 1.0 / std::sqrt(double(dk));
  t->chunk_size = kChunk;  // phi identity, unnormalized: the defaults
  Rng rng(1);
  auto rand = [&](const Shape& s) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, -1, 1);
    return x;
  };
  t->q = rand({B, T, H, dk}), t->k = rand({B, T, H, dk}), t->v = rand({B, T, H, dv});
  t->dO = rand({B, T, H, dv}), t->dht = rand({B, H, dk, dv});
  t->o = Tensor::zeros({B, T, H, dv}, DType::f32), t->ht = Tensor::zeros({B, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({backend::linear_attention_saved_size(Device::cpu, *t)}, DType::f32);
  t->dq = Tensor::zeros(t->q.shape(), DType::f32), t->dk = Tensor::zeros(t->k.shape(), DType::f32);
  t->dv = Tensor::zeros(t->v.shape(), DType::f32), t->dh0 = Tensor::zeros({B, H, dk, dv}, DType::f32);
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t] {
    backend::linear_attention_forward(Device::cpu, *t);
    backend::linear_attention_backward(Device::cpu, *t);
  };
}

// Dense products of the chunkwise forward + backward per (batch, head), per chunk of C tokens:
// products with a C x C factor (Q K^T, kept for the backward, and dP K, dP^T Q: 2 C^2 dk each; P V,
// dO V^T, P^T dO: 2 C^2 dv each) and the six state products (Q S, K^T V, K dS, dO S^T, V dS^T,
// Q^T dO: 2 C dk dv each). The kernel skips the zero quarter of the causal ones.
double flops(int64_t T, int64_t dk, int64_t dv) {
  const double C = double(kChunk);
  return double(T) * (2.0 * C * double(3 * dk + 3 * dv) + 12.0 * double(dk) * double(dv));
}

bool registered = add_mixer_bench({"linear_attn", prepare, flops});

}  // namespace
}  // namespace linattn::bench
