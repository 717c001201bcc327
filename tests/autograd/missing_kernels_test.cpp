// ops::missing_kernels: the backend entries a mixer op runs that a device has no kernel for.
#include "autograd/mixer_ops.h"

#include <algorithm>
#include <sstream>

#include "kernels/backend.h"
#include "testing.h"

namespace linattn {
namespace {

TEST(MissingKernels, TheCpuHasEveryKernel) {
  ASSERT_FALSE(ops::all_mixer_ops().empty());
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

// What an op lacks on CUDA are entries of the table (kernels/backend.def), and with the CUDA backend
// exactly those it writes CPU-only: none of them has a CUDA kernel in the table.
TEST(MissingKernels, AreTheEntriesTheTableWritesCpuOnly) {
  const std::vector<const char*> cpu = backend::entry_names(Device::cpu);
  [[maybe_unused]] const std::vector<const char*> cuda = backend::entry_names(Device::cuda);
  auto listed = [](const std::vector<const char*>& names, const std::string& name) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return n == name; });
  };
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) {
    std::stringstream missing(op->missing_kernels(Device::cuda));
    for (std::string name; std::getline(missing >> std::ws, name, ',');) {
      EXPECT_TRUE(listed(cpu, name)) << op->name << ": " << name;
#ifdef LINATTN_CUDA
      EXPECT_FALSE(listed(cuda, name)) << op->name << ": " << name << " has a CUDA kernel";
#endif
    }
  }
}

TEST(MissingKernels, AnUnknownOpIsAnError) {
  std::string known;
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) known += (known.empty() ? "" : ", ") + op->name;
  EXPECT_NE(known.find("linear_attn, gla, deltanet"), std::string::npos) << known;
  EXPECT_EQ(testing::error_of([] { ops::missing_kernels("retnet", Device::cpu); }),
            "unknown mixer op 'retnet' (known: " + known + ")");
}

}  // namespace
}  // namespace linattn
