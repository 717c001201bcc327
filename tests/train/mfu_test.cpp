// MFU's peak (train/mfu.h): the datasheet row a GPU's name selects, in the products' precision, and
// the measured GEMM rate where there is no row (the CPU, the emulation, an unknown GPU); the log
// line names the peak and shows the measured rate beside it.
#include "train/mfu.h"

#include <gtest/gtest.h>

namespace linattn {
namespace {

TEST(MfuPeak, DatasheetRowsByDeviceName) {
  struct Want {
    const char* name;  // as cudaGetDeviceProperties reports it
    const char* gpu;
    double bf16, tf32, f32;
  };
  // NVIDIA's datasheets, dense (docs/mfu.md)
  for (const Want& w : {Want{"NVIDIA H100 80GB HBM3", "H100 SXM", 989, 494.5, 67},
                        Want{"NVIDIA H100 PCIe", "H100 PCIe", 756.5, 378, 51},
                        Want{"NVIDIA H200", "H200", 989, 494.5, 67},
                        Want{"NVIDIA A100-SXM4-80GB", "A100", 312, 156, 19.5},
                        Want{"NVIDIA A100 80GB PCIe", "A100", 312, 156, 19.5},
                        Want{"NVIDIA L40S", "L40S", 362.05, 183, 91.6}}) {
    SCOPED_TRACE(w.name);
    std::string gpu;
    EXPECT_EQ(datasheet_tflops(w.name, MatmulPrecision::bf16, &gpu), w.bf16);
    EXPECT_EQ(gpu, w.gpu);
    EXPECT_EQ(datasheet_tflops(w.name, MatmulPrecision::tf32), w.tf32);
    EXPECT_EQ(datasheet_tflops(w.name, MatmulPrecision::f32), w.f32);
  }
  // No row: other boards, other GPUs, the emulation (whose name says H100 limits).
  for (const char* name : {"NVIDIA H100 NVL", "NVIDIA GeForce RTX 4090", "linattn CUDA emulation (H100 limits)", ""})
    EXPECT_EQ(datasheet_tflops(name, MatmulPrecision::bf16), 0) << name;
}

TEST(MfuPeak, TheLogLineNamesThePeak) {
  // On an H200 in bf16: against 989 TFLOP/s, the measured GEMM beside it.
  const MfuPeak h200 = mfu_peak(Device::cuda, "NVIDIA H200", MatmulPrecision::bf16, 298600);
  EXPECT_TRUE(h200.datasheet);
  EXPECT_EQ(h200.gflops, 989e3);
  EXPECT_EQ(mfu_text(0.0703, h200, 298600), "MFU  7.0% of H200 bf16 dense peak 989 TFLOP/s (GEMM measured 298.6 TFLOP/s)");
  // On the CPU, and on a GPU without a row: the measured rate is the peak.
  const MfuPeak cpu = mfu_peak(Device::cpu, "", MatmulPrecision::f32, 301.2);
  EXPECT_FALSE(cpu.datasheet);
  EXPECT_EQ(cpu.gflops, 301.2);
  EXPECT_EQ(mfu_text(0.55, cpu, 301.2), "MFU 55.0%");  // the start-up line names this peak
  EXPECT_EQ(cpu.text, "GEMM measured here 301 GFLOP/s");
  const MfuPeak unknown = mfu_peak(Device::cuda, "NVIDIA GeForce RTX 4090", MatmulPrecision::bf16, 150000);
  EXPECT_FALSE(unknown.datasheet);
  EXPECT_EQ(unknown.gflops, 150000);
  EXPECT_EQ(unknown.text, "GEMM measured here 150 TFLOP/s");
}

}  // namespace
}  // namespace linattn
