// Activation recomputation on the GPU (train.recompute, autograd/checkpoint.h): for every mixer of
// the registry that has its CUDA kernels, the losses and parameter gradients of selective and full
// recomputation are those of none bit for bit, in float32 (the replay runs the same kernels on the
// same values: the forward kernels and cuBLAS give the same bits for the same call).
#include "autograd/checkpoint.h"
#include "kernel_testing.h"
#include "layers/mixer.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

// The layers of the registry's mixers that run on the GPU, and windowed grouped-query attention.
std::vector<std::string> gpu_layers() {
  std::vector<std::string> layers;
  for (const MixerDescriptor* m : all_mixers())
    if (m->missing_kernels(Device::cuda).empty()) layers.push_back(m->name);
  layers.push_back("{mixer: attention, window_size: 3, num_kv_heads: 1}");
  return layers;
}

class CudaRecompute : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaRecompute, SelectiveAndFullGradientsAreThoseOfNoneBitForBit) {
  SKIP_WITHOUT_GPU();
  Model model(testing::two_blocks_of(GetParam()), DType::f32);
  model.params().initialize(3);
  model.params().to(Device::cuda);
  EXPECT_EQ(testing::difference_from_none(model, ops::Recompute::selective), "") << "selective";
  EXPECT_EQ(testing::difference_from_none(model, ops::Recompute::full), "") << "full";
}

INSTANTIATE_TEST_SUITE_P(Layers, CudaRecompute, ::testing::ValuesIn(gpu_layers()), [](const auto& info) {
  return info.param[0] == '{' ? std::string("windowed_gqa_attention") : info.param;
});

}  // namespace
}  // namespace linattn
