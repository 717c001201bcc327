// ops::missing_kernels: the backend entries a mixer op runs that a device has no kernel for.
#include "autograd/mixer_ops.h"
#include "testing.h"

namespace linattn {
namespace {

TEST(MissingKernels, TheCpuHasEveryKernel) {
  ASSERT_EQ(ops::all_mixer_ops().size(), 6u);
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) {
    EXPECT_FALSE(op->entries.empty()) << op->name;
    EXPECT_EQ(op->missing_kernels(Device::cpu), "") << op->name;
  }
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

TEST(MissingKernels, AnUnknownOpIsAnError) {
  EXPECT_EQ(testing::error_of([] { ops::missing_kernels("retnet", Device::cpu); }),
            "unknown mixer op 'retnet' (known: linear_attn, gla, deltanet, gated_deltanet, attention, mamba2)");
}

// Mamba2's CUDA entries are not in the table yet: the table says so (whichever build).
TEST(MissingKernels, Mamba2HasNoCudaKernelYet) {
  EXPECT_EQ(ops::missing_kernels("mamba2", Device::cuda), "mamba2_forward, mamba2_backward, mamba2_saved_size");
}

}  // namespace
}  // namespace linattn
