// ops::missing_kernels: the backend entries a mixer op runs that a device has no kernel for.
#include "autograd/mixers.h"
#include "testing.h"

namespace linattn {
namespace {

TEST(MissingKernels, TheCpuHasEveryKernel) {
  for (const char* op : {"linear_attn", "gla", "deltanet", "gated_deltanet", "attention"})
    EXPECT_EQ(ops::missing_kernels(op, Device::cpu), "") << op;
}

// Attention's CUDA kernels are in the table of a CUDA build; a CPU-only build has none.
TEST(MissingKernels, NamesTheEntriesADeviceLacks) {
#ifdef LINATTN_CUDA
  EXPECT_EQ(ops::missing_kernels("attention", Device::cuda), "");
#else
  EXPECT_EQ(ops::missing_kernels("attention", Device::cuda), "attention_forward, attention_backward");
  EXPECT_EQ(ops::missing_kernels("gated_deltanet", Device::cuda), "delta_rule_forward, delta_rule_backward");
#endif
}

TEST(MissingKernels, AnUnknownOpIsAnError) { EXPECT_THROW(ops::missing_kernels("retnet", Device::cpu), Error); }

}  // namespace
}  // namespace linattn
