// linattn-bench gemm --device: the GPU figures skip with a message where there is no GPU, and a
// device it does not know is an error.
#include "core/memory.h"
#include "testing.h"

namespace linattn {
namespace {

testing::CommandResult bench(const std::string& args) {
  return testing::run_command(testing::built_binary("linattn-bench") + " gemm " + args);
}

TEST(BenchGemm, CudaWithoutAGpuSkipsWithAMessage) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is here: the benchmark would run";
  testing::CommandResult r = bench("--device cuda");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("gemm --device cuda: skipped: no CUDA device here"), std::string::npos) << r.output;
}

TEST(BenchGemm, UnknownDeviceIsAnError) {
  testing::CommandResult r = bench("--device tpu");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("linattn-bench gemm: error: --device 'tpu' is not one of cpu, cuda"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace linattn
