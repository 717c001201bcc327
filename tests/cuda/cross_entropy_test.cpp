// CUDA fused softmax cross-entropy against the CPU kernel (kernels/cpu/cross_entropy.h) in float64, and
// the chunked loss op (ops::linear_cross_entropy) on the GPU against the CPU's.
#include "kernels/cuda/cross_entropy.h"

#include <optional>

#include "autograd/ops.h"
#include "kernel_testing.h"
#include "kernels/backend.h"
#include "kernels/cpu/cross_entropy.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using namespace testing;

constexpr int32_t kIgnore = -100;

// Tolerance basis, relative to the largest reference entry: a row's sum of exp is a float32 sum of
// ~V/512 + 10 terms in the block's order, so lse is off by at most ~(V/512 + 20) ulp of the sum,
// an absolute 1e-5 for V = 50257 against |lse| >= 10; the loss total adds such rows in float64;
// the gradient's softmax exp(logit - lse) inherits the lse error (relative 1e-5 at most) plus expf's
// 2 ulp.
constexpr double kTol = 1e-5;

TEST(CudaCrossEntropy, ForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t N, V;
  };
  // One row of one class; V smaller than a warp; V just past a multiple of the 512 threads; GPT-2's
  // vocabulary; a 128k vocabulary.
  const Case cases[] = {{1, 1}, {3, 5}, {300, 513}, {17, 50257}, {2, 131072}};
  Rng rng(61);
  for (auto [N, V] : cases) {
    SCOPED_TRACE("N = " + std::to_string(N) + ", V = " + std::to_string(V));
    Tensor logits = random_f32({N, V}, rng, -10, 10);
    Tensor targets = Tensor::empty({N}, DType::i32);
    for (int64_t i = 0; i < N; ++i)  // every third row ignored (when there are several)
      targets.data<int32_t>()[i] = N > 1 && i % 3 == 1 ? kIgnore : int32_t(rng.below(uint64_t(V)));
    Tensor logitsd = on_device(logits), targetsd = on_device(targets);
    Tensor lse = Tensor::empty({N}, DType::f32, Device::cuda), sums = Tensor::empty({3}, DType::f64, Device::cuda);
    cuda::cross_entropy_forward(lse.data<float>(), sums.data<double>(), nullptr, logitsd.data<float>(),
                                targetsd.data<int32_t>(), N, V, kIgnore);
    Tensor got_sums = on_host(sums);

    Tensor want_lse = Tensor::empty({N}, DType::f64);
    cpu::CrossEntropySum want = cpu::cross_entropy_forward(want_lse.data<double>(), f64(logits).data<double>(),
                                                           targets.data<int32_t>(), N, V, kIgnore);
    EXPECT_CLOSE(on_host(lse), want_lse, kTol);
    EXPECT_NEAR(got_sums.data<double>()[0], want.loss_sum, kTol * std::max(1.0, std::abs(want.loss_sum)));
    EXPECT_EQ(got_sums.data<double>()[1], double(want.count));
    EXPECT_EQ(got_sums.data<double>()[2], 0.0);

    // The backward accumulates into a gradient a tenth of its own size: a larger one would swamp
    // the softmax terms (and where softmax is ~1, as with V = 1, dlogits + scale - scale cancels
    // to an ulp of scale that float32 cannot hold relative to a small dlogits).
    const double scale = 1.0 / double(std::max<int64_t>(want.count, 1));
    Tensor dlogits0 = random_f32({N, V}, rng, -0.1 * scale, 0.1 * scale), want_dlogits = f64(dlogits0);
    Tensor dlogits = on_device(dlogits0);
    cuda::cross_entropy_backward(dlogits.data<float>(), logitsd.data<float>(), lse.data<float>(),
                                 targetsd.data<int32_t>(), N, V, kIgnore, float(scale));
    cpu::cross_entropy_backward(want_dlogits.data<double>(), f64(logits).data<double>(), want_lse.data<double>(),
                                targets.data<int32_t>(), N, V, kIgnore, scale);
    EXPECT_CLOSE(on_host(dlogits), want_dlogits, kTol);
  }
}

// The CPU kernel throws on a target outside the vocabulary; the CUDA forward counts such rows for
// the caller to report, leaves them out of the loss, and the backward skips them.
TEST(CudaCrossEntropy, TargetsOutsideTheVocabularyAreCountedAndSkipped) {
  SKIP_WITHOUT_GPU();
  const int64_t N = 4, V = 10;
  Rng rng(62);
  Tensor logits = random_f32({N, V}, rng, -3, 3);
  Tensor targets = Tensor::empty({N}, DType::i32);
  const int32_t t[N] = {3, V, -1, kIgnore};  // one good row, two bad ones, one ignored
  for (int64_t i = 0; i < N; ++i) targets.data<int32_t>()[i] = t[i];
  Tensor logitsd = on_device(logits), targetsd = on_device(targets);
  Tensor lse = Tensor::empty({N}, DType::f32, Device::cuda), sums = Tensor::empty({3}, DType::f64, Device::cuda);
  Tensor dlogits = on_device(Tensor::zeros({N, V}, DType::f32));
  cuda::cross_entropy_forward(lse.data<float>(), sums.data<double>(), nullptr, logitsd.data<float>(), targetsd.data<int32_t>(),
                              N, V, kIgnore);
  cuda::cross_entropy_backward(dlogits.data<float>(), logitsd.data<float>(), lse.data<float>(),
                               targetsd.data<int32_t>(), N, V, kIgnore, 1.0f);
  Tensor s = on_host(sums), lse_h = on_host(lse), d = on_host(dlogits);
  EXPECT_NEAR(s.data<double>()[0], double(lse_h.data<float>()[0]) - double(logits.data<float>()[3]), 1e-12);
  EXPECT_EQ(s.data<double>()[1], 1.0);
  EXPECT_EQ(s.data<double>()[2], 2.0);
  for (int64_t j = V; j < N * V; ++j) EXPECT_EQ(d.data<float>()[j], 0.0f) << "entry " << j;
  EXPECT_GT(std::abs(d.data<float>()[0]), 0.0f);
}

// The backend entry: the mean loss and the count as the CPU entry gives them, targets on the host or
// the device, and the CPU's errors: a bad target names its row; a NaN logit is a NonFiniteError with
// device targets, while with host targets (a training step's) the host does not wait for the sums:
// the NaN stays in the loss on the device, where the trainer's step control finds it.
TEST(CudaCrossEntropy, TheBackendEntryMatchesTheCpuEntryAndRaisesItsErrors) {
  SKIP_WITHOUT_GPU();
  const int64_t N = 6, V = 11;
  Rng rng(63);
  Tensor logits = random_f32({N, V}, rng, -3, 3);
  Tensor targets = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) targets.data<int32_t>()[i] = i == 4 ? kIgnore : int32_t(rng.below(V));
  Tensor loss = Tensor::empty({1}, DType::f32), lse = Tensor::empty({N}, DType::f32);
  const int64_t want_count = backend::cross_entropy_forward(Device::cpu, loss, lse, logits, targets, kIgnore);
  Tensor dloss = Tensor::empty({1}, DType::f32);
  dloss.data<float>()[0] = 0.7f;
  Tensor want_dlogits = Tensor::zeros({N, V}, DType::f32);
  backend::cross_entropy_backward(Device::cpu, want_dlogits, logits, lse, targets, dloss, want_count, kIgnore, false);

  Tensor logitsd = on_device(logits), dlossd = on_device(dloss);
  for (bool targets_on_device : {false, true}) {
    SCOPED_TRACE(targets_on_device ? "targets on the device" : "targets on the host");
    Tensor t = targets_on_device ? on_device(targets) : targets;
    Tensor lossd = on_device(Tensor::zeros({1}, DType::f32)), lsed = on_device(Tensor::zeros({N}, DType::f32));
    Tensor dlogits = on_device(Tensor::zeros({N, V}, DType::f32));
    EXPECT_EQ(backend::cross_entropy_forward(Device::cuda, lossd, lsed, logitsd, t, kIgnore), want_count);
    EXPECT_CLOSE(on_host(lossd), loss, 1e-6);  // a mean of 5 rows, each as the first test bounds it
    backend::cross_entropy_backward(Device::cuda, dlogits, logitsd, lsed, t, dlossd, want_count, kIgnore, false);
    EXPECT_CLOSE(on_host(dlogits), want_dlogits, 1e-6);
  }

  Tensor lossd = on_device(Tensor::zeros({1}, DType::f32)), lsed = on_device(Tensor::zeros({N}, DType::f32));
  Tensor bad = targets.clone();
  bad.data<int32_t>()[2] = int32_t(V);
  try {
    backend::cross_entropy_forward(Device::cuda, lossd, lsed, logitsd, bad, kIgnore);
    ADD_FAILURE() << "a target outside the vocabulary was accepted";
  } catch (const linattn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("target id 11 at row 2"), std::string::npos) << e.what();
  }
  Tensor nan_logits = logits.clone();
  nan_logits.data<float>()[3 * V + 5] = NAN;
  Tensor nand = on_device(nan_logits);
  EXPECT_THROW(backend::cross_entropy_forward(Device::cuda, lossd, lsed, nand, on_device(targets), kIgnore),
               NonFiniteError);
  EXPECT_EQ(backend::cross_entropy_forward(Device::cuda, lossd, lsed, nand, targets, kIgnore), want_count);
  EXPECT_TRUE(std::isnan(on_host(lossd).data<float>()[0])) << "the NaN did not reach the loss";
}

// ops::linear_cross_entropy on the GPU in chunks (13 of 5 rows, host targets as a training batch
// gives them): its loss and gradients against the CPU op's in float32, within kTol of the largest
// entry (the products are cuBLAS's and oneDNN's float32 sums of 24 terms; the loss as above).
TEST(CudaLinearCrossEntropy, ChunksMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(62);
  const int64_t N = 64, V = 50, D = 24;
  const Tensor x = random_f32({N, D}, rng, -1, 1), w = random_f32({V, D}, rng, -1, 1);
  Tensor targets = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) targets.data<int32_t>()[i] = i % 5 == 3 ? kIgnore : int32_t(rng.below(uint64_t(V)));
  auto run = [&](Device device) {
    Variable vx(device == Device::cpu ? x.clone() : on_device(x), true);
    Variable vw = Variable::parameter(device == Device::cpu ? w.clone() : on_device(w),
                                      Tensor::zeros(w.shape(), DType::f32, device));
    Variable loss = ops::linear_cross_entropy(vx, vw, targets, kIgnore, 5 * V * 4);
    const Tensor value = loss.value().to(Device::cpu);
    backward(loss);
    return std::vector<Tensor>{value, vx.grad().to(Device::cpu), vw.grad().to(Device::cpu)};
  };
  const std::vector<Tensor> got = run(Device::cuda), want = run(Device::cpu);
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_CLOSE(got[i], want[i], kTol);
  }
}

// The same op on the GPU given its seed ahead (its backward in the forward pass, as the trainer
// runs it), with host targets (some ignored) and with device targets checked before their upload,
// float32 and bf16 products: the bits of the backward seeded afterwards.
TEST(CudaLinearCrossEntropy, ASeedGivenAheadGivesTheSameBits) {
  SKIP_WITHOUT_GPU();
  Rng rng(63);
  const int64_t N = 64, V = 50, D = 24;
  const Tensor x = random_f32({N, D}, rng, -1, 1), w = random_f32({V, D}, rng, -1, 1);
  Tensor targets = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) targets.data<int32_t>()[i] = int32_t(rng.below(uint64_t(V)));
  Tensor some_ignored = targets.clone();
  for (int64_t i = 3; i < N; i += 7) some_ignored.data<int32_t>()[i] = kIgnore;
  for (bool device_targets : {false, true}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(std::string(device_targets ? "device targets" : "host targets") + (bf16 ? ", bf16 products" : ""));
      auto run = [&](bool ahead) {
        std::optional<backend::CheckedDeviceTokens> checked;
        if (device_targets) checked.emplace();
        const Tensor t = device_targets ? on_device(targets) : some_ignored;
        Variable vx(on_device(x), true);
        Variable vw = Variable::parameter(on_device(w), Tensor::zeros(w.shape(), DType::f32, Device::cuda),
                                          bf16 ? w.to(DType::bf16).to(Device::cuda) : Tensor());
        Tensor seed = on_device(Tensor::empty({1}, DType::f32));
        seed.fill_(0.25);
        Variable loss = ops::linear_cross_entropy(vx, vw, t, kIgnore, 5 * V * 4, ahead ? seed : Tensor());
        const Tensor value = loss.value().to(Device::cpu);
        backward({loss}, {seed});
        return std::vector<Tensor>{value, vx.grad().to(Device::cpu), vw.grad().to(Device::cpu)};
      };
      const std::vector<Tensor> ahead = run(true), after = run(false);
      for (size_t i = 0; i < after.size(); ++i)
        EXPECT_EQ(bitwise_difference(ahead[i], after[i]), "") << "output " << i;
    }
  }
}

}  // namespace
}  // namespace linattn
