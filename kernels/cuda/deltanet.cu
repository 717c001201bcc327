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

__global__ void __launch_bounds__(kHeadThreads) chunk_backward_kernel(DeltaNetArgs<float> p, float* work) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  delta::chunk_backward_head(DeviceBlock{}, p, work, blockIdx.x, sh);
}

__global__ void __launch_bounds__(kHeadThreads) recurrent_forward_kernel(DeltaNetArgs<float> p, float* state) {
  LINATTN_DYNAMIC_SHARED(float, sh);
  const int64_t bh = blockIdx.x;
  delta::recurrent_forward_head(DeviceBlock{}, p, state + bh * p.Dk * p.Dv, bh, sh);
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
  const LaunchPlans plans = deltanet_forward_plans(d.B, d.T, d.H, d.Dk, d.Dv, d.C);
  if (d.chunks() == 0) {  // no tokens: the state pass alone (ht = h0)
    LINATTN_LAUNCH_PLAN(plans[0], stream(), chunk_states_kernel)(p);
  } else {
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
  LINATTN_LAUNCH_PLAN(deltanet_backward_plan(d.B, d.T, d.H, d.Dk, d.Dv, d.C), stream(), chunk_backward_kernel)(p,
                                                                                                          work);
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
