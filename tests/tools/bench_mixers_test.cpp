// linattn-bench mixers --device cuda: without a GPU an error that says so; a mixer it does not know
// is an error naming the ones it does.
#include "core/memory.h"
#include "testing.h"

namespace linattn {
namespace {

testing::CommandResult bench(const std::string& args) {
  return testing::run_command(testing::built_binary("linattn-bench") + " mixers " + args);
}

TEST(BenchMixers, CudaWithoutAGpuIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is here: the benchmark would run";
  testing::CommandResult r = bench("--device cuda");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("linattn-bench mixers: error: --device cuda: no CUDA device here (this build "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("leave out --device cuda for the CPU kernels"), std::string::npos) << r.output;
}

TEST(BenchMixers, UnknownDeviceIsAnError) {
  testing::CommandResult r = bench("--device tpu");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("linattn-bench mixers: error: --device 'tpu' is not one of cpu, cuda"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace linattn
