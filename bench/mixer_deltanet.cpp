// DeltaNet and Gated DeltaNet in `linattn-bench mixers`: chunkwise forward + backward, float32.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/backend.h"

namespace linattn::bench {
namespace {

// Chunk size: 64 by default, LINATTN_DELTANET_CHUNK to try others.
int64_t chunk_size() {
  const char* env = std::getenv("LINATTN_DELTANET_CHUNK");
  return env ? std::atoll(env) : 64;
}

// The CPU column's delta-rule entries (kernels/backend.def), as the ops call them: gate = beta,
// decay = a (Gated DeltaNet only). Inputs as the layer makes them: k rows L2-normalized,
// beta = sigmoid(.), a = logsigmoid(.) / 16.
std::function<void()> prepare(bool gated, int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<backend::MixerArgs>();
  t->B = B, t->T = T_, t->H = H, t->Dk = dk, t->Dv = dv, t->chunk_size = chunk_size();
  t->scale = 1.0 / std::sqrt(double(dk));
  Rng rng(7);
  auto uniform = [&](const Shape& s, double lo, double hi) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, lo, hi);
    return x;
  };
  t->q = uniform({B, T_, H, dk}, -1, 1);
  t->k = uniform({B, T_, H, dk}, -1, 1);
  float* kp = t->k.data<float>();
  for (int64_t r = 0; r < B * T_ * H; ++r) {
    double n = 0;
    for (int64_t i = 0; i < dk; ++i) n += double(kp[r * dk + i]) * kp[r * dk + i];
    for (int64_t i = 0; i < dk; ++i) kp[r * dk + i] = float(kp[r * dk + i] / (std::sqrt(n) + 1e-6));
  }
  t->v = uniform({B, T_, H, dv}, -1, 1);
  t->gate = uniform({B, T_, H}, -3, 3);
  for (int64_t i = 0; i < t->gate.numel(); ++i) {
    float& x = t->gate.data<float>()[i];
    x = 1.0f / (1.0f + std::exp(-x));
  }
  if (gated) {
    t->decay = uniform({B, T_, H}, -3, 3);
    for (int64_t i = 0; i < t->decay.numel(); ++i) {
      float& x = t->decay.data<float>()[i];
      x = -std::log1p(std::exp(-x)) / 16.0f;
    }
    t->ddecay = Tensor::zeros(t->decay.shape(), DType::f32);
  }
  t->h0 = uniform({B, H, dk, dv}, -1, 1);
  t->dO = uniform({B, T_, H, dv}, -1, 1);
  t->dht = uniform({B, H, dk, dv}, -1, 1);
  t->o = Tensor::zeros({B, T_, H, dv}, DType::f32);
  t->ht = Tensor::zeros({B, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({backend::delta_rule_saved_size(Device::cpu, *t)}, DType::f32);
  t->dq = Tensor::zeros(t->q.shape(), DType::f32);
  t->dk = Tensor::zeros(t->k.shape(), DType::f32);
  t->dv = Tensor::zeros(t->v.shape(), DType::f32);
  t->dgate = Tensor::zeros(t->gate.shape(), DType::f32);
  t->dh0 = Tensor::zeros(t->h0.shape(), DType::f32);
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t] {
    backend::delta_rule_forward(Device::cpu, *t);
    backend::delta_rule_backward(Device::cpu, *t);
  };
}

// FLOPs of the products the kernels run per (batch, head) and chunk of n tokens, forward + backward
// (the same for both mixers; the gates only add elementwise work):
// forward: K K^T, Q K^T, A^-1 R, P U' (n^2 d each), K S0, Q S0, K^T U' (n dk dv each), and the
// substitution for A^-1 (n^3 / 3); backward: 7 products of n^2 d and 6 of n dk dv.
double flops(int64_t T_, int64_t dk, int64_t dv) {
  const int64_t C = chunk_size();
  double total = 0;
  for (int64_t t0 = 0; t0 < T_; t0 += C) {
    const double n = double(std::min(C, T_ - t0)), d = double(dk + dv) / 2;
    const double nnd = 2 * n * n * d, ndd = 2 * n * double(dk) * double(dv);
    total += 4 * nnd + 3 * ndd + n * n * n / 3;  // forward
    total += 7 * nnd + 6 * ndd;                  // backward
  }
  return total;
}

bool registered_deltanet = add_mixer_bench({"deltanet",
                                            [](int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv) {
                                              return prepare(false, B, T_, H, dk, dv);
                                            },
                                            [](int64_t T_, int64_t dk, int64_t dv) { return flops(T_, dk, dv); }});
bool registered_gated = add_mixer_bench({"gated_deltanet",
                                         [](int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv) {
                                           return prepare(true, B, T_, H, dk, dv);
                                         },
                                         [](int64_t T_, int64_t dk, int64_t dv) { return flops(T_, dk, dv); }});

}  // namespace
}  // namespace linattn::bench
