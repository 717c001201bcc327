// CUDA linear attention (kernels/cuda/linear_attn.h) through the backend table against the CPU entry
// in float64: the output, the final states and every gradient (dq, dk, dv, dh0, dz0), for every
// feature map, the normalized form, the recurrent form, chunk sizes 16/32/64, T = 1 and T off and on
// the CUDA kernels' 64-token chunk, with and without initial states; and the autograd op on device tensors with document
// boundaries. Runs only where a GPU exists; elsewhere every test skips with the reason.
#include "autograd/mixers.h"
#include "autograd/variable.h"
#include "kernel_testing.h"
#include "kernels/cpu/entries.h"
#include "mixer_testing.h"

namespace linattn {
namespace {

using namespace testing;

void table_forward(const backend::MixerArgs& r) { backend::linear_attention_forward(Device::cuda, r); }
void table_backward(const backend::MixerArgs& r) { backend::linear_attention_backward(Device::cuda, r); }

// float32 against float64: each entry is a float32 sum of at most a few thousand products (a chunk's
// scores over dk, the state over the chunks), ~1e-6 relative typically; 1e-4 leaves room.
constexpr double kTol = 1e-4;

const MixerCase kCases[] = {
    {2, 1, 2, 64, 64, 64},
    {2, 200, 4, 64, 64, 64},
    {1, 150, 2, 128, 128, 64},
    {2, 77, 2, 64, 32, 32, false},
    {1, 100, 3, 40, 72, 16},
    {2, 30, 2, 16, 16, 1, true, FeatureMap::identity, false, true},
    {1, 130, 2, 32, 32, 64, true, FeatureMap::elu1},
    {1, 90, 2, 32, 48, 32, false, FeatureMap::relu},
    {2, 100, 2, 64, 64, 64, true, FeatureMap::elu1, true},
    {1, 33, 2, 32, 16, 16, false, FeatureMap::elu1, true},
    {1, 25, 2, 16, 16, 1, true, FeatureMap::elu1, true, true},
    {1, 128, 2, 32, 32, 64, true, FeatureMap::elu1, true},  // T a multiple of the kernels' 64
};

TEST(CudaLinearAttention, MatchesTheCpuEntry) {
  SKIP_WITHOUT_GPU();
  Rng rng(31);
  for (const MixerCase& c : kCases) {
    SCOPED_TRACE(c.str());
    MixerData d = random_mixer_data(c, MixerKind::linear_attention, rng);
    MixerResult want = run_mixer(cpu::entry::linear_attention_forward, cpu::entry::linear_attention_backward,
                                 MixerKind::linear_attention, c, d, DType::f64, Device::cpu);
    MixerResult got =
        run_mixer(table_forward, table_backward, MixerKind::linear_attention, c, d, DType::f32, Device::cuda);
    EXPECT_MIXER_CLOSE(got, want, kTol);
  }
}

// The op on device tensors (views per document, the final state and gradients of each row's last
// document) against the same op on the CPU in float64.
TEST(CudaLinearAttention, AutogradOpWithSegmentsMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(32);
  const int64_t B = 2, T = 11, H = 2, D = 16;
  const ops::Segments cuts{{0, 4, 5, 10, 11, 12, 19, 22}};
  Tensor q = random_tensor({B, T, H, D}, rng), k = random_tensor({B, T, H, D}, rng),
         v = random_tensor({B, T, H, D}, rng), h0 = random_tensor({B, H, D, D}, rng),
         z0 = random_tensor({B, H, D}, rng, 0.5, 1.5);
  Tensor dO = random_tensor({B, T, H, D}, rng), dht = random_tensor({B, H, D, D}, rng),
         dzt = random_tensor({B, H, D}, rng);
  std::vector<Tensor> grads[2];
  Tensor outs[2][3];
  for (int dev = 0; dev < 2; ++dev) {
    auto put = [&](const Tensor& t) { return dev ? t.to(DType::f32).to(Device::cuda) : t; };
    Variable vq(put(q), true), vk(put(k), true), vv(put(v), true), vh(put(h0), true), vz(put(z0), true);
    ops::MixerOptions opt;
    opt.chunk_size = 4, opt.segments = &cuts;
    ops::MixerOutput o = ops::linear_attention(vq, vk, vv, vh, FeatureMap::elu1, true, opt, vz);
    backward({o.o, o.ht, o.zt}, {put(dO), put(dht), put(dzt)});
    auto host = [](const Tensor& t) { return on_host(t).to(DType::f64); };
    outs[dev][0] = host(o.o.value()), outs[dev][1] = host(o.ht.value()), outs[dev][2] = host(o.zt.value());
    for (Variable* x : {&vq, &vk, &vv, &vh, &vz}) grads[dev].push_back(host(x->grad()));
  }
  for (int i = 0; i < 3; ++i) EXPECT_CLOSE(outs[1][i], outs[0][i], kTol);
  for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_CLOSE(grads[1][i], grads[0][i], kTol);
}

}  // namespace
}  // namespace linattn
