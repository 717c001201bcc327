// MFU as the field counts it (docs/mfu.md): the model's FLOPs per second (6N plus the mixers' terms,
// Model::flops_per_token, as llm.c counts) over the dense datasheet peak of the GPU at hand, in the
// precision its products run in (llm.c's and torchtitan's convention); beside it the rate a GEMM
// measured at start-up. On the CPU, which has no datasheet figure here, the measured rate is the peak.
#pragma once

#include <string>

#include "core/dtype.h"
#include "kernels/op_types.h"

namespace linattn {

// The dense (no 2:4 sparsity) datasheet peak, TFLOP/s, of the GPU whose cudaGetDeviceProperties
// name is `device_name`, for products in precision p (f32: the CUDA cores, no tensor cores); 0 when
// the table has no row for that GPU. `gpu` (optional) gets the row's name ("H100 SXM").
double datasheet_tflops(const std::string& device_name, MatmulPrecision p, std::string* gpu = nullptr);

// What a run's MFU divides by.
struct MfuPeak {
  double gflops = 0;     // per rank
  bool datasheet = false;  // the GPU's datasheet peak, else the GEMM rate measured here
  std::string text;      // for the log line: "H200 bf16 dense peak 989 TFLOP/s" or "GEMM measured here 301 GFLOP/s"
};
// device_name: the GPU's name ("" on the CPU); measured_gflops: the start-up GEMM's rate.
MfuPeak mfu_peak(Device device, const std::string& device_name, MatmulPrecision p, double measured_gflops);

// "MFU 7.0% of H200 bf16 dense peak 989 TFLOP/s (GEMM measured 299 TFLOP/s)", or on the CPU
// "MFU 55.0% of GEMM measured here 301 GFLOP/s".
std::string mfu_text(double mfu, const MfuPeak& peak, double measured_gflops);

}  // namespace linattn
