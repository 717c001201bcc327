// CUDA DeltaNet and Gated DeltaNet: the launches of the block programs of deltanet_block.h.
#include "kernels/cuda/deltanet.h"

#include "core/error.h"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {
namespace {

// Threads per head: enough for the [C, D] phases (C * D = 4096 elements at C = D = 64).
constexpr int kHeadThreads = kDeltaNetHeadThreads;

// The chunkwise forward's three launches (deltanet_block.h): grid (chunks, B*H) for the per-chunk
// work, (state tiles, B*H) for the state pass.
__global__ void __launch_bounds__(kHeadThreads) chunk_factors_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_factors(DeviceBlock{}, p, blockIdx.y, blockIdx.x, sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_states_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_states(DeviceBlock{}, p, blockIdx.y, delta::state_columns(delta::dims(p), blockIdx.x), sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_outputs_kernel(DeltaNetArgs<float> p) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_outputs(DeviceBlock{}, p, blockIdx.y, blockIdx.x, sh);
}

// The chunkwise backward's three launches: grid (chunks, B*H) for the per-chunk work, (state tiles,
// B*H) for the sequential pass of dS.
__global__ void __launch_bounds__(kHeadThreads) chunk_backward_inputs_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_backward_inputs(DeviceBlock{}, p, work, blockIdx.y, blockIdx.x, sh);
}

__global__ void __launch_bounds__(kHeadThreads) chunk_backward_states_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_backward_states(DeviceBlock{}, p, work, blockIdx.y, delta::state_columns(delta::dims(p), blockIdx.x),
                               sh);
}

// (at least 2 blocks per SM: the hint lets ptxas use up to 128 registers, where by itself it took 64
// and spilled)
__global__ void __launch_bounds__(kHeadThreads, 2)
    chunk_backward_grads_kernel(DeltaNetArgs<float> p, const float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_backward_grads(DeviceBlock{}, p, work, blockIdx.y, blockIdx.x, sh);
}

__global__ void __launch_bounds__(kHeadThreads) recurrent_forward_kernel(DeltaNetArgs<float> p, float* state) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const int64_t bh = blockIdx.x;
  delta::recurrent_forward_head(DeviceBlock{}, p, state + bh * p.Dk * p.Dv, bh, sh);
}

// Lets kernel take `bytes` of dynamic shared memory (chunk_factors_kernel: above the default 48 KiB
// from Dk = 128 at chunk 64; chunk_backward_grads_kernel: from Dk = Dv = 64); a GPU with less is
// refused by name.
template <class Kernel>
void opt_in_shared(Kernel kernel, int64_t bytes, const char* pass) {
  int device = 0, limit = 0;
  LINATTN_CUDA_CHECK(cudaGetDevice(&device));
  LINATTN_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  LINATTN_CHECK(bytes <= limit, "deltanet (cuda): the ", pass, " needs ", bytes / 1024, " KiB of shared memory per ",
                "thread block, more than this GPU's ", limit / 1024, " KiB; use a smaller chunk_size or head ",
                "dimension, or run DeltaNet on an sm_80 or sm_90 GPU (or on the CPU)");
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

void check_chunk(const delta::Dims& d, const char* op) {
  LINATTN_CHECK(d.C >= 1 && d.C <= kDeltaNetMaxChunk, op, ": chunk_size ", d.C, " is not supported by the CUDA ",
                "kernels; set the mixer's chunk_size to 16, 32 or 64");
}

}  // namespace

void deltanet_chunk_forward(const DeltaNetArgs<float>& p) {
  const delta::Dims d = delta::dims(p);
  check_chunk(d, "deltanet (cuda)");
  if (d.B * d.H == 0) return;
  LINATTN_CHECK(d.B * d.H <= 65535, "deltanet (cuda): batch * heads = ", d.B * d.H, " exceeds the CUDA grid's ",
                "65535 (the forward's grid y); split the batch");
  const LaunchPlans plans = deltanet_forward_plans(d.B, d.T, d.H, d.Dk, d.Dv, d.C);
  if (d.chunks() == 0) {  // no tokens: the state pass alone (ht = h0)
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_states_kernel)(p);
  } else {
    opt_in_shared(chunk_factors_kernel, plans[0].shared_bytes, "forward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_factors_kernel)(p);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_states_kernel)(p);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_outputs_kernel)(p);
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void deltanet_chunk_backward(const DeltaNetArgs<float>& p, float* work) {
  const delta::Dims d = delta::dims(p);
  check_chunk(d, "deltanet (cuda)");
  if (d.B * d.H == 0) return;
  LINATTN_CHECK(d.B * d.H <= 65535, "deltanet (cuda): batch * heads = ", d.B * d.H, " exceeds the CUDA grid's ",
                "65535 (the backward's grid y); split the batch");
  const LaunchPlans plans = deltanet_backward_plans(d.B, d.T, d.H, d.Dk, d.Dv, d.C);
  if (d.chunks() == 0) {  // no tokens: the state pass alone (dh0 += dht)
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_backward_states_kernel)(p, work);
  } else {
    opt_in_shared(chunk_backward_states_kernel, plans[1].shared_bytes, "backward");
    opt_in_shared(chunk_backward_grads_kernel, plans[2].shared_bytes, "backward");
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_backward_inputs_kernel)(p, work);
    LINATTN_LAUNCH_PLAN(plans[1], stream(), chunk_backward_states_kernel)(p, work);
    LINATTN_LAUNCH_PLAN(plans[2], stream(), chunk_backward_grads_kernel)(p, work);
  }
  LINATTN_CUDA_CHECK_LAUNCH();
}

void deltanet_recurrent_forward(const DeltaNetArgs<float>& p, float* state) {
  const delta::Dims d = delta::dims(p);
  if (d.B * d.H == 0) return;
  LINATTN_LAUNCH_PLAN(deltanet_recurrent_plan(d.B, d.T, d.H, d.Dk, d.Dv), stream(), recurrent_forward_kernel)(p,
                                                                                                          state);
  LINATTN_CUDA_CHECK_LAUNCH();
}

}  // namespace linattn::cuda
