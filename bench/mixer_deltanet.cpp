// DeltaNet and Gated DeltaNet in `linattn-bench mixers`: chunkwise forward + backward, float32.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench/bench.h"
#include "core/rng.h"
#include "kernels/cpu/deltanet.h"

namespace linattn::bench {
namespace {

// Chunk size: 64 by default, LINATTN_DELTANET_CHUNK to try others.
int64_t chunk_size() {
  const char* env = std::getenv("LINATTN_DELTANET_CHUNK");
  return env ? std::atoll(env) : 64;
}

struct Buffers {
  Tensor q, k, v, beta, a, h0, o, ht, saved, dO, dht, dq, dk, dv, dbeta, da, dh0;
};

// Inputs as the layer makes them: k rows L2-normalized, beta = sigmoid(.), a = logsigmoid(.) / 16.
std::function<void()> prepare(bool gated, int64_t B, int64_t T_, int64_t H, int64_t dk, int64_t dv) {
  auto b = std::make_shared<Buffers>();
  const int64_t C = chunk_size();
  Rng rng(7);
  auto uniform = [&](const Shape& s, double lo, double hi) {
    Tensor t = Tensor::empty(s, DType::f32);
    rng.fill_uniform(t, lo, hi);
    return t;
  };
  b->q = uniform({B, T_, H, dk}, -1, 1);
  b->k = uniform({B, T_, H, dk}, -1, 1);
  float* kp = b->k.data<float>();
  for (int64_t r = 0; r < B * T_ * H; ++r) {
    double n = 0;
    for (int64_t i = 0; i < dk; ++i) n += double(kp[r * dk + i]) * kp[r * dk + i];
    for (int64_t i = 0; i < dk; ++i) kp[r * dk + i] = float(kp[r * dk + i] / (std::sqrt(n) + 1e-6));
  }
  b->v = uniform({B, T_, H, dv}, -1, 1);
  b->beta = uniform({B, T_, H}, -3, 3);
  for (int64_t i = 0; i < b->beta.numel(); ++i) {
    float& x = b->beta.data<float>()[i];
    x = 1.0f / (1.0f + std::exp(-x));
  }
  b->a = uniform({B, T_, H}, -3, 3);
  for (int64_t i = 0; i < b->a.numel(); ++i) {
    float& x = b->a.data<float>()[i];
    x = -std::log1p(std::exp(-x)) / 16.0f;
  }
  b->h0 = uniform({B, H, dk, dv}, -1, 1);
  b->dO = uniform({B, T_, H, dv}, -1, 1);
  b->dht = uniform({B, H, dk, dv}, -1, 1);
  b->o = Tensor::zeros({B, T_, H, dv}, DType::f32);
  b->ht = Tensor::zeros({B, H, dk, dv}, DType::f32);
  b->saved = Tensor::zeros({cpu::deltanet_chunk_saved_size(B, T_, H, dk, dv, C)}, DType::f32);
  b->dq = Tensor::zeros(b->q.shape(), DType::f32);
  b->dk = Tensor::zeros(b->k.shape(), DType::f32);
  b->dv = Tensor::zeros(b->v.shape(), DType::f32);
  b->dbeta = Tensor::zeros(b->beta.shape(), DType::f32);
  b->da = Tensor::zeros(b->a.shape(), DType::f32);
  b->dh0 = Tensor::zeros(b->h0.shape(), DType::f32);
  const float scale = float(1.0 / std::sqrt(double(dk)));
  cpu::DeltaNetArgs<float> p;
  p.B = B, p.len = T_, p.H = H, p.Dk = dk, p.Dv = dv, p.scale = scale, p.chunk_size = C;
  p.o = b->o.data<float>(), p.ht = b->ht.data<float>(), p.saved = b->saved.data<float>();
  p.q = b->q.data<float>(), p.k = b->k.data<float>(), p.v = b->v.data<float>(), p.beta = b->beta.data<float>();
  p.a = gated ? b->a.data<float>() : nullptr, p.h0 = b->h0.data<float>();
  p.dO = b->dO.data<float>(), p.dht = b->dht.data<float>();
  p.dq = b->dq.data<float>(), p.dk = b->dk.data<float>(), p.dv = b->dv.data<float>();
  p.dbeta = b->dbeta.data<float>(), p.da = gated ? b->da.data<float>() : nullptr, p.dh0 = b->dh0.data<float>();
  return [b, p] {
    cpu::deltanet_chunk_forward(p);
    cpu::deltanet_chunk_backward(p);
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
