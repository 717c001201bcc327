// The CUDA column: attention (the CUDA-core float32 kernels and the bf16 tensor-core ones), the short
// convolution, RoPE and the linear mixers (float32, and their bf16 and tf32 tensor-core products)
// over a batch's documents in one launch per kernel give the bits of one call per segment part
// (tests/kernels/document_calls.h), forward and backward. The convolution's weight
// and bias gradients are sums over the whole batch in another order: float32 sums of up to
// B * T = 200 terms, compared at 1e-5 relative to the largest entry (~100 ulp, kernel_testing's
// bound for sums of that length in another order).
#include "kernel_testing.h"
#include "kernels/document_calls.h"

namespace linattn::testing::documents {
namespace {

TEST(CudaDocumentsInOneLaunch, AttentionMatchesThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(one_call_mismatches(attention_body(Device::cuda, DType::f32, 4, 2, 16, 0)), "");
  EXPECT_EQ(one_call_mismatches(attention_body(Device::cuda, DType::f32, 2, 1, 8, 7)), "");
}

TEST(CudaDocumentsInOneLaunch, TensorCoreAttentionMatchesThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  backend::set_matmul_precision(MatmulPrecision::bf16);
  EXPECT_EQ(one_call_mismatches(attention_body(Device::cuda, DType::f32, 2, 1, 32, 0)), "");
  backend::set_matmul_precision(MatmulPrecision::f32);
}

TEST(CudaDocumentsInOneLaunch, ShortConvolutionMatchesThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(one_call_mismatches(conv_body(Device::cuda, DType::f32, 40, 4), {"dw", "dbias"}, 1e-5), "");
}

TEST(CudaDocumentsInOneLaunch, RopeMatchesThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(one_call_mismatches(rope_body(Device::cuda, DType::f32, 2, 16, 0)), "");
  EXPECT_EQ(one_call_mismatches(rope_body(Device::cuda, DType::f32, 2, 16, 5)), "");
}

// Every linear mixer. Mamba2's dA_log and dD are sums over the whole batch, which one call adds in
// another order (column sums over chunks of rows): compared as the convolution's dw.
TEST(CudaDocumentsInOneLaunch, LinearMixersMatchThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  for (const MixerCase& c : mixer_cases()) {
    const std::vector<std::string> summed =
        c.kind == MixerKind::mamba2 ? std::vector<std::string>{"drate", "dskip"} : std::vector<std::string>{};
    EXPECT_EQ(one_call_mismatches(mixer_body(Device::cuda, DType::f32, c), summed, 1e-5), "") << c.name;
  }
}

// The tensor-core paths (bf16 and tf32 products), on one case per kernel family: they index tiles and
// states as the float32 path does, and the emulation runs them slowly.
TEST(CudaDocumentsInOneLaunch, TensorCoreLinearMixersMatchThePerPartCalls) {
  SKIP_WITHOUT_GPU();
  for (const MixerCase& c : mixer_cases()) {
    const std::string name = c.name;
    MatmulPrecision precision = MatmulPrecision::f32;
    if (name == "linear attention, elu1, normalized" || name == "GLA") precision = MatmulPrecision::bf16;
    if (name == "Gated DeltaNet") precision = MatmulPrecision::tf32;
    if (precision == MatmulPrecision::f32) continue;
    backend::set_matmul_precision(precision);
    EXPECT_EQ(one_call_mismatches(mixer_body(Device::cuda, DType::f32, c)), "")
        << c.name << ", " << matmul_precision_name(precision);
  }
  backend::set_matmul_precision(MatmulPrecision::f32);
}

// The negative control, as on the CPU: a document inside a row that takes the row's initial state.
TEST(CudaDocumentsInOneLaunch, AWrongInitialStateRuleIsCaught) {
  SKIP_WITHOUT_GPU();
  for (const MixerCase& c : mixer_cases()) {
    const std::string mismatches = one_call_mismatches(mixer_body(Device::cuda, DType::f32, c, true));
    EXPECT_NE(mismatches.find("many short documents: o of the one call differs"), std::string::npos)
        << c.name << "\n" << mismatches;
    EXPECT_EQ(mismatches.find("the rows: "), std::string::npos) << c.name << "\n" << mismatches;
  }
}

}  // namespace
}  // namespace linattn::testing::documents
