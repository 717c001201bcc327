// The CUDA column: attention (the CUDA-core float32 kernels and the bf16 tensor-core ones), the short
// convolution and RoPE over a batch's documents in one launch per kernel give the bits of one call
// per segment part (tests/kernels/document_calls.h), forward and backward. The convolution's weight
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

}  // namespace
}  // namespace linattn::testing::documents
