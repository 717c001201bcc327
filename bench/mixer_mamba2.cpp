// `linattn-bench mixers` entry: chunkwise Mamba2 / SSD (chunk 64), float32 forward + backward, with
// the state N x P = dk x dv and one group of B and C shared by all heads (G = 1, as fla's default).
#include <cmath>
#include <memory>
#include <utility>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/backend.h"

namespace linattn::bench {
namespace {

constexpr int64_t kChunk = 64;

// The CPU column's entries (kernels/backend.def), as the Mamba2 op calls them: MixerArgs' q = C,
// k = B, v = x, gate = the time step before its softplus, rate = A_log, skip = D.
std::function<void()> prepare(int64_t batch, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<backend::MixerArgs>();
  t->B = batch, t->T = T, t->H = H, t->G = 1, t->Dk = dk, t->Dv = dv, t->chunk_size = kChunk;
  Rng rng(3);
  auto rand = [&](const Shape& s, double lo, double hi) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, lo, hi);
    return x;
  };
  // The ranges Mamba2's initialisation gives: softplus(gate) = dt in [0.001, 0.1] (gate in [-6.9, -2.25]),
  // A = -exp(A_log) in [-16, -1].
  t->v = rand({batch, T, H, dv}, -1, 1), t->gate = rand({batch, T, H}, -6.9, -2.25);
  t->rate = rand({H}, 0, std::log(16.0)), t->skip = rand({H}, 0.5, 1.5);
  t->k = rand({batch, T, 1, dk}, -1, 1), t->q = rand({batch, T, 1, dk}, -1, 1);
  t->dO = rand({batch, T, H, dv}, -1, 1), t->dht = rand({batch, H, dk, dv}, -1, 1);
  t->o = Tensor::zeros(t->v.shape(), DType::f32), t->ht = Tensor::zeros({batch, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({backend::mamba2_saved_size(Device::cpu, *t)}, DType::f32);
  for (auto [grad, of] : {std::pair{&t->dv, &t->v}, {&t->dgate, &t->gate}, {&t->drate, &t->rate}, {&t->dskip, &t->skip},
                          {&t->dk, &t->k}, {&t->dq, &t->q}})
    *grad = Tensor::zeros(of->shape(), DType::f32);
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t] {
    backend::mamba2_forward(Device::cpu, *t);
    backend::mamba2_backward(Device::cpu, *t);
  };
}

// The same products as chunkwise GLA (bench/mixer_gla.cpp) per token and head: forward Q K^T, Q S0, P V,
// K^T V; backward Q K^T again, P^T dY, dY V^T, dY S0^T, dP K, dP^T Q, K dS1, V dS1^T, Q^T dY. So the
// formula is GLA's and the GFLOP/s figures compare; the Q K^T that heads of a group share is counted
// once per head.
double flops(int64_t T, int64_t dk, int64_t dv) {
  const double C = double(kChunk);
  return double(T) * (2.0 * C * double(4 * dk + 3 * dv) + 12.0 * double(dk) * double(dv));
}

bool registered = add_mixer_bench({"mamba2", prepare, flops});

}  // namespace
}  // namespace linattn::bench
