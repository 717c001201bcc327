#include "train/device.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/cuda/runtime.h"
#include "kernels/backend.h"

namespace linattn {

Device training_device(const Config& config) {
  if (config.train.device == "cpu") return Device::cpu;
#ifdef LINATTN_CUDA
  const char* why = "no CUDA GPU is visible here (cudaGetDeviceCount found none)";
#else
  const char* why = "this linattn was built without CUDA (configure with -DLINATTN_CUDA=ON where nvcc is installed)";
#endif
  LINATTN_REQUIRE(cuda::device_count() > 0, config.where("train.device"), ": train.device is cuda, but ", why,
                  "; set train.device: cpu (or pass --set train.device=cpu)");
  return Device::cuda;
}

void check_model_on_device(const Config& config, const Model& model, Device device) {
  const std::string problem = model.unsupported_on(device);
  LINATTN_REQUIRE(problem.empty(), config.where("train.device"), ": ", problem,
                  "; use train.device: cpu or an attention-only model");
}

void select_rank_gpu(const Communicator& comm) {
  const int gpus = cuda::device_count();
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  LINATTN_REQUIRE(comm.local_rank() < gpus, "rank ", comm.rank(), " on host ", host, " needs GPU ", comm.local_rank(),
                  " but the host has ", gpus, "; run at most ", gpus, " rank", gpus == 1 ? "" : "s", " per host");
  cuda::set_device(comm.local_rank());
}

std::string describe_device(Device device) {
  if (device == Device::cpu) return "cpu";
  const cuda::DeviceInfo d = cuda::device_info();
  char buf[256];
  std::snprintf(buf, sizeof buf, "cuda:%d %s (sm_%d%d, %d SMs), %.1f GiB free of %.1f GiB", d.index, d.name.c_str(),
                d.sm_major, d.sm_minor, d.multiprocessors, double(d.free_bytes) / double(1 << 30),
                double(d.total_bytes) / double(1 << 30));
  return buf;
}

std::string device_memory_budget(Device device) {
  if (device == Device::cpu) return "";
  const cuda::DeviceInfo d = cuda::device_info();
  const cuda::MemoryStats m = cuda::memory_stats();
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "device memory: %.1f MiB at the peak (parameters, gradients, AdamW moments, one micro-batch's "
                "activations), %.1f GiB free of %.1f GiB",
                double(m.peak_in_use) / double(1 << 20), double(d.free_bytes) / double(1 << 30),
                double(d.total_bytes) / double(1 << 30));
  return buf;
}

namespace {

// The operands of the products being measured: bf16 under train.precision: bf16, else float32.
DType operand_dtype() { return backend::matmul_precision() == MatmulPrecision::bf16 ? DType::bf16 : DType::f32; }

// Best of reps (after one warm-up) of C = A B on n x n matrices (operand_dtype(), a float32 C)
// through the CPU column of the table, at the current thread count.
double cpu_gemm_gflops(int64_t n, int reps) {
  Tensor a = Tensor::empty({n, n}, operand_dtype()), b = Tensor::empty({n, n}, operand_dtype());
  Tensor c = Tensor::empty({n, n}, DType::f32);
  a.fill_(0.5), b.fill_(0.25);
  double best = 1e300;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    backend::gemm(Device::cpu, false, false, n, n, n, 1.0, a, b, 0.0, c);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, s);
  }
  return 2.0 * double(n) * double(n) * double(n) / best * 1e-9;
}

}  // namespace

double measure_gemm_gflops(Device device, int64_t n, int reps) {
  if (device == Device::cpu) return cpu_gemm_gflops(1024, reps);  // a CPU's rate is reached at 1024
#ifdef LINATTN_CUDA_EMULATION
  // The emulated GPU is the CPU running the kernels one thread at a time: its rate is nobody's
  // peak, and eleven 2048^3 products would take minutes.
  n = std::min<int64_t>(n, 128);
  reps = 1;
#endif
  Tensor a = Tensor::zeros({n, n}, operand_dtype(), device), b = Tensor::zeros({n, n}, operand_dtype(), device);
  Tensor c = Tensor::zeros({n, n}, DType::f32, device);
  backend::gemm(device, false, false, n, n, n, 1.0, a, b, 0.0, c);  // warm-up (cuBLAS picks its kernel)
  cuda::Event start, stop;
  start.record();
  for (int i = 0; i < reps; ++i) backend::gemm(device, false, false, n, n, n, 1.0, a, b, 0.0, c);
  stop.record();
  const double seconds = double(stop.ms_since(start)) / 1e3;
  return 2.0 * double(n) * double(n) * double(n) * reps / seconds / 1e9;
}

}  // namespace linattn
