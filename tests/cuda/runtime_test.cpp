// The device runtime (caching allocator, copies, events), cuBLAS products and parameters moving
// between host and device, each against the CPU. Every test skips without a GPU.
#include "core/cuda/runtime.h"

#include <unistd.h>

#include <filesystem>

#include "autograd/ops.h"
#include "kernels/backend.h"
#include "layers/model.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/optimizer.h"

namespace linattn {
namespace {

#define SKIP_WITHOUT_GPU() \
  do {                     \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

TEST(CudaAllocator, BucketsRoundUp) {
#ifndef LINATTN_CUDA
  GTEST_SKIP() << "built without CUDA";
#endif
  EXPECT_EQ(cuda::bucket_size(1), 512u);
  EXPECT_EQ(cuda::bucket_size(513), 1024u);
  EXPECT_EQ(cuda::bucket_size(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(cuda::bucket_size((size_t(1) << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(cuda::bucket_size((size_t(5) << 20) + 7), size_t(6) << 20);
}

TEST(CudaAllocator, AFreedBlockIsReusedWithoutCudaMalloc) {
  SKIP_WITHOUT_GPU();
  const size_t bytes = (size_t(3) << 20) + 100;  // an odd size: a bucket of its own in this test
  void* first = cuda::allocate(bytes);
  const cuda::MemoryStats live = cuda::memory_stats();
  EXPECT_GE(live.in_use, cuda::bucket_size(bytes));
  cuda::release(first);
  const cuda::MemoryStats freed = cuda::memory_stats();
  EXPECT_EQ(freed.in_use, live.in_use - cuda::bucket_size(bytes));
  EXPECT_GE(freed.cached, cuda::bucket_size(bytes));
  // The same bucket again (a slightly different size): the cached block, no cudaMalloc.
  void* again = cuda::allocate(bytes - 50);
  EXPECT_EQ(again, first);
  EXPECT_EQ(cuda::memory_stats().device_mallocs, freed.device_mallocs);
  cuda::release(again);
  // empty_cache gives the cached blocks back; the next request calls cudaMalloc.
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_stats().cached, 0u);
  void* fresh = cuda::allocate(bytes);
  EXPECT_EQ(cuda::memory_stats().device_mallocs, freed.device_mallocs + 1);
  cuda::release(fresh);
}

TEST(CudaRuntime, TensorsRoundTripAndFill) {
  SKIP_WITHOUT_GPU();
  Rng rng(5);
  Tensor host = testing::random_tensor({257, 3}, rng, -1, 1, DType::f32);
  Tensor dev = host.to(Device::cuda);
  EXPECT_EQ(dev.device(), Device::cuda);
  Tensor dev2 = dev.clone();  // device to device
  EXPECT_CLOSE(dev2.to(Device::cpu), host, 0.0);
  dev2.fill_(2.5);
  Tensor want = Tensor::empty({257, 3}, DType::f32);
  want.fill_(2.5);
  EXPECT_CLOSE(dev2.to(Device::cpu), want, 0.0);
  dev2.zero_();
  EXPECT_EQ(testing::max_abs(dev2.to(Device::cpu)), 0.0);
  EXPECT_EQ(Tensor::zeros({1}, DType::f32).to(Device::cuda).item(), 0.0);
}

TEST(CudaRuntime, EventsTimeTheStream) {
  SKIP_WITHOUT_GPU();
  cuda::Event start, stop;
  start.record();
  Tensor::zeros({1 << 24}, DType::f32, Device::cuda);  // 64 MiB of memset between the events
  stop.record();
  EXPECT_GE(stop.ms_since(start), 0.0f);
}

// Every transpose through the backend's CUDA gemm (cuBLAS, float32 accumulation) against the CPU
// entry, at sizes that are not multiples of any tile. float32 products of K = 67 terms of size ~1:
// errors ~sqrt(K) * 6e-8 relative, so 1e-5 has a wide margin; TF32 keeps 10 mantissa bits
// (~5e-4 per product), so 5e-3. bf16 products take bf16 operands: tests/cuda/gemm_bf16_test.cpp.
TEST(CudaMatmul, GemmMatchesTheCpuForEveryTranspose) {
  SKIP_WITHOUT_GPU();
  Rng rng(2);
  const int64_t M = 37, N = 53, K = 67;
  for (MatmulPrecision precision : {MatmulPrecision::f32, MatmulPrecision::tf32})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(std::string(matmul_precision_name(precision)) + ", ta " + std::to_string(ta) + ", tb " +
                     std::to_string(tb));
        Tensor a = testing::random_tensor(ta ? Shape{K, M} : Shape{M, K}, rng, -1, 1, DType::f32);
        Tensor b = testing::random_tensor(tb ? Shape{N, K} : Shape{K, N}, rng, -1, 1, DType::f32);
        Tensor c = testing::random_tensor({M, N}, rng, -1, 1, DType::f32);
        Tensor want = c.clone();
        backend::gemm(Device::cpu, ta, tb, M, N, K, 1.5, a, b, 0.5, want);
        Tensor got = c.to(Device::cuda);
        backend::set_matmul_precision(precision);
        backend::gemm(Device::cuda, ta, tb, M, N, K, 1.5, a.to(Device::cuda), b.to(Device::cuda), 0.5, got);
        backend::set_matmul_precision(MatmulPrecision::f32);
        const double tolerance[] = {1e-5, 5e-3};
        EXPECT_CLOSE(got.to(Device::cpu), want, tolerance[int(precision)]);
      }
}

// ops::linear forward and backward (dx and dW: the two other products) on the GPU against the CPU.
TEST(CudaMatmul, LinearForwardAndBackwardMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(3);
  Tensor x = testing::random_tensor({2, 5, 24}, rng, -1, 1, DType::f32);
  Tensor w = testing::random_tensor({40, 24}, rng, -1, 1, DType::f32);
  Tensor up = testing::random_tensor({2, 5, 40}, rng, -1, 1, DType::f32);
  Variable xc(x, true), wc(w, true);
  Variable yc = ops::linear(xc, wc);
  backward({yc}, {up});
  Variable xd(x.to(Device::cuda), true), wd(w.to(Device::cuda), true);
  Variable yd = ops::linear(xd, wd);
  EXPECT_EQ(yd.device(), Device::cuda);
  backward({yd}, {up.to(Device::cuda)});
  EXPECT_CLOSE(yd.value().to(Device::cpu), yc.value(), 1e-5);
  EXPECT_CLOSE(xd.grad().to(Device::cpu), xc.grad(), 1e-5);
  EXPECT_CLOSE(wd.grad().to(Device::cpu), wc.grad(), 1e-5);
}

// A tiny model's parameters go to the device and come back bit for bit; its gradient buffer there
// starts at zero.
TEST(CudaParameters, RoundTripHostDeviceHost) {
  SKIP_WITHOUT_GPU();
  Config c = parse_config(R"(model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 2, num_heads: 2,
  layers: [{mixer: attention}, {mixer: attention, window_size: 3}]}
train: {max_steps: 1}
)",
                          "tiny.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(9);
  const Tensor before = model.params().values().all().clone();
  model.params().to(Device::cuda);
  EXPECT_EQ(model.params().values().all().device(), Device::cuda);
  EXPECT_EQ(model.params().grads().all().device(), Device::cuda);
  EXPECT_EQ(model.params()[0].device(), Device::cuda);
  EXPECT_EQ(testing::max_abs(model.params().grads().all().to(Device::cpu)), 0.0);
  model.params().to(Device::cpu);
  EXPECT_CLOSE(model.params().values().all(), before, 0.0);
}

// Checkpoints are float32 on the host: one written from a model and optimizer on the GPU loads into a
// model on the CPU with the same values, and back onto the GPU.
TEST(CudaCheckpoint, WrittenFromTheGpuResumesOnEitherDevice) {
  SKIP_WITHOUT_GPU();
  Config c = parse_config(R"(model: {vocab_size: 11, hidden_size: 8, num_hidden_layers: 1, num_heads: 2, mixer: attention}
train: {max_steps: 1}
)",
                          "tiny.yaml");
  Model gpu(c.model, DType::f32);
  gpu.params().initialize(4);
  const Tensor values = gpu.params().values().all().clone();
  gpu.params().to(Device::cuda);
  AdamW gpu_opt(gpu.params(), c.train);
  gpu_opt.m().all().fill_(0.25);
  gpu_opt.set_steps(3);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("linattn-cuda-ckpt-" + std::to_string(getpid()) + ".h5")).string();
  TrainState state;
  state.step = 3;
  save_checkpoint(path, c, gpu, &gpu_opt, state);

  Model cpu(c.model, DType::f32);
  AdamW cpu_opt(cpu.params(), c.train);
  load_checkpoint(path, c, cpu, &cpu_opt, nullptr, nullptr);
  EXPECT_CLOSE(cpu.params().values().all(), values, 0.0);
  for (size_t i = 0; i < cpu_opt.m().size(); ++i) {  // entry by entry: the padding between them is not saved
    Tensor quarter = Tensor::empty(cpu_opt.m()[int(i)].shape(), DType::f32);
    quarter.fill_(0.25);
    EXPECT_CLOSE(cpu_opt.m()[int(i)], quarter, 0.0);
  }
  EXPECT_EQ(cpu_opt.steps(), 3);

  Model back(c.model, DType::f32);
  back.params().to(Device::cuda);
  load_checkpoint(path, c, back, nullptr, nullptr, nullptr);
  EXPECT_CLOSE(back.params().values().all().to(Device::cpu), values, 0.0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace linattn
