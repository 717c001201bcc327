// `linattn-bench mixers` entry: chunkwise Mamba2 / SSD (chunk 64), float32 forward + backward, with
// the state N x P = dk x dv and one group of B and C shared by all heads (G = 1, as fla's default).
#include <cmath>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/cpu/mamba2.h"

namespace linattn::bench {
namespace {

struct Mamba2Buffers {
  Tensor x, dt, A, B, C, y, ht, saved, dx, ddt, dA, dB, dC, dy, dht;
};

constexpr int64_t kChunk = cpu::kMamba2DefaultChunkSize;

std::function<void()> prepare(int64_t batch, int64_t T, int64_t H, int64_t dk, int64_t dv) {
  auto t = std::make_shared<Mamba2Buffers>();
  const cpu::Mamba2Dims d{batch, T, H, /*G=*/1, /*N=*/dk, /*P=*/dv};
  Rng rng(3);
  auto rand = [&](const Shape& s, double lo, double hi) {
    Tensor x = Tensor::empty(s, DType::f32);
    rng.fill_uniform(x, lo, hi);
    return x;
  };
  // dt and A in the ranges Mamba2's initialisation gives (dt in [0.001, 0.1], A = -exp(A_log) in [-16, -1]).
  t->x = rand({batch, T, H, dv}, -1, 1), t->dt = rand({batch, T, H}, 0.001, 0.1), t->A = rand({H}, -16, -1);
  t->B = rand({batch, T, 1, dk}, -1, 1), t->C = rand({batch, T, 1, dk}, -1, 1);
  t->dy = rand({batch, T, H, dv}, -1, 1), t->dht = rand({batch, H, dk, dv}, -1, 1);
  t->y = Tensor::zeros(t->x.shape(), DType::f32), t->ht = Tensor::zeros({batch, H, dk, dv}, DType::f32);
  t->saved = Tensor::zeros({cpu::mamba2_chunk_saved_size(d, kChunk)}, DType::f32);
  t->dx = Tensor::zeros(t->x.shape(), DType::f32), t->ddt = Tensor::zeros(t->dt.shape(), DType::f32);
  t->dA = Tensor::zeros(t->A.shape(), DType::f32), t->dB = Tensor::zeros(t->B.shape(), DType::f32);
  t->dC = Tensor::zeros(t->C.shape(), DType::f32);
  auto f = [&](const Tensor& x) { return x.data<float>(); };
  const cpu::Mamba2Forward<float> fwd{.y = f(t->y), .ht = f(t->ht), .saved = f(t->saved), .x = f(t->x),
                                      .dt = f(t->dt), .A = f(t->A), .B = f(t->B), .C = f(t->C), .h0 = nullptr,
                                      .dims = d, .chunk_size = kChunk};
  const cpu::Mamba2Backward<float> bwd{.dx = f(t->dx), .ddt = f(t->ddt), .dA = f(t->dA), .dB = f(t->dB),
                                       .dC = f(t->dC), .dh0 = nullptr, .saved = f(t->saved), .x = f(t->x),
                                       .dt = f(t->dt), .A = f(t->A), .B = f(t->B), .C = f(t->C), .h0 = nullptr,
                                       .dy = f(t->dy), .dht = f(t->dht), .dims = d, .chunk_size = kChunk};
  // Gradients accumulate across repetitions (the caller would zero them): harmless for timing.
  return [t, fwd, bwd] {
    cpu::mamba2_chunk_forward(fwd);
    cpu::mamba2_chunk_backward(bwd);
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
