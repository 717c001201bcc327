// The backend entries whose backward reads a value a tape node may keep in bf16 (autograd/saved.h,
// kernels/backend.def): activation, SwiGLU (also over joined [gate | up] rows), RMSNorm and L2 norm
// backwards, the linear mixers' backwards, and SwiGLU's forward, which also writes a product's bf16
// operand. On each device (the CPU; CUDA where a GPU or the emulation
// is), an entry given the bf16 copy computes exactly what it computes given that copy widened to
// float32: the same kernel arithmetic on the same values, so equal bit for bit; and a bf16 output is
// the float32 output rounded.
#include <functional>
#include <string>
#include <vector>

#include "kernel_testing.h"
#include "kernels/backend.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::bitwise_difference;
using testing::random_f32;

std::vector<Device> devices() { return testing::cpu_and_cuda(); }

// A host tensor on `device`, and a tensor back on the host, once the kernels so far have run.
Tensor on(Device device, const Tensor& host) {
  return device == Device::cpu ? host.clone() : testing::on_device(host);
}
Tensor host(const Tensor& t) { return t.device() == Device::cpu ? t : testing::on_host(t); }

// f(kept) with kept the bf16 copy of x, against f(kept) with kept that copy widened: each output
// (host tensors) equal bit for bit.
void expect_same_from_the_copy(Device device, const Tensor& x,
                               const std::function<std::vector<Tensor>(const Tensor& kept)>& f) {
  const Tensor x16 = x.to(DType::bf16), widened = x16.to(DType::f32);
  const std::vector<Tensor> got = f(on(device, x16)), want = f(on(device, widened));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(bitwise_difference(got[i], want[i]), "") << "output " << i;
}

TEST(CudaKeptInBf16, ActivationBackwardsReadTheCopy) {
  Rng rng(1);
  const Tensor x = random_f32({3, 257}, rng, -4, 4), dy = random_f32({3, 257}, rng), dx0 = random_f32({3, 257}, rng);
  for (Device device : devices())
    for (Activation f : {Activation::silu, Activation::sigmoid, Activation::logsigmoid, Activation::elu1,
                         Activation::relu}) {
      SCOPED_TRACE(std::string(device_name(device)) + " " + activation_name(f));
      expect_same_from_the_copy(device, x, [&](const Tensor& kept) {
        const Tensor dx = on(device, dx0);  // accumulated into
        backend::activation_backward(device, f, dx, kept, on(device, dy), 1.0, false);
        return std::vector<Tensor>{host(dx)};
      });
    }
}

// The bias and activation pass writes z's bf16 copy (the biased z rounded) beside y; its backward
// reads the copy as it reads the widened copy, and writes dz in bf16 as the float32 dz rounded, with
// the same bias gradient (summed before the rounding).
TEST(CudaKeptInBf16, BiasActivationWritesAndReadsTheCopies) {
  Rng rng(10);
  const Shape s{7, 203};
  const Tensor z0 = random_f32(s, rng, -4, 4), bias = random_f32({203}, rng), dy = random_f32(s, rng);
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    auto zeros = [&](const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype, device); };
    const Tensor z = on(device, z0), y = zeros(s, DType::f32), z16 = zeros(s, DType::bf16);
    backend::bias_activation_forward(device, Activation::logsigmoid, y, z16, z, on(device, bias), 0.0625);
    Tensor biased = z0.clone();  // z + bias, which the copy holds (z itself is only read)
    for (int64_t i = 0; i < biased.numel(); ++i) biased.data<float>()[i] += bias.data<float>()[i % 203];
    EXPECT_EQ(bitwise_difference(host(z16), biased.to(DType::bf16)), "") << "the copy";
    EXPECT_EQ(bitwise_difference(host(z), z0), "") << "z is only read";
    expect_same_from_the_copy(device, biased, [&](const Tensor& kept) {
      const Tensor dz = zeros(s, DType::f32), db = zeros({203}, DType::f32);
      backend::bias_activation_backward(device, Activation::logsigmoid, dz, db, kept, on(device, dy), 0.0625);
      return std::vector<Tensor>{host(dz), host(db)};
    });
    const Tensor dz = zeros(s, DType::f32), dz16 = zeros(s, DType::bf16);
    const Tensor db = zeros({203}, DType::f32), db16 = zeros({203}, DType::f32);
    backend::bias_activation_backward(device, Activation::logsigmoid, dz, db, z16, on(device, dy), 0.0625);
    backend::bias_activation_backward(device, Activation::logsigmoid, dz16, db16, z16, on(device, dy), 0.0625);
    EXPECT_EQ(bitwise_difference(host(dz16), host(dz).to(DType::bf16)), "") << "bf16 gradient";
    EXPECT_EQ(bitwise_difference(host(db16), host(db)), "") << "the bias gradient";
  }
}

TEST(CudaKeptInBf16, SwigluReadsTheCopyAndWritesBf16) {
  Rng rng(2);
  const Shape s{5, 203};
  const Tensor gate = random_f32(s, rng, -4, 4), up = random_f32(s, rng), dy = random_f32(s, rng);
  const Tensor dg0 = random_f32(s, rng), du0 = random_f32(s, rng);
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    const Tensor up16 = on(device, up.to(DType::bf16)), up_widened = on(device, up.to(DType::bf16).to(DType::f32));
    expect_same_from_the_copy(device, gate, [&](const Tensor& g) {
      const Tensor& u = g.dtype() == DType::bf16 ? up16 : up_widened;  // one dtype for both inputs
      const Tensor y = Tensor::zeros(s, DType::f32, device), y16 = Tensor::zeros(s, DType::bf16, device);
      backend::swiglu_forward(device, y, g, u);
      backend::swiglu_forward(device, y16, g, u);
      const Tensor dg = on(device, dg0), du = on(device, du0);
      backend::swiglu_backward(device, dg, du, g, u, on(device, dy), false);
      EXPECT_EQ(bitwise_difference(host(y16), host(y).to(DType::bf16)), "") << "bf16 output: the float32 one rounded";
      return std::vector<Tensor>{host(y), host(dg), host(du)};
    });
    // float32 inputs into a bf16 operand: the float32 output rounded
    const Tensor y = Tensor::zeros(s, DType::f32, device), y16 = Tensor::zeros(s, DType::bf16, device);
    backend::swiglu_forward(device, y, on(device, gate), on(device, up));
    backend::swiglu_forward(device, y16, on(device, gate), on(device, up));
    EXPECT_EQ(bitwise_difference(host(y16), host(y).to(DType::bf16)), "");
  }
}

// SwiGLU over [gate | up] rows (ops::swiglu_mlp): read from the kept copy as from it widened; the
// forward writes that copy (x rounded) in its pass, and a bf16 operand or gradient is the float32 one
// rounded.
TEST(CudaKeptInBf16, SwigluJoinedReadsAndWritesTheCopies) {
  Rng rng(9);
  const int64_t rows = 5, cols = 203;
  const Tensor x = random_f32({rows, 2 * cols}, rng, -4, 4), dy = random_f32({rows, cols}, rng);
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    auto zeros = [&](const Shape& s, DType dtype) { return Tensor::zeros(s, dtype, device); };
    expect_same_from_the_copy(device, x, [&](const Tensor& kept) {
      const Tensor y = zeros({rows, cols}, DType::f32), dx = zeros({rows, 2 * cols}, DType::f32);
      backend::swiglu_joined_forward(device, y, Tensor(), kept);
      backend::swiglu_joined_backward(device, dx, kept, on(device, dy));
      return std::vector<Tensor>{host(y), host(dx)};
    });
    const Tensor y = zeros({rows, cols}, DType::f32), y16 = zeros({rows, cols}, DType::bf16);
    const Tensor copy = zeros({rows, 2 * cols}, DType::bf16);
    backend::swiglu_joined_forward(device, y, Tensor(), on(device, x));
    backend::swiglu_joined_forward(device, y16, copy, on(device, x));
    EXPECT_EQ(bitwise_difference(host(y16), host(y).to(DType::bf16)), "") << "bf16 operand";
    EXPECT_EQ(bitwise_difference(host(copy), x.to(DType::bf16)), "") << "the copy";
    const Tensor dx = zeros({rows, 2 * cols}, DType::f32), dx16 = zeros({rows, 2 * cols}, DType::bf16);
    backend::swiglu_joined_backward(device, dx, on(device, x), on(device, dy));
    backend::swiglu_joined_backward(device, dx16, on(device, x), on(device, dy));
    EXPECT_EQ(bitwise_difference(host(dx16), host(dx).to(DType::bf16)), "") << "bf16 gradient";
  }
}

// The cross-entropy's gradient written as the bf16 operand of the head's products
// (ops::linear_cross_entropy) is the float32 one rounded, the ignored rows 0.
TEST(CudaKeptInBf16, CrossEntropyWritesItsGradientInBf16) {
  Rng rng(10);
  const int64_t N = 9, V = 301;
  const Tensor logits = random_f32({N, V}, rng, -3, 3), dloss = random_f32({1}, rng, 0.5, 2);
  Tensor targets = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) targets.data<int32_t>()[i] = i == 4 ? -100 : int32_t(rng.below(uint64_t(V)));
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    const Tensor lse = Tensor::zeros({N}, DType::f32, device), loss = Tensor::zeros({1}, DType::f32, device);
    const Tensor l = on(device, logits), d = on(device, dloss);
    const int64_t count = backend::cross_entropy_forward(device, loss, lse, l, targets, -100);
    const Tensor dl = Tensor::empty({N, V}, DType::f32, device), dl16 = Tensor::empty({N, V}, DType::bf16, device);
    dl.fill_(NAN);
    dl16.fill_(NAN);
    backend::cross_entropy_backward(device, dl, l, lse, targets, d, count, -100, true);
    backend::cross_entropy_backward(device, dl16, l, lse, targets, d, count, -100, true);
    EXPECT_EQ(bitwise_difference(host(dl16), host(dl).to(DType::bf16)), "");
    EXPECT_EQ(host(dl).data<float>()[4 * V + 7], 0.0f) << "an ignored row";
  }
}

TEST(CudaKeptInBf16, NormBackwardsReadTheCopy) {
  Rng rng(3);
  const int64_t N = 37, D = 96;
  const Tensor x = random_f32({N, D}, rng, -3, 3), w = random_f32({D}, rng), dy = random_f32({N, D}, rng);
  const Tensor dx0 = random_f32({N, D}, rng), dw0 = random_f32({D}, rng);
  for (Device device : devices())
    for (int64_t groups : {1, 4}) {
      SCOPED_TRACE(std::string(device_name(device)) + " rmsnorm, groups " + std::to_string(groups));
      // rstd from the float32 x, as the forward saved it
      const Tensor y = Tensor::zeros({N, D}, DType::f32, device), rstd = Tensor::zeros({N, groups}, DType::f32, device);
      backend::rmsnorm_forward(device, y, {}, {}, rstd, on(device, x), on(device, w), 1e-6);
      expect_same_from_the_copy(device, x, [&](const Tensor& kept) {
        const Tensor dx = on(device, dx0), dw = on(device, dw0);
        backend::rmsnorm_backward(device, dx, Tensor(), dw, kept, on(device, w), rstd, on(device, dy), dx);
        return std::vector<Tensor>{host(dx), host(dw)};
      });
    }
  for (Device device : devices()) {
    SCOPED_TRACE(std::string(device_name(device)) + " l2norm");
    const Tensor y = Tensor::zeros({N, D}, DType::f32, device), r = Tensor::zeros({N}, DType::f32, device);
    backend::l2norm_forward(device, y, r, on(device, x), 1e-6);
    // the backward reads the forward's output y: kept in bf16 as an activation
    expect_same_from_the_copy(device, host(y), [&](const Tensor& kept) {
      const Tensor dx = on(device, dx0);
      backend::l2norm_backward(device, dx, kept, r, on(device, dy));
      return std::vector<Tensor>{host(dx)};
    });
  }
}

// rmsnorm's forward writes y's and x's bf16 copies in its pass: y and x rounded, and y as without them.
TEST(CudaKeptInBf16, RmsnormWritesTheCopiesInItsPass) {
  Rng rng(5);
  const int64_t N = 37, D = 96;
  const Tensor x = random_f32({N, D}, rng, -3, 3), w = random_f32({D}, rng);
  for (Device device : devices())
    for (int64_t groups : {1, 4}) {
      SCOPED_TRACE(std::string(device_name(device)) + ", groups " + std::to_string(groups));
      auto zeros = [&](const Shape& s, DType t) { return Tensor::zeros(s, t, device); };
      const Tensor y = zeros({N, D}, DType::f32), rstd = zeros({N, groups}, DType::f32);
      const Tensor y16 = zeros({N, D}, DType::bf16), x16 = zeros({N, D}, DType::bf16);
      const Tensor plain = zeros({N, D}, DType::f32), plain_rstd = zeros({N, groups}, DType::f32);
      backend::rmsnorm_forward(device, y, y16, x16, rstd, on(device, x), on(device, w), 1e-6);
      backend::rmsnorm_forward(device, plain, {}, {}, plain_rstd, on(device, x), on(device, w), 1e-6);
      EXPECT_EQ(bitwise_difference(host(y), host(plain)), "");
      EXPECT_EQ(bitwise_difference(host(rstd), host(plain_rstd)), "");
      EXPECT_EQ(bitwise_difference(host(y16), host(y).to(DType::bf16)), "");
      EXPECT_EQ(bitwise_difference(host(x16), x.to(DType::bf16)), "");
    }
}

// rmsnorm's backward writes dx's bf16 copy in its pass (ops::add_rmsnorm's, for the products of its
// branch): dx rounded, and dx as without it, whether dx is written, added to in place or out of place.
TEST(CudaKeptInBf16, RmsnormBackwardWritesTheCopyOfDxInItsPass) {
  Rng rng(6);
  const int64_t N = 37, D = 96;
  const Tensor x = random_f32({N, D}, rng, -3, 3), w = random_f32({D}, rng), dy = random_f32({N, D}, rng);
  const Tensor dx0 = random_f32({N, D}, rng);
  for (Device device : devices())
    for (const char* prior : {"none", "in place", "out of place"}) {
      SCOPED_TRACE(std::string(device_name(device)) + ", prior " + prior);
      auto zeros = [&](const Shape& s, DType t) { return Tensor::zeros(s, t, device); };
      const Tensor y = zeros({N, D}, DType::f32), rstd = zeros({N}, DType::f32);
      backend::rmsnorm_forward(device, y, {}, {}, rstd, on(device, x), on(device, w), 1e-6);
      auto run = [&](const Tensor& dx16) {
        const Tensor dx = on(device, dx0), other = on(device, dx0);
        const std::string p = prior;
        const Tensor from = p == "none" ? Tensor() : p == "in place" ? dx : other;
        backend::rmsnorm_backward(device, dx, dx16, Tensor(), on(device, x), on(device, w), rstd, on(device, dy),
                                  from);
        return host(dx);
      };
      const Tensor dx16 = zeros({N, D}, DType::bf16);
      const Tensor with_copy = run(dx16), plain = run(Tensor());
      EXPECT_EQ(bitwise_difference(with_copy, plain), "");
      EXPECT_EQ(bitwise_difference(host(dx16), plain.to(DType::bf16)), "") << "the copy: dx rounded";
    }
}

// The swish-gated norm (ops::rmsnorm_gate_linear): its forward writes x's bf16 copy in its pass (x
// rounded, h as without it), and both passes given the kept copies of x and gate compute what they
// compute given those copies widened, bit for bit.
TEST(CudaKeptInBf16, GatedNormWritesAndReadsTheCopies) {
  Rng rng(7);
  const int64_t R = 37, D = 96;
  const Tensor x = random_f32({R, D}, rng, -3, 3), gate = random_f32({R, D}, rng, -3, 3), w = random_f32({D}, rng);
  const Tensor dh = random_f32({R, D}, rng), dx0 = random_f32({R, D}, rng), dg0 = random_f32({R, D}, rng);
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    auto zeros = [&](const Shape& s, DType t) { return Tensor::zeros(s, t, device); };
    const Tensor h = zeros({R, D}, DType::bf16), x16 = zeros({R, D}, DType::bf16), rstd = zeros({R}, DType::f32);
    const Tensor plain = zeros({R, D}, DType::bf16), plain_rstd = zeros({R}, DType::f32);
    backend::rmsnorm_gate_forward(device, h, x16, rstd, on(device, x), on(device, gate), on(device, w), 1e-6, false);
    backend::rmsnorm_gate_forward(device, plain, {}, plain_rstd, on(device, x), on(device, gate), on(device, w), 1e-6,
                                  false);
    EXPECT_EQ(bitwise_difference(host(h), host(plain)), "");
    EXPECT_EQ(bitwise_difference(host(rstd), host(plain_rstd)), "");
    EXPECT_EQ(bitwise_difference(host(x16), x.to(DType::bf16)), "");
    auto passes = [&](const Tensor& xk, const Tensor& gk) {
      const Tensor again = zeros({R, D}, DType::f32), dx = on(device, dx0), dg = on(device, dg0);
      const Tensor dw = zeros({D}, DType::f32);
      backend::rmsnorm_gate_forward(device, again, {}, rstd, on(device, xk), on(device, gk), on(device, w), 1e-6, true);
      backend::rmsnorm_gate_backward(device, dx, dg, dw, on(device, xk), on(device, gk), on(device, w), rstd,
                                     on(device, dh), false);
      return std::vector<Tensor>{host(again), host(dx), host(dg), host(dw)};
    };
    const Tensor xk = x.to(DType::bf16), gk = gate.to(DType::bf16);
    const std::vector<Tensor> got = passes(xk, gk), want = passes(xk.to(DType::f32), gk.to(DType::f32));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(bitwise_difference(got[i], want[i]), "") << "output " << i;
  }
}

// The column blocks of ops::linears: split writes each block and its bf16 copy (the block rounded),
// join writes float32 or straight into bf16 (the joined float32 rounded).
TEST(CudaKeptInBf16, ColumnBlocksWriteTheirCopies) {
  Rng rng(6);
  const Tensor x = random_f32({9, 26}, rng);
  const std::vector<int64_t> widths = {7, 16, 3};
  for (Device device : devices()) {
    SCOPED_TRACE(device_name(device));
    std::vector<Tensor> parts, copies;
    for (int64_t w : widths) {
      parts.push_back(Tensor::zeros({9, w}, DType::f32, device));
      copies.push_back(Tensor::zeros({9, w}, DType::bf16, device));
    }
    backend::split_columns(device, parts, copies, on(device, x));
    const Tensor joined = Tensor::zeros({9, 26}, DType::f32, device);
    const Tensor joined16 = Tensor::zeros({9, 26}, DType::bf16, device);
    backend::join_columns(device, joined, parts);
    backend::join_columns(device, joined16, parts);
    for (size_t i = 0; i < parts.size(); ++i)
      EXPECT_EQ(bitwise_difference(host(copies[i]), host(parts[i]).to(DType::bf16)), "") << "block " << i;
    EXPECT_EQ(bitwise_difference(host(joined), x), "") << "join undoes split";
    EXPECT_EQ(bitwise_difference(host(joined16), x.to(DType::bf16)), "");
  }
}

// A mixer's backward given q, k, v and the gate as the bf16 copies a node keeps computes what it
// computes given those copies widened: the CUDA linear attention, GLA and Mamba2 passes read them as
// they are (no conversion launched), the other entries widen them first (kernels/backend.def).
TEST(CudaKeptInBf16, MixerBackwardsReadTheCopies) {
  Rng rng(7);
  const int64_t B = 2, T = 70, H = 2, Dk = 16, Dv = 24;  // two chunks of 64, the second one short
  const Tensor q = random_f32({B, T, H, Dk}, rng), k = random_f32({B, T, H, Dk}, rng);
  const Tensor v = random_f32({B, T, H, Dv}, rng), gate = random_f32({B, T, H, Dk}, rng, -0.5, -0.01);
  const Tensor beta = random_f32({B, T, H}, rng, 0.1, 0.9), dO = random_f32({B, T, H, Dv}, rng);
  const Tensor dht = random_f32({B, H, Dk, Dv}, rng);
  // Mamba2: C and B shared by both heads (one group), the time step before its softplus, A_log, D
  const Tensor C = random_f32({B, T, 1, Dk}, rng), Bm = random_f32({B, T, 1, Dk}, rng);
  const Tensor time_step = random_f32({B, T, H}, rng, -3, 1), A_log = random_f32({H}, rng), D = random_f32({H}, rng);
  struct Mixer {
    const char* name;
    const backend::Kernel<void(const backend::MixerArgs&)>& forward;
    const backend::Kernel<void(const backend::MixerArgs&)>& backward;
    const backend::Kernel<int64_t(const backend::MixerArgs&)>& saved_size;
    const Tensor *q, *k;
    const Tensor* gate;  // MixerArgs::gate: GLA's log-gates, the delta rule's beta; null: none
    bool mamba2 = false;
  };
  const Mixer mixers[] = {
      {"linear_attention", backend::linear_attention_forward, backend::linear_attention_backward,
       backend::linear_attention_saved_size, &q, &k, nullptr},
      {"gla", backend::gla_forward, backend::gla_backward, backend::gla_saved_size, &q, &k, &gate},
      {"delta_rule", backend::delta_rule_forward, backend::delta_rule_backward, backend::delta_rule_saved_size, &q,
       &k, &beta},
      {"mamba2", backend::mamba2_forward, backend::mamba2_backward, backend::mamba2_saved_size, &C, &Bm, &time_step,
       true},
  };
  for (Device device : devices())
    for (const Mixer& m : mixers) {
      SCOPED_TRACE(std::string(device_name(device)) + " " + m.name);
      auto zeros = [&](const Shape& s) { return Tensor::zeros(s, DType::f32, device); };
      // The inputs as a node keeps them (bf16, or the copies widened) and the forward that saved `saved`.
      auto args = [&](bool in_bf16) {
        auto kept = [&](const Tensor& x) {
          const Tensor x16 = x.to(DType::bf16);
          return on(device, in_bf16 ? x16 : x16.to(DType::f32));
        };
        backend::MixerArgs r;
        r.B = B, r.T = T, r.H = H, r.Dk = Dk, r.Dv = Dv, r.scale = 0.25;
        r.q = kept(*m.q), r.k = kept(*m.k), r.v = kept(v);
        if (m.gate) r.gate = kept(*m.gate);
        if (m.mamba2) r.G = 1, r.rate = on(device, A_log), r.skip = on(device, D);
        r.o = zeros({B, T, H, Dv}), r.ht = zeros({B, H, Dk, Dv});
        r.saved = zeros({std::max<int64_t>(m.saved_size(device, r), 1)});
        backend::MixerArgs f = r;
        for (Tensor* t : {&f.q, &f.k, &f.v, &f.gate})
          if (t->defined()) *t = t->dtype() == DType::bf16 ? on(device, host(*t).to(DType::f32)) : *t;
        m.forward(device, f);
        r.dq = zeros(m.q->shape()), r.dk = zeros(m.k->shape()), r.dv = zeros(v.shape());
        if (m.gate) r.dgate = zeros(m.gate->shape());
        if (m.mamba2) r.drate = zeros({H}), r.dskip = zeros({H});
        r.dO = on(device, dO), r.dht = on(device, dht);
        return r;
      };
      const backend::MixerArgs got = args(true), want = args(false);
      m.backward(device, got);
      m.backward(device, want);
      EXPECT_EQ(bitwise_difference(host(got.dq), host(want.dq)), "") << "dq";
      EXPECT_EQ(bitwise_difference(host(got.dk), host(want.dk)), "") << "dk";
      EXPECT_EQ(bitwise_difference(host(got.dv), host(want.dv)), "") << "dv";
      if (m.gate) {
        EXPECT_EQ(bitwise_difference(host(got.dgate), host(want.dgate)), "") << "dgate";
      }
      if (m.mamba2) {
        EXPECT_EQ(bitwise_difference(host(got.drate), host(want.drate)), "") << "dA_log";
        EXPECT_EQ(bitwise_difference(host(got.dskip), host(want.dskip)), "") << "dD";
      }
    }
}

// Attention's backward given q, k, v and o as kept bf16 copies computes what it computes given them
// widened: with bf16 products at head size 64 (the tensor-core kernels read the copies as they are),
// and in float32 (the kernels widen them).
TEST(CudaKeptInBf16, AttentionBackwardReadsTheCopies) {
  Rng rng(8);
  const int64_t B = 1, T = 40, H = 2, d = 64;
  const Tensor q = random_f32({B, T, H, d}, rng), k = random_f32({B, T, H, d}, rng), v = random_f32({B, T, H, d}, rng);
  const Tensor dO = random_f32({B, T, H, d}, rng);
  for (Device device : devices())
    for (MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::bf16}) {
      SCOPED_TRACE(std::string(device_name(device)) + (precision == MatmulPrecision::bf16 ? " bf16" : " f32"));
      backend::set_matmul_precision(precision);
      const Tensor o = Tensor::zeros({B, T, H, d}, DType::f32, device);
      const Tensor lse = Tensor::zeros({B, H, T}, DType::f32, device);
      backend::attention_forward(device, o, lse, on(device, q), on(device, k), on(device, v), 0, 0.125, {});
      auto grads = [&](bool in_bf16) {
        auto kept = [&](const Tensor& x) {
          const Tensor x16 = host(x).to(DType::bf16);
          return on(device, in_bf16 ? x16 : x16.to(DType::f32));
        };
        std::vector<Tensor> g;
        for (int i = 0; i < 3; ++i) g.push_back(Tensor::zeros({B, T, H, d}, DType::f32, device));
        backend::attention_backward(device, g[0], g[1], g[2], kept(q), kept(k), kept(v), kept(o), lse,
                                    on(device, dO), 0, 0.125, {}, false);
        return std::vector<Tensor>{host(g[0]), host(g[1]), host(g[2])};
      };
      const std::vector<Tensor> got = grads(true), want = grads(false);
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(bitwise_difference(got[i], want[i]), "") << "gradient " << i;
    }
  backend::set_matmul_precision(MatmulPrecision::f32);
}

// A float32 op refuses an input of another floating dtype than float32 or its bf16 copy.
TEST(CudaKeptInBf16, OtherDtypesAreRefused) {
  Rng rng(4);
  const Tensor x = random_f32({2, 8}, rng), dy = random_f32({2, 8}, rng), dx = Tensor::zeros({2, 8}, DType::f32);
  EXPECT_THROW(backend::activation_backward(Device::cpu, Activation::silu, dx, x.to(DType::f64), dy, 1.0, false),
               Error);
  EXPECT_THROW(backend::swiglu_forward(Device::cpu, Tensor::zeros({2, 8}, DType::f32), x.to(DType::bf16), x), Error);
}

}  // namespace
}  // namespace linattn
