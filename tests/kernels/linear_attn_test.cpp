// Linear attention kernels: chunkwise == recurrent (float64, outputs, final states and every gradient),
// and both backward passes against central finite differences.
#include "kernels/cpu/linear_attn.h"

#include <cmath>
#include <string>
#include <vector>

#include "testing.h"

namespace linattn {
namespace {

using testing::compare;
using testing::dot;
using testing::finite_difference;
using testing::random_tensor;

const char* name(FeatureMap phi) {
  switch (phi) {
    case FeatureMap::identity: return "identity";
    case FeatureMap::elu1: return "elu1";
    case FeatureMap::relu: return "relu";
  }
  return "?";
}

// One random problem: inputs, initial states and random upstream gradients on every output.
struct Problem {
  int64_t B = 2, T = 37, H = 2, Dk = 8, Dv = 6;
  FeatureMap phi = FeatureMap::identity;
  bool normalize = false;
  double scale = 0;
  Tensor q, k, v, h0, z0, do_, dht, dzT;

  Problem(int64_t T_, FeatureMap phi_, bool normalize_, uint64_t seed, int64_t B_ = 2, int64_t Dk_ = 8, int64_t Dv_ = 6,
          int64_t H_ = 2)
      : B(B_), T(T_), H(H_), Dk(Dk_), Dv(Dv_), phi(phi_), normalize(normalize_) {
    Rng rng(seed);
    scale = 1.0 / std::sqrt(double(Dk));
    // The normalized form divides by phi(q) . z: keep it away from 0 with positive features
    // (q, k >= 0 for the identity map) and a positive normalizer state z0 (a sum of features).
    const double lo = normalize && phi == FeatureMap::identity ? 0.0 : -1.0;
    q = random_tensor({B, T, H, Dk}, rng, lo, 1.0);
    k = random_tensor({B, T, H, Dk}, rng, lo, 1.0);
    v = random_tensor({B, T, H, Dv}, rng);
    h0 = random_tensor({B, H, Dk, Dv}, rng);
    z0 = random_tensor({B, H, Dk}, rng, 0.5, 1.0);
    do_ = random_tensor({B, T, H, Dv}, rng);
    dht = random_tensor({B, H, Dk, Dv}, rng);
    dzT = random_tensor({B, H, Dk}, rng);
  }
};

struct Result {
  Tensor o, ht, zT, dq, dk, dv, dh0, dz0;
};

double* ptr(const Tensor& t) { return t.data<double>(); }

// Forward (o, ht, zT) of the recurrent form, or of the chunk form when C > 0.
Result forward(const Problem& p, int64_t C) {
  Result r;
  r.o = Tensor::zeros({p.B, p.T, p.H, p.Dv}, DType::f64);
  r.ht = Tensor::zeros({p.B, p.H, p.Dk, p.Dv}, DType::f64);
  r.zT = Tensor::zeros({p.B, p.H, p.Dk}, DType::f64);
  if (C == 0) {
    cpu::linear_attn_recurrent_forward<double>(ptr(r.o), ptr(r.ht), ptr(r.zT), ptr(p.q), ptr(p.k), ptr(p.v),
                                               ptr(p.h0), ptr(p.z0), p.B, p.T, p.H, p.Dk, p.Dv, p.scale, p.phi,
                                               p.normalize);
  } else {
    std::vector<double> saved(cpu::linear_attn_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, p.normalize, C));
    cpu::linear_attn_chunk_forward<double>(ptr(r.o), ptr(r.ht), ptr(r.zT), saved.data(), ptr(p.q), ptr(p.k),
                                           ptr(p.v), ptr(p.h0), ptr(p.z0), p.B, p.T, p.H, p.Dk, p.Dv, p.scale,
                                           p.phi, p.normalize, C);
  }
  return r;
}

// Forward and backward; the gradient buffers start from `seed_value` to check that they accumulate.
Result forward_backward(const Problem& p, int64_t C, double seed_value = 0.0) {
  Result r;
  r.dq = Tensor::zeros(p.q.shape(), DType::f64);
  r.dk = Tensor::zeros(p.k.shape(), DType::f64);
  r.dv = Tensor::zeros(p.v.shape(), DType::f64);
  r.dh0 = Tensor::zeros(p.h0.shape(), DType::f64);
  r.dz0 = Tensor::zeros(p.z0.shape(), DType::f64);
  for (Tensor* g : {&r.dq, &r.dk, &r.dv, &r.dh0, &r.dz0}) g->fill_(seed_value);
  if (C == 0) {
    Result f = forward(p, 0);
    r.o = f.o, r.ht = f.ht, r.zT = f.zT;
    cpu::linear_attn_recurrent_backward<double>(ptr(r.dq), ptr(r.dk), ptr(r.dv), ptr(r.dh0), ptr(r.dz0), ptr(p.q),
                                                ptr(p.k), ptr(p.v), ptr(p.h0), ptr(p.z0), ptr(p.do_), ptr(p.dht),
                                                ptr(p.dzT), p.B, p.T, p.H, p.Dk, p.Dv, p.scale, p.phi, p.normalize);
  } else {
    r.o = Tensor::zeros({p.B, p.T, p.H, p.Dv}, DType::f64);
    r.ht = Tensor::zeros({p.B, p.H, p.Dk, p.Dv}, DType::f64);
    r.zT = Tensor::zeros({p.B, p.H, p.Dk}, DType::f64);
    std::vector<double> saved(cpu::linear_attn_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, p.normalize, C));
    cpu::linear_attn_chunk_forward<double>(ptr(r.o), ptr(r.ht), ptr(r.zT), saved.data(), ptr(p.q), ptr(p.k),
                                           ptr(p.v), ptr(p.h0), ptr(p.z0), p.B, p.T, p.H, p.Dk, p.Dv, p.scale,
                                           p.phi, p.normalize, C);
    cpu::linear_attn_chunk_backward<double>(ptr(r.dq), ptr(r.dk), ptr(r.dv), ptr(r.dh0), ptr(r.dz0), saved.data(),
                                            ptr(p.q), ptr(p.k), ptr(p.v), ptr(p.do_), ptr(p.dht), ptr(p.dzT), p.B,
                                            p.T, p.H, p.Dk, p.Dv, p.scale, p.phi, p.normalize, C);
  }
  for (Tensor* g : {&r.dq, &r.dk, &r.dv, &r.dh0, &r.dz0})
    for (int64_t i = 0; i < g->numel(); ++i) ptr(*g)[i] -= seed_value;
  return r;
}

// The scalar the gradients are of: <o, do> + <ht, dht> (+ <zT, dzT> when normalized).
double loss(const Problem& p, int64_t C) {
  Result f = forward(p, C);
  return dot(f.o, p.do_) + dot(f.ht, p.dht) + (p.normalize ? dot(f.zT, p.dzT) : 0.0);
}

const FeatureMap kMaps[] = {FeatureMap::identity, FeatureMap::elu1, FeatureMap::relu};

// Chunkwise vs recurrent in float64: the two differ only in summation order, so they agree to a few
// hundred ulps even at T = 1000 (observed 2e-15); 1e-10 leaves margin and still catches any missing term.
TEST(LinearAttn, ChunkMatchesRecurrent) {
  for (bool normalize : {false, true})
    for (FeatureMap phi : kMaps)
      for (int64_t T : {1, 63, 64, 100, 1000}) {
        Problem p(T, phi, normalize, 100 + T);
        Result want = forward_backward(p, 0);
        for (int64_t C : {16, 32, 64, 40}) {
          SCOPED_TRACE(std::string(name(phi)) + (normalize ? " normalized" : "") + " T=" + std::to_string(T) +
                       " C=" + std::to_string(C));
          Result got = forward_backward(p, C, /*seed_value=*/0.5);
          EXPECT_CLOSE(got.o, want.o, 1e-10);
          EXPECT_CLOSE(got.ht, want.ht, 1e-10);
          EXPECT_CLOSE(got.dq, want.dq, 1e-10);
          EXPECT_CLOSE(got.dk, want.dk, 1e-10);
          EXPECT_CLOSE(got.dv, want.dv, 1e-10);
          EXPECT_CLOSE(got.dh0, want.dh0, 1e-10);
          if (normalize) {
            EXPECT_CLOSE(got.zT, want.zT, 1e-10);
            EXPECT_CLOSE(got.dz0, want.dz0, 1e-10);
          }
        }
      }
}

// Analytic gradients vs central differences of <o, do> + <ht, dht> (+ <zT, dzT>), for every input.
// The difference quotient with h = 1e-6 is good to ~1e-9 relative (testing.h); 1e-6 is the bar.
void check_gradients(int64_t C) {
  for (bool normalize : {false, true})
    for (FeatureMap phi : kMaps) {
      SCOPED_TRACE(std::string(name(phi)) + (normalize ? " normalized" : "") + " C=" + std::to_string(C));
      Problem p(37, phi, normalize, 7, /*B=*/1, /*Dk=*/6, /*Dv=*/4);  // 37 = 2 chunks of 16 and a partial one
      Result g = forward_backward(p, C);
      auto f = [&] { return loss(p, C); };
      EXPECT_CLOSE(g.dq, finite_difference(f, p.q), 1e-6);
      EXPECT_CLOSE(g.dk, finite_difference(f, p.k), 1e-6);
      EXPECT_CLOSE(g.dv, finite_difference(f, p.v), 1e-6);
      EXPECT_CLOSE(g.dh0, finite_difference(f, p.h0), 1e-6);
      if (normalize) EXPECT_CLOSE(g.dz0, finite_difference(f, p.z0), 1e-6);
    }
}

TEST(LinearAttn, RecurrentBackwardMatchesFiniteDifferences) { check_gradients(0); }
TEST(LinearAttn, ChunkBackwardMatchesFiniteDifferences) { check_gradients(16); }

// The check has teeth: a gradient off by 1e-4 of its scale in a single entry fails it.
TEST(LinearAttn, PerturbedGradientFailsCheck) {
  Problem p(37, FeatureMap::elu1, true, 9, /*B=*/1, /*Dk=*/6, /*Dv=*/4);
  Result g = forward_backward(p, 16);
  Tensor fd = finite_difference([&] { return loss(p, 16); }, p.k);
  EXPECT_LE(compare(g.dk, fd).relative, 1e-6);
  ptr(g.dk)[101] += 1e-4 * testing::max_abs(fd);
  EXPECT_GT(compare(g.dk, fd).relative, 1e-6);
}

// Without initial states or upstream state gradients (all nullptr), and with T < C.
TEST(LinearAttn, NullStatesAndShortSequence) {
  Problem p(5, FeatureMap::relu, true, 11);
  Tensor zero_h = Tensor::zeros(p.h0.shape(), DType::f64), zero_z = Tensor::zeros(p.z0.shape(), DType::f64);
  Problem with_zeros = p;
  with_zeros.h0 = zero_h, with_zeros.z0 = zero_z;
  with_zeros.dht = Tensor::zeros(p.dht.shape(), DType::f64), with_zeros.dzT = Tensor::zeros(p.dzT.shape(), DType::f64);
  Result want = forward_backward(with_zeros, 0);

  Tensor o = Tensor::zeros({p.B, p.T, p.H, p.Dv}, DType::f64);
  Tensor dq = Tensor::zeros(p.q.shape(), DType::f64), dk = Tensor::zeros(p.k.shape(), DType::f64),
         dv = Tensor::zeros(p.v.shape(), DType::f64);
  std::vector<double> saved(cpu::linear_attn_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, true, 64));
  cpu::linear_attn_chunk_forward<double>(ptr(o), nullptr, nullptr, saved.data(), ptr(p.q), ptr(p.k), ptr(p.v),
                                         nullptr, nullptr, p.B, p.T, p.H, p.Dk, p.Dv, p.scale, p.phi, true, 64);
  cpu::linear_attn_chunk_backward<double>(ptr(dq), ptr(dk), ptr(dv), nullptr, nullptr, saved.data(), ptr(p.q),
                                          ptr(p.k), ptr(p.v), ptr(p.do_), nullptr, nullptr, p.B, p.T, p.H, p.Dk,
                                          p.Dv, p.scale, p.phi, true, 64);
  EXPECT_CLOSE(o, want.o, 1e-12);
  EXPECT_CLOSE(dq, want.dq, 1e-12);
  EXPECT_CLOSE(dk, want.dk, 1e-12);
  EXPECT_CLOSE(dv, want.dv, 1e-12);
}

// The float32 instantiation (the one that trains) against the float64 reference. B * H = 9 (batch, head)
// pairs: split over two threads, a thread's range starts and ends inside a batch.
TEST(LinearAttn, Float32ChunkMatchesFloat64) {
  for (FeatureMap phi : kMaps) {
    SCOPED_TRACE(name(phi));
    Problem p(300, phi, false, 13, /*B=*/3, /*Dk=*/8, /*Dv=*/6, /*H=*/3);
    Result want = forward_backward(p, 0);
    auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
    Tensor q = f32(p.q), k = f32(p.k), v = f32(p.v), h0 = f32(p.h0), do_ = f32(p.do_), dht = f32(p.dht);
    Tensor o = Tensor::zeros(want.o.shape(), DType::f32), ht = Tensor::zeros(want.ht.shape(), DType::f32);
    Tensor dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(k.shape(), DType::f32),
           dv = Tensor::zeros(v.shape(), DType::f32), dh0 = Tensor::zeros(h0.shape(), DType::f32);
    std::vector<float> saved(cpu::linear_attn_chunk_saved_size(p.B, p.T, p.H, p.Dk, p.Dv, false));
    cpu::linear_attn_chunk_forward<float>(o.data<float>(), ht.data<float>(), nullptr, saved.data(), q.data<float>(),
                                          k.data<float>(), v.data<float>(), h0.data<float>(), nullptr, p.B, p.T, p.H,
                                          p.Dk, p.Dv, float(p.scale), phi, false);
    cpu::linear_attn_chunk_backward<float>(dq.data<float>(), dk.data<float>(), dv.data<float>(), dh0.data<float>(),
                                           nullptr, saved.data(), q.data<float>(), k.data<float>(), v.data<float>(),
                                           do_.data<float>(), dht.data<float>(), nullptr, p.B, p.T, p.H, p.Dk, p.Dv,
                                           float(p.scale), phi, false);
    // float32 rounding (6e-8) accumulated over sums of up to T = 300 terms: 1e-5 relative is ample.
    EXPECT_CLOSE(o, want.o, 1e-5);
    EXPECT_CLOSE(ht, want.ht, 1e-5);
    EXPECT_CLOSE(dq, want.dq, 1e-5);
    EXPECT_CLOSE(dk, want.dk, 1e-5);
    EXPECT_CLOSE(dv, want.dv, 1e-5);
    EXPECT_CLOSE(dh0, want.dh0, 1e-5);
  }
}

}  // namespace
}  // namespace linattn
