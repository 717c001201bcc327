// The emulated device itself (emulation/device.cpp, runtime.cpp): kernels run with the semantics
// the project's CUDA code relies on, and the defects a GPU would expose (a missing barrier, a
// divergent one, a host pointer, a bad launch, a missing stream synchronisation) fail here too,
// with a message that names the kernel.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/launch.cuh"

namespace {

// ---- kernels ----

__global__ void add_one(float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0f;
}

// Sum of a block's 256 values: warp shuffles, then shared memory between warps.
__global__ void block_sum(float* out, const float* x) {
  __shared__ float partial[8];
  float v = x[blockIdx.x * 256 + threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (int w = 0; w < 8; ++w) s += partial[w];
    out[blockIdx.x] = s;
  }
}

// Reverses x within a block through shared memory; `sync` false leaves the barrier out.
__global__ void reverse_block(float* y, const float* x, bool sync) {
  LINATTN_DYNAMIC_SHARED(float, tile);
  tile[threadIdx.x] = x[threadIdx.x];
  if (sync) __syncthreads();
  y[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

__global__ void divergent_barrier(float* x) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    x[threadIdx.x] = 1.0f;
    __syncthreads();
  }
}

__global__ void early_exit_shuffle(float* x) {
  if (threadIdx.x == 5) return;
  x[threadIdx.x] = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
}

__global__ void shared_overrun(float* x) {
  LINATTN_DYNAMIC_SHARED(float, tile);
  tile[threadIdx.x + 1] = x[threadIdx.x];  // one past the end for the last thread
  __syncthreads();
  x[threadIdx.x] = tile[threadIdx.x];
}

__global__ void lanes_and_votes(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  out[threadIdx.x * 4 + 0] = __shfl_sync(0xffffffffu, lane * 10, 3);
  out[threadIdx.x * 4 + 1] = __shfl_up_sync(0xffffffffu, lane, 2);
  out[threadIdx.x * 4 + 2] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  out[threadIdx.x * 4 + 3] = unsigned(__all_sync(0xffffffffu, lane < 32)) * 2 + unsigned(__any_sync(0xffffffffu, lane == 31));
}

__global__ void racy_accumulate(float* out) {
  // Every thread adds into one place without an atomic: on a GPU the result depends on timing;
  // here the two schedules agree (threads do not interleave between barriers), so no error: the
  // emulation cannot see this race. It is here to document that limit.
  out[0] += float(threadIdx.x);
}

// ---- helpers ----

struct Device {
  float* p = nullptr;
  explicit Device(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess); }
  ~Device() { cudaFree(p); }
};

std::vector<float> read(const float* dev, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

void write(float* dev, const std::vector<float>& h) {
  EXPECT_EQ(cudaMemcpy(dev, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The error the next synchronisation returns, and its message.
std::string sync_error() {
  const cudaError_t e = cudaDeviceSynchronize();
  cudaGetLastError();
  return e == cudaSuccess ? "" : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

}  // namespace

TEST(EmulatedDevice, RunsAKernelWhenTheStreamIsWaitedOn) {
  Device x(1000);
  write(x.p, std::vector<float>(1000, 2.0f));
  LINATTN_LAUNCH(4, 256, 0, nullptr, add_one)(x.p, 1000);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const std::vector<float> h = read(x.p, 1000);
  for (float v : h) ASSERT_EQ(v, 3.0f);
}

TEST(EmulatedDevice, ShufflesAndSharedMemoryReduceABlock) {
  Device x(512), out(2);
  std::vector<float> h(512);
  for (int i = 0; i < 512; ++i) h[size_t(i)] = float(i);
  write(x.p, h);
  LINATTN_LAUNCH(2, 256, 0, nullptr, block_sum)(out.p, x.p);
  const std::vector<float> s = read(out.p, 2);
  EXPECT_EQ(s[0], 255.0f * 256 / 2);
  EXPECT_EQ(s[1], (256.0f + 511.0f) * 256 / 2);
}

TEST(EmulatedDevice, WarpOperationsFollowCudaSemantics) {
  unsigned* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 64 * 4 * sizeof(unsigned)), cudaSuccess);
  LINATTN_LAUNCH(1, 64, 0, nullptr, lanes_and_votes)(out);
  std::vector<unsigned> h(64 * 4);
  ASSERT_EQ(cudaMemcpy(h.data(), out, h.size() * sizeof(unsigned), cudaMemcpyDeviceToHost), cudaSuccess);
  unsigned ballot = 0;
  for (unsigned l = 0; l < 32; l += 3) ballot |= 1u << l;
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned lane = t % 32;
    EXPECT_EQ(h[t * 4 + 0], 30u) << t;
    EXPECT_EQ(h[t * 4 + 1], lane >= 2 ? lane - 2 : lane) << t;
    EXPECT_EQ(h[t * 4 + 2], ballot) << t;
    EXPECT_EQ(h[t * 4 + 3], 3u) << t;
  }
  cudaFree(out);
}

TEST(EmulatedDevice, AMissingSyncthreadsIsARace) {
  Device x(128), y(128);
  std::vector<float> h(128);
  for (int i = 0; i < 128; ++i) h[size_t(i)] = float(i);
  write(x.p, h);
  LINATTN_LAUNCH(1, 128, 128 * sizeof(float), nullptr, reverse_block)(y.p, x.p, true);
  EXPECT_EQ(sync_error(), "");
  EXPECT_EQ(read(y.p, 128)[0], 127.0f);
  LINATTN_LAUNCH(1, 128, 128 * sizeof(float), nullptr, reverse_block)(y.p, x.p, false);
  const std::string e = sync_error();
  EXPECT_NE(e.find("cudaErrorLaunchFailure"), std::string::npos) << e;
  EXPECT_NE(e.find("'reverse_block'"), std::string::npos) << e;
  EXPECT_NE(e.find("warp 0 first and last warp first give different results"), std::string::npos) << e;
}

TEST(EmulatedDevice, ABarrierNotEveryThreadReachesIsAnError) {
  Device x(32);
  LINATTN_LAUNCH(1, 32, 0, nullptr, divergent_barrier)(x.p);
  const std::string e = sync_error();
  EXPECT_NE(e.find("'divergent_barrier'"), std::string::npos) << e;
  EXPECT_NE(e.find("another __syncthreads"), std::string::npos) << e;
  EXPECT_NE(e.find("device_test.cpp"), std::string::npos) << e;
}

TEST(EmulatedDevice, AShuffleWithAnExitedLaneIsAnError) {
  Device x(32);
  write(x.p, std::vector<float>(32, 1.0f));
  LINATTN_LAUNCH(1, 32, 0, nullptr, early_exit_shuffle)(x.p);
  const std::string e = sync_error();
  EXPECT_NE(e.find("'early_exit_shuffle'"), std::string::npos) << e;
  EXPECT_NE(e.find("lane 5, which has exited"), std::string::npos) << e;
}

// The threads of a failed block stop in the middle of their stacks, which the next launch reuses:
// under AddressSanitizer their frames' poisoned redzones must not be left for the next launch's
// threads to trip over.
TEST(EmulatedDevice, LaunchesAfterAFailedBlockRunCleanly) {
  Device x(32);
  write(x.p, std::vector<float>(32, 1.0f));
  LINATTN_LAUNCH(1, 32, 0, nullptr, divergent_barrier)(x.p);
  EXPECT_NE(sync_error(), "");
  LINATTN_LAUNCH(1, 32, 0, nullptr, early_exit_shuffle)(x.p);
  EXPECT_NE(sync_error(), "");
  Device y(512), out(2);
  std::vector<float> h(512, 1.0f);
  write(y.p, h);
  LINATTN_LAUNCH(2, 256, 0, nullptr, block_sum)(out.p, y.p);
  EXPECT_EQ(sync_error(), "");
  EXPECT_EQ(read(out.p, 2), std::vector<float>(2, 256.0f));
}

TEST(EmulatedDevice, LaunchLimitsFailAsOnTheHardware) {
  Device x(4096);
  LINATTN_LAUNCH(1, 2048, 0, nullptr, add_one)(x.p, 4096);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  LINATTN_LAUNCH(dim3(1, 65536), 32, 0, nullptr, add_one)(x.p, 4096);
  const cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidConfiguration);
  EXPECT_NE(std::string(cudaGetErrorString(e)).find("65535"), std::string::npos) << cudaGetErrorString(e);
  // 60 KiB of dynamic shared memory needs the attribute; with it, up to 227 KiB.
  LINATTN_LAUNCH(1, 128, 60 * 1024, nullptr, reverse_block)(x.p, x.p, true);
  const cudaError_t s = cudaGetLastError();
  EXPECT_EQ(s, cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(s)).find("cudaFuncSetAttribute"), std::string::npos);
  ASSERT_EQ(cudaFuncSetAttribute(reverse_block, cudaFuncAttributeMaxDynamicSharedMemorySize, 60 * 1024), cudaSuccess);
  LINATTN_LAUNCH(1, 128, 60 * 1024, nullptr, reverse_block)(x.p, x.p, true);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(sync_error(), "");
  EXPECT_EQ(cudaFuncSetAttribute(reverse_block, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(EmulatedDevice, AHostPointerArgumentIsRefusedNamingTheKernel) {
  std::vector<float> host(64);
  LINATTN_LAUNCH(1, 64, 0, nullptr, add_one)(host.data(), 64);
  const cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidValue);
  const std::string m = cudaGetErrorString(e);
  EXPECT_NE(m.find("'add_one'"), std::string::npos) << m;
  EXPECT_NE(m.find("argument 1"), std::string::npos) << m;
}

TEST(EmulatedDevice, WritingPastDynamicSharedMemoryIsCaught) {
  Device x(64);
#if defined(__SANITIZE_ADDRESS__)  // AddressSanitizer stops the process at the faulty line
  EXPECT_DEATH(
      {
        LINATTN_LAUNCH(1, 64, 64 * sizeof(float), nullptr, shared_overrun)(x.p);
        cudaDeviceSynchronize();
      },
      "heap-buffer-overflow");
#else  // the emulation's guard bytes after the buffer name the kernel
  LINATTN_LAUNCH(1, 64, 64 * sizeof(float), nullptr, shared_overrun)(x.p);
  const std::string e = sync_error();
  EXPECT_NE(e.find("past the end of its 256 bytes of dynamic shared memory (at byte 256)"), std::string::npos) << e;
#endif
}

TEST(EmulatedDevice, AnAsyncCopyToTheHostHasNotHappenedBeforeTheSync) {
  Device x(16);
  write(x.p, std::vector<float>(16, 7.0f));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::vector<float> h(16, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(h.data(), x.p, 16 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(h[0], 0.0f);  // stale: nothing waited for the stream
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(h[0], 7.0f);
  cudaStreamDestroy(s);
}

TEST(EmulatedDevice, ALegacyStreamUploadIsNotOrderedBeforeANonBlockingStream) {
  Device x(64);
  write(x.p, std::vector<float>(64, 0.0f));
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<float> ones(64, 1.0f);
  ASSERT_EQ(cudaMemcpy(x.p, ones.data(), 64 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  LINATTN_LAUNCH(1, 64, 0, s, add_one)(x.p, 64);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<float> h(64);
  ASSERT_EQ(cudaMemcpyAsync(h.data(), x.p, 64 * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(h[0], 1.0f);  // the kernel ran on the zeros: the upload had not landed
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(read(x.p, 64)[0], 1.0f);  // and then the upload overwrote its result
  cudaStreamDestroy(s);
}

TEST(EmulatedDevice, EventsOrderStreams) {
  Device x(64);
  write(x.p, std::vector<float>(64, 0.0f));
  cudaStream_t a, b;
  cudaEvent_t e;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  LINATTN_LAUNCH(1, 64, 0, a, add_one)(x.p, 64);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e), cudaSuccess);
  std::vector<float> h(64, -1.0f);
  ASSERT_EQ(cudaMemcpyAsync(h.data(), x.p, 64 * sizeof(float), cudaMemcpyDeviceToHost, b), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(h[0], 1.0f);
  cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(EmulatedDevice, CopiesCheckTheirKindAndRange) {
  Device x(16);
  std::vector<float> h(32);
  EXPECT_EQ(cudaMemcpy(h.data(), x.p, 16 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("destination"), std::string::npos);
  EXPECT_EQ(cudaMemcpy(h.data(), x.p, 32 * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_NE(std::string(cudaGetErrorString(cudaErrorInvalidValue)).find("runs past the end"), std::string::npos);
  cudaGetLastError();
}

TEST(EmulatedDevice, FreshAndFreedMemoryIsPoisoned) {
  float* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 4 * sizeof(float)), cudaSuccess);
  std::vector<float> h(4);
  ASSERT_EQ(cudaMemcpy(h.data(), p, sizeof(float) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::isnan(h[0]));
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(EmulatedDevice, DevicesArePerHostThread) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  ASSERT_GE(n, 2);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  int d = -1;
  cudaGetDevice(&d);
  EXPECT_EQ(d, 1);
  EXPECT_EQ(cudaSetDevice(n), cudaErrorInvalidDevice);
  cudaGetLastError();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(EmulatedDevice, UnorderedWritesToOnePlaceAreBeyondTheEmulation) {
  Device x(1);
  write(x.p, {0.0f});
  LINATTN_LAUNCH(1, 64, 0, nullptr, racy_accumulate)(x.p);
  EXPECT_EQ(sync_error(), "");
  EXPECT_EQ(read(x.p, 1)[0], 63.0f * 64 / 2);
}
