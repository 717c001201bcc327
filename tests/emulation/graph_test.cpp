// The emulated CUDA graphs (emulation/include/cuda_runtime.h): what a stream captures runs only when
// the graph is launched, as often as it is launched, in the order captured, as one stream operation;
// what a capture cannot hold (a copy from or to host memory, a wait for the capturing stream or the
// device, an event) is refused and invalidates the capture, as on a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_emulation/counters.h"

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << cudaGetErrorString(cudaGetLastError())

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(s); }
};

std::vector<float> read(const float* device, size_t n) {
  std::vector<float> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(EmulatedGraph, ACaptureRunsNothingAndEachLaunchRunsAllOfItInOrder) {
  Stream st;
  float *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, 16 * sizeof(float)));
  CUDA_OK(cudaMalloc(&b, 16 * sizeof(float)));
  CUDA_OK(cudaMemsetAsync(a, 0, 16 * sizeof(float), st.s));
  CUDA_OK(cudaMemsetAsync(b, 0, 16 * sizeof(float), st.s));
  CUDA_OK(cudaStreamSynchronize(st.s));

  CUDA_OK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeRelaxed));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_OK(cudaStreamIsCapturing(st.s, &status));
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  // b = a, then a = 0x3f bytes: a replay copies the previous replay's a.
  CUDA_OK(cudaMemcpyAsync(b, a, 16 * sizeof(float), cudaMemcpyDeviceToDevice, st.s));
  CUDA_OK(cudaMemsetAsync(a, 0x3f, 16 * sizeof(float), st.s));
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(st.s, &graph));
  ASSERT_NE(graph, nullptr);
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 2u);
  CUDA_OK(cudaStreamSynchronize(st.s));
  EXPECT_EQ(read(a, 16)[0], 0.0f) << "the captured memset ran at the capture";

  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  const cuda_emu::Counters before = cuda_emu::counters();
  CUDA_OK(cudaGraphLaunch(exec, st.s));
  const cuda_emu::Counters launched = cuda_emu::counters() - before;
  EXPECT_EQ(launched.graph_launches, 1);
  EXPECT_EQ(launched.stream_operations(), 1) << "a launch is one stream operation";
  CUDA_OK(cudaStreamSynchronize(st.s));
  float set;
  std::memset(&set, 0x3f, sizeof set);
  EXPECT_EQ(read(a, 16)[3], set);
  EXPECT_EQ(read(b, 16)[3], 0.0f) << "the copy ran after the memset, not in the captured order";
  CUDA_OK(cudaGraphLaunch(exec, st.s));
  CUDA_OK(cudaStreamSynchronize(st.s));
  EXPECT_EQ(read(b, 16)[3], set) << "the second launch did not run the copy again";
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  cudaFree(a);
  cudaFree(b);
}

TEST(EmulatedGraph, WhatACaptureCannotHoldIsRefusedAndInvalidatesIt) {
  Stream st;
  float* d = nullptr;
  CUDA_OK(cudaMalloc(&d, 4 * sizeof(float)));
  float host[4] = {1, 2, 3, 4};
  struct Case {
    const char* name;
    const char* named;  // in the error of cudaStreamEndCapture
    cudaError_t (*call)(cudaStream_t, float*, float*);
  };
  const Case cases[] = {
      {"a copy from host memory", "cudaMemcpyAsync from host memory",
       [](cudaStream_t s, float* d, float* h) { return cudaMemcpyAsync(d, h, 16, cudaMemcpyHostToDevice, s); }},
      {"a copy to host memory", "cudaMemcpyAsync to host memory",
       [](cudaStream_t s, float* d, float* h) { return cudaMemcpyAsync(h, d, 16, cudaMemcpyDeviceToHost, s); }},
      {"a wait for the stream", "cudaStreamSynchronize", [](cudaStream_t s, float*, float*) { return cudaStreamSynchronize(s); }},
      {"a wait for the device", "cudaDeviceSynchronize", [](cudaStream_t, float*, float*) { return cudaDeviceSynchronize(); }},
      {"cudaFree", "cudaFree", [](cudaStream_t, float* d, float*) { return cudaFree(d); }},
      {"an event", "cudaEventRecord", [](cudaStream_t s, float*, float*) {
         cudaEvent_t e;
         cudaEventCreate(&e);
         const cudaError_t err = cudaEventRecord(e, s);
         cudaEventDestroy(e);
         return err;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CUDA_OK(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeRelaxed));
    CUDA_OK(cudaMemsetAsync(d, 0, 16, st.s));
    EXPECT_EQ(c.call(st.s, d, host), cudaErrorStreamCaptureUnsupported);
    EXPECT_NE(std::string(cudaGetErrorString(cudaErrorStreamCaptureUnsupported)).find("capturing"), std::string::npos);
    cudaGetLastError();
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CUDA_OK(cudaStreamIsCapturing(st.s, &status));
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(st.s, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    EXPECT_NE(std::string(cudaGetErrorString(cudaErrorStreamCaptureInvalidated)).find(c.named), std::string::npos)
        << cudaGetErrorString(cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
  }
  // The stream works as before once the capture is over.
  CUDA_OK(cudaMemcpyAsync(d, host, 16, cudaMemcpyHostToDevice, st.s));
  CUDA_OK(cudaStreamSynchronize(st.s));
  EXPECT_EQ(read(d, 4)[2], 3.0f);
  cudaFree(d);
}

}  // namespace
