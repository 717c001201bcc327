// CUDA GLA (kernels/cuda/gla.h) through the backend table against the CPU entry in float64: the
// output, the final state and every gradient (dq, dk, dv, dg, dh0), for chunk sizes 16/32/64 and the
// recurrent form, T = 1, T off and on the CUDA kernels' 64-token chunk, head sizes off their 64-column
// tiles, with and without an initial state, strong and weak decays; and the autograd op on device tensors with document
// boundaries. Runs only where a GPU exists; elsewhere every test skips with the reason.
#include <cmath>

#include "autograd/mixers.h"
#include "autograd/variable.h"
#include "kernel_testing.h"
#include "kernels/cpu/entries.h"
#include "mixer_testing.h"

namespace linattn {
namespace {

using namespace testing;

void table_forward(const backend::MixerArgs& r) { backend::gla_forward(Device::cuda, r); }
void table_backward(const backend::MixerArgs& r) { backend::gla_backward(Device::cuda, r); }

// As for linear attention (linear_attn_test.cpp); dg adds a float32 reverse sum over T of
// q dq − k dk, still far inside 1e-4 relative to its largest entry at these lengths.
constexpr double kTol = 1e-4;

const MixerCase kCases[] = {
    {2, 1, 2, 64, 64, 64},
    {2, 200, 4, 64, 64, 64},
    {1, 150, 2, 128, 128, 64},
    {2, 77, 2, 64, 32, 32, false},
    {1, 100, 3, 72, 40, 16},
    {2, 30, 2, 16, 16, 1, true, FeatureMap::identity, false, true},
    {1, 130, 2, 32, 32, 64, true, FeatureMap::identity, false, false, -40},
    {1, 90, 2, 32, 32, 16, true, FeatureMap::identity, false, false, -1e-3},
    {1, 128, 2, 32, 32, 64, true, FeatureMap::identity, false, false, -40},  // T a multiple of the kernels' 64
};

TEST(CudaGla, MatchesTheCpuEntry) {
  SKIP_WITHOUT_GPU();
  Rng rng(41);
  for (const MixerCase& c : kCases) {
    SCOPED_TRACE(c.str());
    MixerData d = random_mixer_data(c, MixerKind::gla, rng);
    MixerResult want = run_mixer(cpu::entry::gla_forward, cpu::entry::gla_backward, MixerKind::gla, c, d, DType::f64,
                                 Device::cpu);
    MixerResult got = run_mixer(table_forward, table_backward, MixerKind::gla, c, d, DType::f32, Device::cuda);
    EXPECT_MIXER_CLOSE(got, want, kTol);
  }
}

TEST(CudaGla, AutogradOpWithSegmentsMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(42);
  const int64_t B = 2, T = 11, H = 2, D = 16;
  const ops::Segments cuts{{0, 4, 5, 10, 11, 12, 19, 22}};
  Tensor q = random_tensor({B, T, H, D}, rng), k = random_tensor({B, T, H, D}, rng),
         v = random_tensor({B, T, H, D}, rng), g = random_tensor({B, T, H, D}, rng, -2, 0),
         h0 = random_tensor({B, H, D, D}, rng);
  Tensor dO = random_tensor({B, T, H, D}, rng), dht = random_tensor({B, H, D, D}, rng);
  std::vector<Tensor> grads[2];
  Tensor outs[2][2];
  for (int dev = 0; dev < 2; ++dev) {
    auto put = [&](const Tensor& t) { return dev ? t.to(DType::f32).to(Device::cuda) : t; };
    Variable vq(put(q), true), vk(put(k), true), vv(put(v), true), vg(put(g), true), vh(put(h0), true);
    ops::MixerOptions opt;
    opt.chunk_size = 4, opt.segments = &cuts;
    ops::MixerOutput o = ops::gla(vq, vk, vv, vg, vh, opt);
    backward({o.o, o.ht}, {put(dO), put(dht)});
    auto host = [](const Tensor& t) { return on_host(t).to(DType::f64); };
    outs[dev][0] = host(o.o.value()), outs[dev][1] = host(o.ht.value());
    for (Variable* x : {&vq, &vk, &vv, &vg, &vh}) grads[dev].push_back(host(x->grad()));
  }
  for (int i = 0; i < 2; ++i) EXPECT_CLOSE(outs[1][i], outs[0][i], kTol);
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_CLOSE(grads[1][i], grads[0][i], kTol);
}

// MixerArgs::write: the backward writes dq, dk, dv and dg over whatever the buffers held (NaN here)
// and gives the values it adds onto zeros; every element is written. GLA and linear attention.
TEST(CudaGla, WrittenGradientsEqualTheOnesAddedOntoZeros) {
  SKIP_WITHOUT_GPU();
  Rng rng(43);
  const int64_t B = 2, T = 100, H = 2, Dk = 48, Dv = 40;  // a chunk and a part, columns off the 64 tiles
  auto put = [&](const Shape& s, double lo = -1, double hi = 1) { return on_device(random_f32(s, rng, lo, hi)); };
  const Tensor q = put({B, T, H, Dk}), k = put({B, T, H, Dk}), v = put({B, T, H, Dv}), g = put({B, T, H, Dk}, -1, 0);
  const Tensor dO = put({B, T, H, Dv}), dht = put({B, H, Dk, Dv});
  for (bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "gla" : "linear_attention");
    const auto& backward = gated ? backend::gla_backward : backend::linear_attention_backward;
    auto grads = [&](bool write) {
      backend::MixerArgs r;
      r.B = B, r.T = T, r.H = H, r.Dk = Dk, r.Dv = Dv, r.scale = 0.2;
      r.q = q, r.k = k, r.v = v, r.dO = dO, r.dht = dht;
      if (gated) r.gate = g;
      auto buffer = [&](const Shape& s) {
        Tensor t = Tensor::zeros(s, DType::f32);
        if (write) t.fill_(std::nan(""));
        return on_device(t);
      };
      r.dq = buffer(q.shape()), r.dk = buffer(k.shape()), r.dv = buffer(v.shape());
      if (gated) r.dgate = buffer(g.shape());
      r.write = write;
      backward(Device::cuda, r);
      std::vector<Tensor> out{on_host(r.dq), on_host(r.dk), on_host(r.dv)};
      if (gated) out.push_back(on_host(r.dgate));
      return out;
    };
    const std::vector<Tensor> written = grads(true), added = grads(false);
    for (size_t i = 0; i < written.size(); ++i) {
      const float *w = written[i].data<float>(), *a = added[i].data<float>();
      int64_t differ = 0;
      for (int64_t e = 0; e < written[i].numel(); ++e) differ += !(w[e] == a[e]);  // NaN: never written
      EXPECT_EQ(differ, 0) << "gradient " << i << " of dq, dk, dv, dg";
    }
  }
}

}  // namespace
}  // namespace linattn
