// CUDA graphs (core/cuda/graph.h): a model's forward and backward captured once and replayed gives
// the gradients of running it, bit for bit, on whatever tokens its input buffers hold at the replay;
// the memory the capture used is kept for the graph (core/cuda/runtime.h), so a tensor made between
// two replays never lands where a replay writes.
#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda/graph.h"
#include "core/cuda/runtime.h"
#include "kernel_testing.h"
#include "kernels/backend.h"
#include "layers/model.h"
#include "train/config.h"

namespace linattn {
namespace {

// Ends a capture a failed expectation left open, so that the tests after it start clean.
struct CaptureGuard {
  ~CaptureGuard() { cuda::Graph::abandon_capture(); }
};

Tensor random_ids(const Shape& shape, int32_t vocab, uint64_t seed) {
  Rng rng(seed);
  Tensor ids = Tensor::empty(shape, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int32_t>()[i] = int32_t(rng.below(uint64_t(vocab)));
  return ids;
}

TEST(CudaGraph, AReplayedModelStepEqualsRunningItOnTheTokensOfEachReplay) {
  SKIP_WITHOUT_GPU();
  Config c = parse_config("model: {vocab_size: 37, hidden_size: 32, num_heads: 2, chunk_size: 8, num_hidden_layers: 3, "
                          "layers: [gla, {mixer: attention, window_size: 5}, gated_deltanet]}\ntrain: {max_steps: 1}\n",
                          "graph.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  model.params().to(Device::cuda);
  Arena arena(Device::cuda);
  // The step's inputs, in device memory the graph reads at each replay.
  Tensor ids = Tensor::empty({2, 24}, DType::i32, Device::cuda), targets = ids.to(Device::cuda);
  Tensor seed = Tensor::empty({1}, DType::f32, Device::cuda);  // backward's, filled before: a fill uploads
  seed.fill_(1.0);
  auto step = [&] {
    model.params().zero_grad();
    ArenaScope scope(arena);
    backend::CheckedDeviceTokens checked;  // in the vocabulary, every target counted: read on the device
    backward({model.loss(ids, targets)}, {seed});
  };
  auto eager_grads = [&](uint64_t seed) {
    ids.copy_from(random_ids({2, 24}, 37, seed));
    targets.copy_from(random_ids({2, 24}, 37, seed + 100));
    step();
    arena.reset();
    return model.params().grads().all().to(Device::cpu);
  };
  const Tensor first = eager_grads(1), second = eager_grads(2);

  CaptureGuard guard;
  cuda::Graph::begin_capture();
  step();
  cuda::Graph graph = cuda::Graph::end_capture();
  arena.reset();
  EXPECT_GT(graph.operations(), 30u);
  for (uint64_t seed : {2, 1, 2}) {
    SCOPED_TRACE("tokens of seed " + std::to_string(seed));
    ids.copy_from(random_ids({2, 24}, 37, seed));
    targets.copy_from(random_ids({2, 24}, 37, seed + 100));
    model.params().grads().all().fill_(7.0);  // the replay's zero_grad clears it
    graph.launch();
    EXPECT_EQ(testing::compare(model.params().grads().all().to(Device::cpu), seed == 1 ? first : second).max_abs, 0.0);
  }
}

TEST(CudaGraph, TheMemoryACaptureUsedIsTheGraphsUntilItGoes) {
  SKIP_WITHOUT_GPU();
  const size_t bytes = 3 << 20;  // a bucket of its own size: only this test's blocks are in it
  Tensor live = Tensor::empty({int64_t(bytes / 4)}, DType::f32, Device::cuda);
  void* live_at = live.raw();
  void* captured_at = nullptr;
  {
    cuda::Graph graph;
    CaptureGuard guard;
    cuda::Graph::begin_capture();
    {
      Tensor scratch = Tensor::empty({int64_t(bytes / 4)}, DType::f32, Device::cuda);
      captured_at = scratch.raw();
      scratch.zero_();
    }
    graph = cuda::Graph::end_capture();
    live = Tensor();  // live at the capture: the graph may have used it too
    std::vector<Tensor> later;
    for (int i = 0; i < 3; ++i) {
      later.push_back(Tensor::empty({int64_t(bytes / 4)}, DType::f32, Device::cuda));
      EXPECT_NE(later.back().raw(), captured_at) << "a tensor made after the capture took the graph's scratch";
      EXPECT_NE(later.back().raw(), live_at) << "a tensor made after the capture took a block live at the capture";
    }
    graph.launch();
  }
  // The graph gone, its blocks are everyone's again.
  bool reused = false;
  std::vector<Tensor> after;
  for (int i = 0; i < 6; ++i) {
    after.push_back(Tensor::empty({int64_t(bytes / 4)}, DType::f32, Device::cuda));
    reused |= after.back().raw() == captured_at || after.back().raw() == live_at;
  }
  EXPECT_TRUE(reused);
  testing::device_sync();
}

TEST(CudaGraph, ABrokenCaptureThrowsAndLeavesTheStreamWorking) {
  SKIP_WITHOUT_GPU();
  Tensor d = Tensor::zeros({4}, DType::f32, Device::cuda);
  CaptureGuard guard;
  cuda::Graph::begin_capture();
  d.zero_();                              // queued work, then
  EXPECT_THROW(d.to(Device::cpu), Error);  // the host reads the device: refused
  cuda::Graph::abandon_capture();
  d.fill_(2.0);
  EXPECT_EQ(d.to(Device::cpu).data<float>()[3], 2.0f);
}

}  // namespace
}  // namespace linattn
