#include "train/mfu.h"

#include <cstdio>

namespace linattn {

namespace {

// NVIDIA's datasheets, dense figures in TFLOP/s (the datasheets print the tensor-core rows with 2:4
// sparsity; dense is half). Checked against them (docs/mfu.md lists the sources).
struct Row {
  const char* gpu;
  double bf16, tf32, f32;
};
constexpr Row kH100Sxm{"H100 SXM", 989, 494.5, 67};
constexpr Row kH100Pcie{"H100 PCIe", 756.5, 378, 51};
constexpr Row kH200{"H200", 989, 494.5, 67};  // the H100 SXM's compute with more and faster memory
constexpr Row kA100{"A100", 312, 156, 19.5};  // SXM4 and PCIe alike
constexpr Row kL40S{"L40S", 362.05, 183, 91.6};

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The row of a cudaGetDeviceProperties name ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe",
// "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA L40S"), or null. The NVL boards run at other
// clocks and have no row; nor has anything that is not an NVIDIA GPU (the CUDA emulation).
const Row* row_of(const std::string& name) {
  if (!has(name, "NVIDIA") || has(name, "NVL")) return nullptr;
  if (has(name, "H200")) return &kH200;
  if (has(name, "H100")) return has(name, "PCIe") || has(name, "PCIE") ? &kH100Pcie : &kH100Sxm;
  if (has(name, "A100")) return &kA100;
  if (has(name, "L40S")) return &kL40S;
  return nullptr;
}

std::string rate(double gflops) {
  char buf[48];
  if (gflops >= 1e3) std::snprintf(buf, sizeof buf, "%.4g TFLOP/s", gflops / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f GFLOP/s", gflops);
  return buf;
}

}  // namespace

double datasheet_tflops(const std::string& device_name, MatmulPrecision p, std::string* gpu) {
  const Row* r = row_of(device_name);
  if (!r) return 0;
  if (gpu) *gpu = r->gpu;
  switch (p) {
    case MatmulPrecision::bf16: return r->bf16;
    case MatmulPrecision::tf32: return r->tf32;
    case MatmulPrecision::f32: return r->f32;
  }
  return 0;
}

MfuPeak mfu_peak(Device device, const std::string& device_name, MatmulPrecision p, double measured_gflops) {
  std::string gpu;
  const double tflops = device == Device::cuda ? datasheet_tflops(device_name, p, &gpu) : 0;
  if (tflops > 0)
    return {tflops * 1e3, true, gpu + " " + matmul_precision_name(p) + " dense peak " + rate(tflops * 1e3)};
  return {measured_gflops, false, "GEMM measured here " + rate(measured_gflops)};
}

std::string mfu_text(double mfu, const MfuPeak& peak, double measured_gflops) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "MFU %4.1f%%", 100 * mfu);
  // Against the measured GEMM rate (the CPU, a GPU without a row) the start-up line names the peak
  // and the progress line stays short; against a datasheet peak each line names it.
  if (!peak.datasheet) return buf;
  return buf + (" of " + peak.text) + " (GEMM measured " + rate(measured_gflops) + ")";
}

}  // namespace linattn
