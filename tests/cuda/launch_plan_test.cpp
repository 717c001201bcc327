// The launch plans of kernels/cuda/launch_plan.h are what the launchers launch: each launcher runs
// under the emulation with a LaunchRecorder, and its launches (kernel, grid, block, dynamic shared
// bytes, in order) must be its plan's, at sizes that leave partial tiles, blocks and chunks. What
// `linattn-bench gpu-plan` reports therefore cannot drift from the code. Emulation build only (a
// GPU build has no recorder; the launchers there are the same code).
#include <gtest/gtest.h>

#ifdef LINATTN_CUDA_EMULATION
#include <cuda_runtime.h>

#include <functional>
#include <sstream>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/bias.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/deltanet.h"
#include "kernels/cuda/deltanet_block.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gdn_decay.h"
#include "kernels/cuda/gla.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/linear_attn.h"
#include "kernels/cuda/mamba2.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/rope.h"
#include "kernels/deltanet.h"
#include "kernels/op_types.h"
#include "autograd/segments.h"
#include "kernel_testing.h"
#endif

namespace linattn {
namespace {

#ifdef LINATTN_CUDA_EMULATION

using cuda::LaunchPlans;

// Zeroed device memory for the kernels to read and write (zeros are valid input to every kernel here).
class DeviceBuffers {
 public:
  float* f32(int64_t n) {
    return keep(Tensor::zeros({std::max<int64_t>(n, 1)}, DType::f32, Device::cuda)).data<float>();
  }
  int32_t* i32(int64_t n) {
    return keep(Tensor::zeros({std::max<int64_t>(n, 1)}, DType::i32, Device::cuda)).data<int32_t>();
  }
  uint16_t* bf16(int64_t n) { return reinterpret_cast<uint16_t*>(f32((n + 1) / 2)); }
  double* f64(int64_t n) { return reinterpret_cast<double*>(f32(2 * n)); }

 private:
  Tensor keep(Tensor t) {
    tensors_.push_back(t);
    return t;
  }
  std::vector<Tensor> tensors_;
};

// "chunk::state_pass_kernel<true>" and "pointwise_kernel<F>" -> "state_pass_kernel", "pointwise_kernel":
// the launch records the kernel as its source wrote it, template arguments unresolved.
std::string base_name(std::string s) {
  s = s.substr(0, s.find('<'));
  const size_t colon = s.rfind("::");
  if (colon != std::string::npos) s = s.substr(colon + 2);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string describe(const cuda::Dim& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}
std::string describe(const dim3& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// Runs launch() with a recorder and checks its launches against plans.
template <class F>
void expect_plans(const std::string& what, const LaunchPlans& plans, F&& launch) {
  std::vector<cuda_emu::RecordedLaunch> got;
  {
    cuda_emu::LaunchRecorder recorder;
    launch();
    testing::device_sync();
    got = recorder.launches();
  }
  std::ostringstream all;
  for (const auto& g : got) all << "  " << g.name << " grid " << describe(g.grid) << " block " << describe(g.block)
                                << " shared " << g.shared_bytes << "\n";
  ASSERT_EQ(got.size(), plans.size()) << what << ": the launcher launched\n" << all.str();
  for (size_t i = 0; i < plans.size(); ++i) {
    const cuda::LaunchPlan& p = plans[i];
    SCOPED_TRACE(what + ", launch " + std::to_string(i) + " (" + p.kernel + ")");
    EXPECT_EQ(base_name(got[i].name), base_name(p.kernel));
    EXPECT_EQ(describe(got[i].grid), describe(p.grid));
    EXPECT_EQ(describe(got[i].block), describe(p.block));
    EXPECT_EQ(int64_t(got[i].shared_bytes), p.shared_bytes);
  }
}

TEST(LaunchPlan, PointwiseNormsAndReductions) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t N = 37, D = 70, V = 300;  // 3 column tiles of 32, rows not a multiple of 8
  float *x = m.f32(N * D), *y = m.f32(N * D), *w = m.f32(D), *r = m.f32(N);
  expect_plans("rmsnorm_forward", cuda::rmsnorm_forward_plans(N, D),
               [&] { cuda::rmsnorm_forward(y, nullptr, nullptr, r, x, w, N, D, 1e-6f); });
  expect_plans("rmsnorm_backward", cuda::rmsnorm_backward_plans(N, D, true),
               [&] { cuda::rmsnorm_backward(y, m.f32(D), x, w, r, x, y, N, D); });
  expect_plans("rmsnorm_backward without dw", cuda::rmsnorm_backward_plans(N, D, false),
               [&] { cuda::rmsnorm_backward(y, nullptr, x, w, r, x, nullptr, N, D); });
  expect_plans("add_rmsnorm_forward", cuda::rmsnorm_forward_plans(N, D),
               [&] { cuda::add_rmsnorm_forward(m.f32(N * D), y, nullptr, nullptr, r, x, x, w, N, D, 1e-6f); });
  expect_plans("rmsnorm_gate_forward", cuda::rmsnorm_gate_forward_plans(N, D),
               [&] { cuda::rmsnorm_gate_forward(y, nullptr, r, x, x, w, N, D, 1e-6f, false); });
  expect_plans("rmsnorm_gate_backward", cuda::rmsnorm_gate_backward_plans(N, D, true),
               [&] { cuda::rmsnorm_gate_backward(y, m.f32(N * D), m.f32(D), x, x, w, r, x, N, D, false); });
  expect_plans("rmsnorm_gate_backward without dw", cuda::rmsnorm_gate_backward_plans(N, D, false),
               [&] { cuda::rmsnorm_gate_backward(y, m.f32(N * D), nullptr, x, x, w, r, x, N, D, true); });
  expect_plans("l2norm_forward", cuda::l2norm_forward_plans(N, D), [&] { cuda::l2norm_forward(y, r, x, N, D, 1e-6f); });
  expect_plans("l2norm_backward", cuda::l2norm_backward_plans(N, D), [&] { cuda::l2norm_backward(y, x, r, x, N, D); });
  float *logits = m.f32(N * V), *lse = m.f32(N);
  int32_t* targets = m.i32(N);
  expect_plans("cross_entropy_forward", cuda::cross_entropy_forward_plans(N, V),
               [&] { cuda::cross_entropy_forward(lse, m.f64(2), nullptr, logits, targets, N, V, -100); });
  expect_plans("cross_entropy_backward", cuda::cross_entropy_backward_plans(N, V),
               [&] { cuda::cross_entropy_backward(m.f32(N * V), logits, lse, targets, N, V, -100, 1.0f); });
  expect_plans("cross_entropy_forward_backward", cuda::cross_entropy_forward_backward_plans(N, V), [&] {
    cuda::cross_entropy_forward_backward(lse, m.f64(3), m.f32(1), m.f32(N * V), logits, targets, N, V, -100, m.f32(1),
                                         N);
  });
  const int64_t big = 600 * 1024;  // more elements than 1024 partial sums of 512 threads take one each
  float* g = m.f32(big);
  expect_plans("sum_squares", cuda::sum_squares_plans(big), [&] { cuda::sum_squares(m.f64(1), g, big); });
  expect_plans("sum_squares of 1000", cuda::sum_squares_plans(1000), [&] { cuda::sum_squares(m.f64(1), g, 1000); });
  double* control = m.f64(step_control::size);
  expect_plans("step_loss", cuda::step_loss_plans(), [&] { cuda::step_loss(control, x, 3); });
  expect_plans("step_control", cuda::step_control_plans(big), [&] { cuda::step_control(control, g, big, 1.0); });
  expect_plans("step_control of 1000", cuda::step_control_plans(1000), [&] { cuda::step_control(control, g, 1000, 1.0); });
  expect_plans("adamw_update", cuda::adamw_plans(N * D), [&] {
    cuda::adamw_update(x, nullptr, y, m.f32(N * D), m.f32(N * D), N * D, m.f64(2), 1, control,
                       cuda::AdamWStep{0.9f, 0.95f, 1e-8f});
  });
  int32_t* ids = m.i32(N);
  expect_plans("embedding_forward", cuda::embedding_forward_plans(N, D),
               [&] { cuda::embedding_forward(y, ids, m.f32(V * D), N, V, D); });
  const int64_t vocab = 3000;  // more rows than 1024 blocks: several rows per block
  expect_plans("embedding_backward", {cuda::embedding_backward_plan(vocab)},
               [&] { cuda::embedding_backward(m.f32(vocab * D), ids, x, N, vocab, D); });
  expect_plans("bias_forward", {cuda::pointwise_plan("bias_forward_kernel", N * D)},
               [&] { cuda::bias_forward(y, w, N, D); });
  expect_plans("bias_backward", cuda::bias_backward_plans(N, D), [&] { cuda::bias_backward(w, x, N, D); });
  const int64_t B = 2, T = 19, C = 40, W = 4;
  float* cx = m.f32(B * T * C);
  expect_plans("short_conv_forward", {cuda::pointwise_plan("short_conv_forward_kernel", B * T * C)},
               [&] { cuda::short_conv_forward(m.f32(B * T * C), cx, m.f32(C * W), m.f32(C), B, T, C, W); });
  expect_plans("short_conv_backward", cuda::short_conv_backward_plans(B, T, C, W), [&] {
    cuda::short_conv_backward(m.f32(B * T * C), m.f32(C * W), m.f32(C), cx, m.f32(C * W), cx, B, T, C, W);
  });
  const int64_t H = 35;
  float* gx = m.f32(N * H);
  expect_plans("gdn_decay_forward", {cuda::pointwise_plan("gdn_decay_forward_kernel", N * H)},
               [&] { cuda::gdn_decay_forward(m.f32(N * H), gx, m.f32(H), m.f32(H), N, H); });
  expect_plans("gdn_decay_backward", cuda::gdn_decay_backward_plans(N, H), [&] {
    cuda::gdn_decay_backward(m.f32(N * H), m.f32(H), m.f32(H), gx, m.f32(H), m.f32(H), gx, N, H);
  });
  expect_plans("gdn_decay_backward without parameter gradients", cuda::gdn_decay_backward_plans(N, H), [&] {
    cuda::gdn_decay_backward(m.f32(N * H), nullptr, nullptr, gx, m.f32(H), m.f32(H), gx, N, H);
  });
  expect_plans("rope_forward", {cuda::pointwise_plan("rope_kernel<false>", B * T * 3 * 8)},
               [&] { cuda::rope_forward(m.f32(B * T * 3 * 16), m.f32(B * T * 3 * 16), B, T, 3, 16, 0, 1e4); });
  expect_plans("add_forward", {cuda::elementwise_plan("Add", N * D)}, [&] { cuda::add_forward(y, x, x, N * D); });
  const std::string silu = cuda::activation_functor("ActivationForward", Activation::silu);
  expect_plans("activation_forward", {cuda::elementwise_plan(silu, N * D)},
               [&] { cuda::activation_forward(Activation::silu, y, x, N * D); });
  expect_plans("swiglu_backward", {cuda::elementwise_plan("SwigluBackward", N * D)},
               [&] { cuda::swiglu_backward(y, m.f32(N * D), x, x, x, N * D); });
  expect_plans("swiglu_joined_forward", {cuda::elementwise_plan("SwigluJoinedForward", N * D)},
               [&] { cuda::swiglu_joined_forward(y, m.bf16(2 * N * D), m.f32(2 * N * D), N, D); });
  expect_plans("swiglu_joined_backward", {cuda::elementwise_plan("SwigluJoinedBackward", N * D)},
               [&] { cuda::swiglu_joined_backward(m.f32(2 * N * D), m.f32(2 * N * D), x, N, D); });
}

TEST(LaunchPlan, Attention) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t B = 1, T = 70, H = 4, Hkv = 2;
  for (const int64_t d : {24, 96}) {  // the CUDA-core kernels built for head sizes up to 64 and up to 128
    const int64_t q = B * T * H * d, kv = B * T * Hkv * d;
    float *o = m.f32(q), *lse = m.f32(B * H * T);
    expect_plans("attention_forward d=" + std::to_string(d), cuda::attention_forward_plans(false, B, T, H, d, d),
                 [&] { cuda::attention_forward(o, lse, m.f32(q), m.f32(kv), m.f32(kv), B, T, H, Hkv, d, d, 0, 0.1f); });
    expect_plans("attention_backward d=" + std::to_string(d), cuda::attention_backward_plans(false, B, T, H, Hkv, d, d),
                 [&] {
                   cuda::attention_backward(m.f32(q), m.f32(kv), m.f32(kv), m.f32(q), m.f32(kv), m.f32(kv), o, lse,
                                            m.f32(q), B, T, H, Hkv, d, d, 16, 0.1f);
                 });
  }
  for (const int64_t d : {32, 40}) {  // bf16: tensor cores at 32, the CUDA-core kernels at 40
    const int64_t q = B * T * H * d, kv = B * T * Hkv * d;
    uint16_t* o = m.bf16(q);
    float* lse = m.f32(B * H * T);
    EXPECT_EQ(cuda::attention_uses_tensor_cores(true, d, d), d == 32);
    expect_plans("attention_forward_bf16 d=" + std::to_string(d), cuda::attention_forward_plans(true, B, T, H, d, d),
                 [&] {
                   cuda::attention_forward_bf16(o, lse, m.bf16(q), m.bf16(kv), m.bf16(kv), B, T, H, Hkv, d, d, 0, 0.1f);
                 });
    expect_plans("attention_backward_bf16 d=" + std::to_string(d),
                 cuda::attention_backward_plans(true, B, T, H, Hkv, d, d), [&] {
                   cuda::attention_backward_bf16(m.bf16(q), m.bf16(kv), m.bf16(kv), m.bf16(q), m.bf16(kv),
                                                 m.bf16(kv), o, lse, m.bf16(q), B, T, H, Hkv, d, d, 0, 0.1f);
                 });
  }
}

TEST(LaunchPlan, AttentionOverDocuments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  // one launch per kernel for the batch's 4 documents (lengths 1, 49, 20 and a whole row of 70)
  const int64_t B = 2, T = 70, H = 4, Hkv = 2, n = 4;
  Tensor table;
  const Sequences seqs = ops::Segments{{0, 1, 50, 70, 140}}.sequences(Device::cuda, table);
  for (const int64_t d : {24, 96}) {
    const int64_t q = B * T * H * d, kv = B * T * Hkv * d;
    float *o = m.f32(q), *lse = m.f32(B * H * T);
    expect_plans("attention_forward over documents d=" + std::to_string(d),
                 cuda::attention_forward_plans(false, B, T, H, d, d, n), [&] {
                   cuda::attention_forward(o, lse, m.f32(q), m.f32(kv), m.f32(kv), B, T, H, Hkv, d, d, 0, 0.1f, seqs);
                 });
    expect_plans("attention_backward over documents d=" + std::to_string(d),
                 cuda::attention_backward_plans(false, B, T, H, Hkv, d, d, n), [&] {
                   cuda::attention_backward(m.f32(q), m.f32(kv), m.f32(kv), m.f32(q), m.f32(kv), m.f32(kv), o, lse,
                                            m.f32(q), B, T, H, Hkv, d, d, 16, 0.1f, seqs);
                 });
  }
  const int64_t d = 32;  // bf16 on the tensor cores
  const int64_t q = B * T * H * d, kv = B * T * Hkv * d;
  uint16_t* o = m.bf16(q);
  float* lse = m.f32(B * H * T);
  expect_plans("attention_forward_bf16 over documents", cuda::attention_forward_plans(true, B, T, H, d, d, n), [&] {
    cuda::attention_forward_bf16(o, lse, m.bf16(q), m.bf16(kv), m.bf16(kv), B, T, H, Hkv, d, d, 0, 0.1f, seqs);
  });
  expect_plans("attention_backward_bf16 over documents", cuda::attention_backward_plans(true, B, T, H, Hkv, d, d, n),
               [&] {
                 cuda::attention_backward_bf16(m.bf16(q), m.bf16(kv), m.bf16(kv), m.bf16(q), m.bf16(kv), m.bf16(kv), o,
                                               lse, m.bf16(q), B, T, H, Hkv, d, d, 0, 0.1f, seqs);
               });
}

TEST(LaunchPlan, LinearMixers) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  // a partial chunk (T = 100 of 64-token chunks), 2 key tiles and 2 value tiles (Dv + 1 = 65 normalized)
  const int64_t B = 1, T = 100, H = 2, Dk = 72, Dv = 64;
  const int64_t qk = B * T * H * Dk, vo = B * T * H * Dv, st = B * H * Dk * Dv, z = B * H * Dk;
  for (const MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::bf16, MatmulPrecision::tf32})
  for (const bool with_states : {false, true}) {
    const cuda::MixerStates states{with_states, with_states};
    const std::string tag = std::string(" ") + matmul_precision_name(precision) + (with_states ? " with states" : "");
    cuda::chunk::Mixer<float> x;
    x.B = B, x.len = T, x.H = H, x.Dk = Dk, x.Dv = Dv, x.scale = 0.5f, x.precision = precision;
    x.q = m.f32(qk), x.k = m.f32(qk), x.v = m.f32(vo), x.o = m.f32(vo);
    x.dO = m.f32(vo), x.dq = m.f32(qk), x.dk = m.f32(qk), x.dv = m.f32(vo);
    if (with_states) x.h0 = m.f32(st), x.ht = m.f32(st), x.dht = m.f32(st), x.dh0 = m.f32(st);
    expect_plans("linear_attention_forward" + tag,
                 cuda::linear_attention_forward_plans(B, T, H, Dk, Dv, false, states, precision),
                 [&] { cuda::linear_attention_forward(x); });
    expect_plans("linear_attention_backward" + tag,
                 cuda::linear_attention_backward_plans(B, T, H, Dk, Dv, false, states, precision),
                 [&] { cuda::linear_attention_backward(x); });
    cuda::chunk::Mixer<float> n = x;
    n.normalize = true;
    if (with_states) n.z0 = m.f32(z), n.zt = m.f32(z), n.dzt = m.f32(z), n.dz0 = m.f32(z);
    expect_plans("linear_attention_forward normalized" + tag,
                 cuda::linear_attention_forward_plans(B, T, H, Dk, Dv, true, states, precision),
                 [&] { cuda::linear_attention_forward(n); });
    expect_plans("linear_attention_backward normalized" + tag,
                 cuda::linear_attention_backward_plans(B, T, H, Dk, Dv, true, states, precision),
                 [&] { cuda::linear_attention_backward(n); });
    cuda::chunk::Mixer<float> g = x;
    g.g = m.f32(qk), g.dg = m.f32(qk);
    expect_plans("gla_forward" + tag, cuda::gla_forward_plans(B, T, H, Dk, Dv, states, precision),
                 [&] { cuda::gla_forward(g); });
    expect_plans("gla_backward" + tag, cuda::gla_backward_plans(B, T, H, Dk, Dv, states, precision),
                 [&] { cuda::gla_backward(g); });
  }
}

// Mamba2: GLA's launches between its own, with B and C shared by groups of heads or one per head.
TEST(LaunchPlan, Mamba2) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t B = 1, T = 100, H = 4, N = 72, P = 64, rows = B * T;
  for (const int64_t G : {int64_t(2), H})
  for (const bool with_states : {false, true}) {
    const cuda::MixerStates states{with_states, with_states};
    const std::string tag = " G=" + std::to_string(G) + (with_states ? " with states" : "");
    cuda::Mamba2Call c;
    c.batch = B, c.T = T, c.H = H, c.G = G, c.N = N, c.P = P;
    c.x = m.f32(rows * H * P), c.gate = m.f32(rows * H), c.Bm = m.f32(rows * G * N), c.Cm = m.f32(rows * G * N);
    c.A_log = m.f32(H), c.D = m.f32(H), c.o = m.f32(rows * H * P);
    c.dx = m.f32(rows * H * P), c.dgate = m.f32(rows * H), c.dB = m.f32(rows * G * N), c.dC = m.f32(rows * G * N);
    c.dA_log = m.f32(H), c.dD = m.f32(H), c.dO = m.f32(rows * H * P);
    if (with_states) c.h0 = m.f32(B * H * N * P), c.ht = m.f32(B * H * N * P);
    if (with_states) c.dh0 = m.f32(B * H * N * P), c.dht = m.f32(B * H * N * P);
    expect_plans("mamba2_forward" + tag, cuda::mamba2_forward_plans(B, T, H, N, P, states),
                 [&] { cuda::mamba2_forward(c); });
    expect_plans("mamba2_backward" + tag, cuda::mamba2_backward_plans(B, T, H, G, N, P, states),
                 [&] { cuda::mamba2_backward(c); });
  }
}

// The linear mixers over documents: the same launches, x over the tile indices of the documents
// (kernels/sequences.h), the sequential passes a thread per (document, head) state entry.
TEST(LaunchPlan, LinearMixersOverDocuments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t B = 2, T = 70, H = 2, Dk = 72, Dv = 64, n = 4;
  Tensor table;
  const Sequences seqs = ops::Segments{{0, 1, 50, 70, 140}}.sequences(Device::cuda, table);
  const int64_t qk = B * T * H * Dk, vo = B * T * H * Dv, st = B * H * Dk * Dv, z = B * H * Dk;
  for (const MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::bf16}) {
    const cuda::MixerStates states{true, true};
    const std::string tag = std::string(" over documents ") + matmul_precision_name(precision);
    cuda::chunk::Mixer<float> x;
    x.B = B, x.len = T, x.H = H, x.Dk = Dk, x.Dv = Dv, x.scale = 0.5f, x.precision = precision, x.seqs = seqs;
    x.q = m.f32(qk), x.k = m.f32(qk), x.v = m.f32(vo), x.o = m.f32(vo);
    x.dO = m.f32(vo), x.dq = m.f32(qk), x.dk = m.f32(qk), x.dv = m.f32(vo);
    x.h0 = m.f32(st), x.ht = m.f32(st), x.dht = m.f32(st), x.dh0 = m.f32(st);
    cuda::chunk::Mixer<float> nx = x;
    nx.normalize = true;
    nx.z0 = m.f32(z), nx.zt = m.f32(z), nx.dzt = m.f32(z), nx.dz0 = m.f32(z);
    expect_plans("linear_attention_forward normalized" + tag,
                 cuda::linear_attention_forward_plans(B, T, H, Dk, Dv, true, states, precision, n),
                 [&] { cuda::linear_attention_forward(nx); });
    expect_plans("linear_attention_backward normalized" + tag,
                 cuda::linear_attention_backward_plans(B, T, H, Dk, Dv, true, states, precision, n),
                 [&] { cuda::linear_attention_backward(nx); });
    cuda::chunk::Mixer<float> g = x;
    g.g = m.f32(qk), g.dg = m.f32(qk);
    expect_plans("gla_forward" + tag, cuda::gla_forward_plans(B, T, H, Dk, Dv, states, precision, n),
                 [&] { cuda::gla_forward(g); });
    expect_plans("gla_backward" + tag, cuda::gla_backward_plans(B, T, H, Dk, Dv, states, precision, n),
                 [&] { cuda::gla_backward(g); });
  }
}

// What documents cost in launches: a mixer op (forward + backward, with h0 and dht) over 9 documents
// in 4 rows of 100, as one call per op against the 9 per-part calls autograd made before; the one call
// launches what a batch without documents launches. (The plans are the launchers' launches:
// LinearMixersOverDocuments, DeltaNetOverDocuments.) Printed for the README.
TEST(LaunchPlan, MixerLaunchesOverNineDocumentsInFourRows) {
  const int64_t B = 4, T = 100, H = 4, D = 64;
  const ops::Segments nine{{0, 100, 130, 200, 220, 260, 300, 350, 370, 400}};
  const std::vector<ops::SegmentPart> parts = ops::segment_parts(nine, B, T);
  ASSERT_EQ(parts.size(), 9u);
  struct Mixer {
    const char* name;
    std::function<size_t(int64_t rows, int64_t len, cuda::MixerStates states, int64_t sequences)> launches;
  };
  const std::vector<Mixer> mixers = {
      {"linear attention",
       [&](int64_t rows, int64_t len, cuda::MixerStates st, int64_t n) {
         return cuda::linear_attention_forward_plans(rows, len, H, D, D, false, st, MatmulPrecision::f32, n).size() +
                cuda::linear_attention_backward_plans(rows, len, H, D, D, false, st, MatmulPrecision::f32, n).size();
       }},
      {"linear attention, normalized",
       [&](int64_t rows, int64_t len, cuda::MixerStates st, int64_t n) {
         return cuda::linear_attention_forward_plans(rows, len, H, D, D, true, st, MatmulPrecision::f32, n).size() +
                cuda::linear_attention_backward_plans(rows, len, H, D, D, true, st, MatmulPrecision::f32, n).size();
       }},
      {"GLA / RetNet",
       [&](int64_t rows, int64_t len, cuda::MixerStates st, int64_t n) {
         return cuda::gla_forward_plans(rows, len, H, D, D, st, MatmulPrecision::f32, n).size() +
                cuda::gla_backward_plans(rows, len, H, D, D, st, MatmulPrecision::f32, n).size();
       }},
      {"DeltaNet / Gated DeltaNet",
       [&](int64_t rows, int64_t len, cuda::MixerStates, int64_t n) {
         return cuda::deltanet_forward_plans(rows, len, H, D, D, 64, MatmulPrecision::f32, n).size() +
                cuda::deltanet_backward_plans(rows, len, H, D, D, 64, MatmulPrecision::f32, n).size();
       }},
  };
  for (const Mixer& m : mixers) {
    size_t per_part = 0;
    for (const ops::SegmentPart& p : parts) per_part += m.launches(p.rows, p.len, {p.first, p.last}, 0);
    const size_t one_call = m.launches(B, T, {true, true}, int64_t(nine.offsets.size()) - 1);
    std::printf("%-30s 9 documents in 4 rows: %zu launches per op in one call, %zu in per-part calls\n", m.name,
                one_call, per_part);
    EXPECT_EQ(one_call, m.launches(B, T, {true, true}, 0)) << m.name;
    EXPECT_LT(one_call, per_part) << m.name;
  }
}

// The chunk-parallel passes' geometry at the benchmark's shape: a block per (chunk, tile, head), x
// running over the 4 rows' 32 chunks each, 512 of them, and the sequential pass one thread per state entry.
TEST(LaunchPlan, ChunkPassesFillTheGpu) {
  const int64_t B = 4, T = 2048, H = 4, D = 64;
  const cuda::LaunchPlan state = cuda::chunk_state_plan(false, B, T, H, D, D);
  EXPECT_EQ(state.kernel, "chunk::chunk_state_kernel<false,(MatmulPrecision)0>");
  EXPECT_EQ(state.grid.x, 128);  // B * 2048 / 64 chunks
  EXPECT_EQ(state.grid.y, 1);
  EXPECT_EQ(state.grid.z, 4);
  EXPECT_EQ(state.block.count(), 256);
  EXPECT_EQ(state.shared_bytes, int64_t(sizeof(float)) * 2 * 64 * 65);
  EXPECT_EQ(cuda::chunk_apply_plan(true, B, T, H, D + 1).grid.y, 2);  // [v | 1]: two value tiles
  EXPECT_EQ(cuda::chunk_dqk_plan(B, T, H, D).grid.count(), 512);
  // the tensor-core instantiations: the same grids, their own names and shared memory
  for (const MatmulPrecision precision : {MatmulPrecision::bf16, MatmulPrecision::tf32}) {
    const int bytes = precision == MatmulPrecision::bf16 ? 2 : 4;
    const std::string arg = "(MatmulPrecision)" + std::to_string(int(precision)) + ">";
    const cuda::LaunchPlan tc_state = cuda::chunk_state_plan(true, B, T, H, D, D, precision);
    EXPECT_EQ(tc_state.kernel, "chunk::chunk_state_kernel<true," + arg);
    EXPECT_EQ(tc_state.grid.count(), 512);
    EXPECT_EQ(tc_state.shared_bytes, cuda::chunk::tc_state_bytes(bytes));
    const cuda::LaunchPlan tc_apply = cuda::chunk_apply_plan(false, B, T, H, D, precision);
    EXPECT_EQ(tc_apply.kernel, "chunk::chunk_apply_kernel<false," + arg);
    EXPECT_EQ(tc_apply.grid.count(), 512);
    EXPECT_EQ(tc_apply.shared_bytes, cuda::chunk::tc_apply_bytes(bytes));
    const cuda::LaunchPlan tc_qk = cuda::chunk_dqk_plan(B, T, H, D, precision);
    EXPECT_EQ(tc_qk.kernel, "chunk::chunk_dqk_kernel<" + arg);
    EXPECT_EQ(tc_qk.grid.count(), 512);
    EXPECT_EQ(tc_qk.shared_bytes, cuda::chunk::tc_qk_bytes(bytes));
    EXPECT_LE(tc_qk.shared_bytes, 227 * 1024) << "more than an H100's shared memory per block";
  }
  const cuda::LaunchPlan pass = cuda::state_pass_plan(true, B, H, D, D);
  EXPECT_EQ(pass.kernel, "chunk::state_pass_kernel<true>");
  EXPECT_EQ(pass.grid.count() * pass.block.count(), B * H * D * D);
  EXPECT_EQ(pass.shared_bytes, 0);
  // DeltaNet: every launch with per-chunk work has a block per (chunk, batch * head), 512 >= 132 SMs;
  // the sequential passes one per (8-column tile of the state, batch * head).
  for (const cuda::LaunchPlans& plans :
       {cuda::deltanet_forward_plans(B, T, H, D, D, 64), cuda::deltanet_backward_plans(B, T, H, D, D, 64),
        cuda::deltanet_forward_plans(B, T, H, D, D, 64, MatmulPrecision::bf16),
        cuda::deltanet_backward_plans(B, T, H, D, D, 64, MatmulPrecision::bf16)}) {
    ASSERT_EQ(plans.size(), 3u);
    EXPECT_EQ(plans[0].grid.count(), 512) << plans[0].kernel;
    EXPECT_EQ(plans[1].grid.count(), 128) << plans[1].kernel;
    EXPECT_EQ(plans[2].grid.count(), 512) << plans[2].kernel;
    for (const cuda::LaunchPlan& plan : plans)
      EXPECT_LE(plan.shared_bytes, 227 * 1024) << plan.kernel << ": more than an H100's shared memory per block";
  }
}

TEST(LaunchPlan, DeltaNet) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t B = 1, T = 40, H = 3, Dk = 16, Dv = 24, C = 16;
  const int64_t qk = B * T * H * Dk, vo = B * T * H * Dv, s = B * T * H;
  for (const bool gated : {false, true}) {
    DeltaNetArgs<float> p;
    p.B = B, p.len = T, p.H = H, p.Dk = Dk, p.Dv = Dv, p.chunk_size = C, p.scale = 0.25f;
    p.o = m.f32(vo), p.saved = m.f32(deltanet_chunk_saved_size(B, T, H, Dk, Dv, C));
    p.q = m.f32(qk), p.k = m.f32(qk), p.v = m.f32(vo), p.beta = m.f32(s), p.a = gated ? m.f32(s) : nullptr;
    p.dO = m.f32(vo), p.dq = m.f32(qk), p.dk = m.f32(qk), p.dv = m.f32(vo), p.dbeta = m.f32(s);
    p.da = gated ? m.f32(s) : nullptr;
    const std::string what = gated ? "gated_deltanet" : "deltanet";
    expect_plans(what + " chunk forward", cuda::deltanet_forward_plans(B, T, H, Dk, Dv, C),
                 [&] { cuda::deltanet_chunk_forward(p); });
    for (const MatmulPrecision precision : {MatmulPrecision::bf16, MatmulPrecision::tf32}) {
      DeltaNetArgs<float> x = p;
      x.precision = precision;
      const LaunchPlans plans = cuda::deltanet_forward_plans(B, T, H, Dk, Dv, C, precision);
      const std::string arg = "<(MatmulPrecision)" + std::to_string(int(precision)) + ">";
      EXPECT_EQ(plans[0].kernel, "chunk_factors_tc_kernel" + arg);
      EXPECT_EQ(plans[2].kernel, "chunk_outputs_tc_kernel" + arg);
      expect_plans(what + " chunk forward " + matmul_precision_name(precision), plans,
                   [&] { cuda::deltanet_chunk_forward(x); });
    }
    const cuda::delta::Dims d{B, T, H, Dk, Dv, C};
    float* work = m.f32(B * H * cuda::delta::backward_work(d));
    expect_plans(what + " chunk backward", cuda::deltanet_backward_plans(B, T, H, Dk, Dv, C),
                 [&] { cuda::deltanet_chunk_backward(p, work); });
    for (const MatmulPrecision precision : {MatmulPrecision::bf16, MatmulPrecision::tf32}) {
      DeltaNetArgs<float> x = p;
      x.precision = precision;
      const LaunchPlans plans = cuda::deltanet_backward_plans(B, T, H, Dk, Dv, C, precision);
      const std::string arg = "<(MatmulPrecision)" + std::to_string(int(precision)) + ">";
      EXPECT_EQ(plans[0].kernel, "chunk_backward_inputs_tc_kernel" + arg);
      EXPECT_EQ(plans[2].kernel, "chunk_backward_grads_tc_kernel" + arg);
      expect_plans(what + " chunk backward " + matmul_precision_name(precision), plans,
                   [&] { cuda::deltanet_chunk_backward(x, work); });
      // heads past 64 take the float32 kernels, and the plan says so
      EXPECT_EQ(cuda::deltanet_backward_plans(B, T, H, 128, Dv, C, precision)[2].kernel, "chunk_backward_grads_kernel");
    }
    DeltaNetArgs<float> r = p;
    r.chunk_size = 1, r.saved = nullptr;
    expect_plans(what + " recurrent forward", {cuda::deltanet_recurrent_plan(B, T, H, Dk, Dv)},
                 [&] { cuda::deltanet_recurrent_forward(r, m.f32(B * H * Dk * Dv)); });
  }
}

// DeltaNet over documents: the per-chunk launches over (tiles, H), the sequential passes over
// (state column tiles, documents * H); the forward in float32 and bf16.
TEST(LaunchPlan, DeltaNetOverDocuments) {
  SKIP_WITHOUT_GPU();
  DeviceBuffers m;
  const int64_t B = 2, T = 40, H = 3, Dk = 16, Dv = 24, C = 16, n = 4;
  Tensor table;
  const Sequences seqs = ops::Segments{{0, 1, 20, 40, 80}}.sequences(Device::cuda, table);
  const int64_t qk = B * T * H * Dk, vo = B * T * H * Dv, s = B * T * H, st = B * H * Dk * Dv;
  DeltaNetArgs<float> p;
  p.B = B, p.len = T, p.H = H, p.Dk = Dk, p.Dv = Dv, p.chunk_size = C, p.scale = 0.25f, p.seqs = seqs;
  const int64_t tiles = tile_count(seqs, B, T, C);
  p.o = m.f32(vo), p.saved = m.f32(deltanet_chunk_saved_size(1, tiles * C, H, Dk, Dv, C));
  p.q = m.f32(qk), p.k = m.f32(qk), p.v = m.f32(vo), p.beta = m.f32(s), p.a = m.f32(s);
  p.h0 = m.f32(st), p.ht = m.f32(st), p.dht = m.f32(st), p.dh0 = m.f32(st);
  p.dO = m.f32(vo), p.dq = m.f32(qk), p.dk = m.f32(qk), p.dv = m.f32(vo), p.dbeta = m.f32(s), p.da = m.f32(s);
  expect_plans("gated_deltanet chunk forward over documents", cuda::deltanet_forward_plans(B, T, H, Dk, Dv, C,
                                                                                          MatmulPrecision::f32, n),
               [&] { cuda::deltanet_chunk_forward(p); });
  DeltaNetArgs<float> x = p;
  x.precision = MatmulPrecision::bf16;
  expect_plans("gated_deltanet chunk forward over documents bf16",
               cuda::deltanet_forward_plans(B, T, H, Dk, Dv, C, MatmulPrecision::bf16, n),
               [&] { cuda::deltanet_chunk_forward(x); });
  float* work = m.f32(cuda::delta::backward_scratch(cuda::delta::dims(p)));
  expect_plans("gated_deltanet chunk backward over documents", cuda::deltanet_backward_plans(B, T, H, Dk, Dv, C, MatmulPrecision::f32, n),
               [&] { cuda::deltanet_chunk_backward(p, work); });
  DeltaNetArgs<float> r = p;
  r.chunk_size = 1, r.saved = nullptr;
  expect_plans("gated_deltanet recurrent forward over documents", {cuda::deltanet_recurrent_plan(B, T, H, Dk, Dv, n)},
               [&] { cuda::deltanet_recurrent_forward(r, m.f32(n * H * Dk * Dv)); });
}

#else

TEST(LaunchPlan, NeedsTheEmulationBuild) {
  GTEST_SKIP() << "the launches are recorded by the CUDA emulation (LINATTN_CUDA_EMULATION) only";
}

#endif

}  // namespace
}  // namespace linattn
