// `linattn-bench mixers` entry: chunkwise GLA (chunk 64), float32 forward + backward.
#include <cmath>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/cpu/gla.h"

namespace linattn::bench {
namespace {

struct GlaBuffers {
  Tensor q, k, v, g, o, ht, saved, dq, dk, dv, dg, do_, dht, dh0;
};

constexpr int64_t kChunk = cpu::kGlaDefaultChunkSize;

std::function<void()> prepare(int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<GlaBuffers>();
  Rng rng(2);
  auto rand = [&](const Shape& s) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, -1, 1);
    return x;
  };
  t->q = rand({B, T, H, dk}), t->k = rand({B, T, H, dk}), t->v = rand({B, T, H, dv});
  t->do_ = rand({B, T, H, dv}), t->dht = rand({B, H, dk, dv});
  // Gates as the layer makes them: logsigmoid(x) / 16.
  t->g = rand({B, T, H, dk});
  float* g = t->g.data<float>();
  for (int64_t i = 0; i < t->g.numel(); ++i) g[i] = -std::log1p(std::exp(-2.0f * g[i])) / 16.0f;
  t->o = Tensor::zeros({B, T, H, dv}, DType::f32), t->ht = Tensor::zeros({B, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({cpu::gla_chunk_saved_size(B, T, H, dk, dv, kChunk)}, DType::f32);
  t->dq = Tensor::zeros(t->q.shape(), DType::f32), t->dk = Tensor::zeros(t->k.shape(), DType::f32);
  t->dv = Tensor::zeros(t->v.shape(), DType::f32), t->dg = Tensor::zeros(t->g.shape(), DType::f32);
  t->dh0 = Tensor::zeros({B, H, dk, dv}, DType::f32);
  const float scale = 1.0f / std::sqrt(float(dk));
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t, B, T, H, dk, dv, scale] {
    cpu::gla_chunk_forward<float>(t->o.data<float>(), t->ht.data<float>(), t->saved.data<float>(), t->q.data<float>(),
                                  t->k.data<float>(), t->v.data<float>(), t->g.data<float>(), nullptr, B, T, H, dk, dv,
                                  scale, kChunk);
    cpu::gla_chunk_backward<float>(t->dq.data<float>(), t->dk.data<float>(), t->dv.data<float>(), t->dg.data<float>(),
                                   t->dh0.data<float>(), t->saved.data<float>(), t->q.data<float>(), t->k.data<float>(),
                                   t->v.data<float>(), t->g.data<float>(), t->do_.data<float>(), t->dht.data<float>(),
                                   B, T, H, dk, dv, scale, kChunk);
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
