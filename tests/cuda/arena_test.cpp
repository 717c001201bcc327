// The freeing arena (core/memory.h) on the device: slices of one block of device memory go back to
// it when their last tensor goes, on the host's bookkeeping, while the kernels that used them are
// queued on the stream. A model step in it, every freed slice poisoned with NaN (queued after its
// last use), gives the gradients of the same step on plain device allocations bit for bit.
#include <algorithm>
#include <cmath>

#include "kernel_testing.h"
#include "layers/mixer.h"
#include "layers/model.h"
#include "train/config.h"

namespace linattn {
namespace {

TEST(CudaArena, AFreedSliceIsReusedOnTheDevice) {
  SKIP_WITHOUT_GPU();
  Arena arena(Device::cuda, 1 << 20);
  arena.poison_freed(true);
  ArenaScope scope(arena);
  Tensor a = Tensor::scratch({1000}, DType::f32, Device::cuda);
  EXPECT_EQ(a.device(), Device::cuda);
  const void* at = a.raw();
  a.fill_(1.0);
  a = Tensor();
  Tensor b = Tensor::scratch({1000}, DType::f32, Device::cuda);
  EXPECT_EQ(b.raw(), at);
  EXPECT_TRUE(std::isnan(b.to(Device::cpu).data<float>()[0]));  // the poison, queued after a's fill
  EXPECT_EQ(arena.high_water(), align_up(4000));
  EXPECT_EQ(arena.allocated(), 2 * align_up(4000));
}

TEST(CudaArena, AModelStepInTheFreeingArenaEqualsPlainAllocationsBitForBit) {
  SKIP_WITHOUT_GPU();
  std::string layers;
  for (const MixerDescriptor* m : all_mixers())
    if (!m->attention && m->missing_kernels(Device::cuda).empty()) layers += m->name + ", ";
  Config c = parse_config("model: {vocab_size: 37, hidden_size: 32, num_heads: 2, chunk_size: 8, num_hidden_layers: " +
                              std::to_string(std::count(layers.begin(), layers.end(), ',') + 1) + ", layers: [" +
                              layers + "{mixer: attention, window_size: 5}]}\ntrain: {max_steps: 1}\n",
                          "arena.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  model.params().to(Device::cuda);
  Rng rng(9);
  Tensor ids = Tensor::empty({2, 24}, DType::i32), targets = Tensor::empty({2, 24}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(37));
    targets.data<int32_t>()[i] = int32_t(rng.below(37));
  }
  ids.data<int32_t>()[30] = 36;
  const ops::Segments segments = ops::Segments::starting_at(ids, 36, Device::cuda);
  model.params().zero_grad();
  backward(model.loss(ids, targets, segments));
  const Tensor plain = model.params().grads().all().to(Device::cpu);

  Arena arena(Device::cuda);
  arena.poison_freed(true);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    model.params().zero_grad();
    {
      ArenaScope scope(arena);
      backward(model.loss(ids, targets, segments));
    }
    EXPECT_EQ(testing::compare(model.params().grads().all().to(Device::cpu), plain).max_abs, 0.0);
    EXPECT_EQ(arena.used(), 0u);
    EXPECT_LT(4 * arena.high_water(), 3 * arena.allocated())
        << "peak " << arena.high_water() << " bytes of " << arena.allocated() << " allocated";
    arena.reset();
    EXPECT_EQ(arena.blocks(), 1u);
  }
}

}  // namespace
}  // namespace linattn
