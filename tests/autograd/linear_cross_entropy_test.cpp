// ops::linear_cross_entropy: the loss of the logits x W^T made a chunk of rows at a time. Its
// gradients against float64 finite differences with several chunks; with one chunk, the results of
// cross_entropy(linear()) bit for bit; with many, the same within float64's roundings and float32's;
// in an arena, its peak holds one chunk's logits, not the batch's; given its seed ahead (the backward
// in the forward pass), the results without one bit for bit.
#include "autograd/ops.h"
#include "gradcheck.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::bitwise_difference;
using testing::random_tensor;

// Targets in [0, V), some of them the ignore index.
Tensor targets_for(int64_t N, int64_t V, Rng& rng) {
  Tensor t = Tensor::empty({N}, DType::i32);
  for (int64_t i = 0; i < N; ++i) t.data<int32_t>()[i] = i % 5 == 3 ? -100 : int32_t(rng.below(uint64_t(V)));
  return t;
}

// The loss and the gradients of x and W, by the chunked op (chunk_bytes) or by cross_entropy(linear()).
std::vector<Tensor> loss_and_grads(const Tensor& x, const Tensor& w, const Tensor& targets, size_t chunk_bytes,
                                   bool chunked) {
  Variable vx(x, true), vw = Variable::parameter(w, Tensor::zeros(w.shape(), w.dtype()));
  Variable loss = chunked ? ops::linear_cross_entropy(vx, vw, targets, -100, chunk_bytes)
                          : ops::cross_entropy(ops::linear(vx, vw), targets);
  const Tensor value = loss.value().clone();
  backward(loss);
  return {value, vx.grad().clone(), vw.grad().clone()};
}

TEST(LinearCrossEntropy, GradientsMatchFiniteDifferencesAcrossChunks) {
  Rng rng(1);
  const Tensor targets = targets_for(2 * 7, 9, rng);
  // 3 rows of 9 float64 logits per chunk: 5 chunks, the last one short.
  testing::expect_gradients_match(
      [&](const std::vector<Variable>& v) { return ops::linear_cross_entropy(v[0], v[1], targets, -100, 3 * 9 * 8); },
      {random_tensor({2, 7, 6}, rng), random_tensor({9, 6}, rng)}, rng);
}

TEST(LinearCrossEntropy, OneChunkIsCrossEntropyOfLinearBitForBit) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    Rng rng(2);
    const Tensor x = random_tensor({12, 16}, rng, -1, 1, dt), w = random_tensor({33, 16}, rng, -1, 1, dt);
    const Tensor targets = targets_for(12, 33, rng);
    const std::vector<Tensor> chunked = loss_and_grads(x, w, targets, ops::kLossChunkBytes, true),
                              plain = loss_and_grads(x, w, targets, ops::kLossChunkBytes, false);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(bitwise_difference(chunked[i], plain[i]), "") << "output " << i;
  }
}

// Chunks of 5 rows over 64 (13 calls): the same loss and gradients up to the order of the sums
// (float64: 1e-12 relative; float32: 1e-5). That it made chunks, ThePeakHoldsOneChunkOfLogits shows.
TEST(LinearCrossEntropy, ManyChunksGiveTheSameLossAndGradients) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    Rng rng(3);
    const Tensor x = random_tensor({4, 16, 24}, rng, -1, 1, dt), w = random_tensor({50, 24}, rng, -1, 1, dt);
    const Tensor targets = targets_for(64, 50, rng);
    const size_t five_rows = 5 * 50 * dtype_size(dt);
    const std::vector<Tensor> chunked = loss_and_grads(x, w, targets, five_rows, true),
                              plain = loss_and_grads(x, w, targets, five_rows, false);
    const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_CLOSE(chunked[i], plain[i], tol);
  }
}

// The loss and the gradients of x and W by the chunked op, seeded with `seed_value`: the seed given
// to the op ahead (its backward runs in the forward pass) or only to backward. w_bf16: the weight's
// bf16 copy (bf16 products), or undefined.
std::vector<Tensor> seeded_loss_and_grads(const Tensor& x, const Tensor& w, const Tensor& w_bf16,
                                          const Tensor& targets, size_t chunk_bytes, double seed_value, bool ahead) {
  Variable vx(x, true), vw = Variable::parameter(w, Tensor::zeros(w.shape(), w.dtype()), w_bf16);
  Tensor seed = Tensor::empty({1}, x.dtype());
  seed.fill_(seed_value);
  Variable loss = ops::linear_cross_entropy(vx, vw, targets, -100, chunk_bytes, ahead ? seed : Tensor());
  const Tensor value = loss.value().clone();
  backward({loss}, {seed});
  return {value, vx.grad().clone(), vw.grad().clone()};
}

// Chunks of 5 rows over 64 (13 chunks), some targets ignored, a seed of 0.375: float64, float32, and
// float32 with bf16 products (the logits' gradient written in bf16), the same bits either way.
TEST(LinearCrossEntropy, ASeedGivenAheadGivesTheSameBits) {
  for (DType dt : {DType::f64, DType::f32}) {
    for (bool bf16 : {false, true}) {
      if (bf16 && dt != DType::f32) continue;
      SCOPED_TRACE(std::string(dtype_name(dt)) + (bf16 ? " with bf16 products" : ""));
      Rng rng(5);
      const Tensor x = random_tensor({4, 16, 24}, rng, -1, 1, dt), w = random_tensor({50, 24}, rng, -1, 1, dt);
      const Tensor w_bf16 = bf16 ? w.to(DType::bf16) : Tensor();
      const Tensor targets = targets_for(64, 50, rng);
      const size_t five_rows = 5 * 50 * dtype_size(dt);
      const std::vector<Tensor> ahead = seeded_loss_and_grads(x, w, w_bf16, targets, five_rows, 0.375, true),
                                after = seeded_loss_and_grads(x, w, w_bf16, targets, five_rows, 0.375, false);
      for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(bitwise_difference(ahead[i], after[i]), "") << "output " << i;
      EXPECT_GT(testing::max_abs(ahead[2]), 0.0) << "the weight's gradient was not made";
    }
  }
}

// The backward ran ahead for one seed; given another gradient, the node refuses rather than pass on
// gradients made for the wrong one.
TEST(LinearCrossEntropy, ABackwardGivenAnotherGradientThanItsSeedIsAnError) {
  Rng rng(6);
  const Tensor targets = targets_for(8, 10, rng);
  Variable vx(random_tensor({8, 6}, rng), true), vw(random_tensor({10, 6}, rng), true);
  Tensor seed = Tensor::empty({1}, DType::f64), other = Tensor::empty({1}, DType::f64);
  seed.fill_(1.0);
  other.fill_(1.0);
  Variable loss = ops::linear_cross_entropy(vx, vw, targets, -100, ops::kLossChunkBytes, seed);
  try {
    backward({loss}, {other});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but the loss was given another gradient"), std::string::npos) << e.what();
  }
  clear_tape();
}

// The peak of a forward and backward in an arena: the chunked op holds one chunk's logits and their
// gradient (8 rows here) where cross_entropy(linear()) holds all 256 rows' logits and gradient.
TEST(LinearCrossEntropy, ThePeakHoldsOneChunkOfLogits) {
  Rng rng(4);
  const int64_t N = 256, V = 1000, D = 8;
  const Tensor x = random_tensor({N, D}, rng, -1, 1, DType::f32), w = random_tensor({V, D}, rng, -1, 1, DType::f32);
  const Tensor targets = targets_for(N, V, rng);
  auto peak = [&](bool chunked) {
    Arena arena;
    {
      ArenaScope scope(arena);
      loss_and_grads(x, w, targets, 8 * V * 4, chunked);
    }
    return arena.high_water();
  };
  const size_t all_logits = size_t(N * V * 4);
  EXPECT_GE(peak(false), 2 * all_logits);
  EXPECT_LE(peak(true), all_logits / 8) << "the logits of " << N << " rows are never held at once";
}

}  // namespace
}  // namespace linattn
