// linattn's stand-in for the CUDA toolkit's cuda_runtime.h in the emulation build: the part of the
// runtime API the project calls, with CUDA's names, values and documented behaviour, executed on the
// CPU (emulation/runtime.cpp), and the device side a kernel sees (cuda_emulation/device.h).
// See docs/cuda-emulation.md for what is emulated and how faithfully.
#pragma once

#include <cstddef>
#include <cstdint>

#define LINATTN_CUDA_EMULATION_HEADERS 1

// ---- the qualifiers: device code is ordinary C++ here ----
#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// One block runs at a time (emulation/device.cpp), so a function-local static is block-shared memory.
#define __shared__ static
#define __constant__ static

// ---- vector types ----
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

// ---- errors ----
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorAssert = 710,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
typedef cudaError_t cudaError;

// The name ("cudaErrorInvalidValue") and a description. For the error the calling thread met last,
// the description is the emulation's own message: what went wrong, in which kernel or call.
const char* cudaGetErrorName(cudaError_t err);
const char* cudaGetErrorString(cudaError_t err);
// The calling thread's last error, cleared by cudaGetLastError; launch errors and the execution
// errors that synchronising calls return land here.
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

// ---- devices ----
// LINATTN_EMULATED_GPUS devices (default 2), each with an H100's limits: 132 SMs, 80 GiB,
// 48 KiB of dynamic shared memory per block by default and 227 KiB when a kernel opts in.
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  size_t sharedMemPerMultiprocessor;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major, minor;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int l2CacheSize;
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);  // per host thread, as in CUDA
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
// Runs everything queued on the current device's streams; returns an execution error of that work.
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();

// ---- memory ----
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};
struct CUstream_st;
typedef CUstream_st* cudaStream_t;  // nullptr: the legacy default stream
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;

// Tracked allocations: a pointer that is not in one is refused by the copies and, as a kernel
// argument, by the launch; freed memory is poisoned (0xFF bytes: NaN floats).
cudaError_t cudaMalloc(void** ptr, size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);  // synchronises the device first, as CUDA does
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
template <class T>
cudaError_t cudaMallocAsync(T** ptr, size_t bytes, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(ptr), bytes, stream);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr);
// The kind is checked against the pointers. cudaMemcpy from host to device returns once the source
// is staged, before the device holds it (the copy is queued on the legacy default stream); to the
// host it returns once the copy is done. cudaMemcpyAsync queues the copy: a device-to-host copy has
// not happened when it returns.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

// ---- streams and events: work runs when something waits for it ----
enum : unsigned { cudaStreamDefault = 0x0, cudaStreamNonBlocking = 0x1 };
enum : unsigned { cudaEventDefault = 0x0, cudaEventBlockingSync = 0x1, cudaEventDisableTiming = 0x2 };
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
// Milliseconds of host time between the two events' work running (an emulated timing).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

// ---- graphs: stream capture and replay ----
// Between cudaStreamBeginCapture and cudaStreamEndCapture the work queued on the stream is recorded,
// not run; cudaGraphLaunch queues all of it, in order, as one operation, as often as it is called.
// As on a GPU, a capture refuses what it cannot record (cudaErrorStreamCaptureUnsupported, and the
// capture is invalidated: cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated): a copy
// from or to host memory on the capturing stream (its host data would be read at replay), waiting
// for the capturing stream or the device, cudaFree (it synchronises the device), and, in the
// emulation, events on the capturing stream (it records one stream, with no fork or join).
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
struct CUgraph_st;
typedef CUgraph_st* cudaGraph_t;
struct CUgraphExec_st;
typedef CUgraphExec_st* cudaGraphExec_t;
struct CUgraphNode_st;
typedef CUgraphNode_st* cudaGraphNode_t;
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
// The emulation fills no node handles: nodes must be null, and *count is the number of operations.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

// ---- kernel attributes ----
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};
namespace cuda_emu {
cudaError_t set_function_attribute(const void* kernel, cudaFuncAttribute attr, int value);
}
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return cuda_emu::set_function_attribute(reinterpret_cast<const void*>(kernel), attr, value);
}

#include "cuda_emulation/device.h"
