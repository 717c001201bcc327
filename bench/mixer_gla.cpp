// `linattn-bench mixers` entry: chunkwise GLA (chunk 64), float32 forward + backward.
#include <cmath>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/backend.h"

namespace linattn::bench {
namespace {

constexpr int64_t kChunk = 64;

// The CPU column's entries (kernels/backend.def), as the GLA op calls them.
std::function<void()> prepare(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<backend::MixerArgs>();
  t->B = B, t->T = T, t->H = H, t->Dk = dk, t->Dv = dv;
  t->scale = 1.0 / std::sqrt(double(dk));
  t->chunk_size = kChunk;
  Rng rng(2);
  auto rand = [&](const Shape& s) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, -1, 1);
    return x;
  };
  t->q = rand({B, T, H, dk}), t->k = rand({B, T, H, dk}), t->v = rand({B, T, H, dv});
  t->dO = rand({B, T, H, dv}), t->dht = rand({B, H, dk, dv});
  // Gates as the layer makes them: logsigmoid(x) / 16.
  t->gate = rand({B, T, H, dk});
  float* g = t->gate.data<float>();
  for (int64_t i = 0; i < t->gate.numel(); ++i) g[i] = -std::log1p(std::exp(-2.0f * g[i])) / 16.0f;
  t->o = Tensor::zeros({B, T, H, dv}, DType::f32), t->ht = Tensor::zeros({B, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({backend::gla_saved_size(Device::cpu, *t)}, DType::f32);
  t->dq = Tensor::zeros(t->q.shape(), DType::f32), t->dk = Tensor::zeros(t->k.shape(), DType::f32);
  t->dv = Tensor::zeros(t->v.shape(), DType::f32), t->dgate = Tensor::zeros(t->gate.shape(), DType::f32);
  t->dh0 = Tensor::zeros({B, H, dk, dv}, DType::f32);
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t] {
    backend::gla_forward(Device::cpu, *t);
    backend::gla_backward(Device::cpu, *t);
  };
}

// Counted as the chunkwise linear-attention products (bench/mixer_linear_attn.cpp) so the two GFLOP/s
// figures compare: the gate's extra work (exponentials, the pairwise diagonal sub-blocks) is not counted.
double flops(int64_t T, int64_t dk, int64_t dv) {
  const double C = double(kChunk);
  return double(T) * (2.0 * C * double(4 * dk + 3 * dv) + 12.0 * double(dk) * double(dv));
}

bool registered = add_mixer_bench({"gla", prepare, flops});

}  // namespace
}  // namespace linattn::bench
