// train.device: whether the configured device can train here, what it is, and its GEMM peak.
#pragma once

#include <string>

#include "layers/model.h"
#include "train/communicator.h"
#include "train/config.h"

namespace linattn {

// The device train.device names. cuda without a GPU (or in a build without CUDA) is an error that
// points at the config line; so is a model with a layer that has no kernels there.
Device training_device(const Config& config);
void check_model_on_device(const Config& config, const Model& model, Device device);

// For train.device: cuda, before anything touches a GPU: makes GPU `comm.local_rank()` the device of
// the calling thread (the one that trains: every CUDA call of the run, the gradient sums' included,
// is made from it), so that the ranks sharing a host use one GPU each. A host with fewer GPUs than
// ranks is an error that names the rank, the host and the way out.
void select_rank_gpu(const Communicator& comm);

// One line: "cpu" or "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs), 79.1 GiB free of 79.6 GiB".
std::string describe_device(Device device);

// The memory budget on a GPU, for --dry-run after one step: "device memory: 812.0 MiB at the peak
// (parameters, gradients, AdamW moments, one micro-batch's activations), 78.3 GiB free of 79.6 GiB".
std::string device_memory_budget(Device device);

// Measured GEMM rate (GFLOP/s) of n x n products on the device, in backend::matmul_precision()
// (float32, TF32 on cuda, or bf16 operands): the MFU reference and the benchmarks' peak. On the CPU
// n is 1024 (best of reps, the current thread count); on cuda it is cuBLAS's.
double measure_gemm_gflops(Device device, int64_t n = 2048, int reps = 10);

}  // namespace linattn
