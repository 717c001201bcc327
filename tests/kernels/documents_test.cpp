// The CPU column: attention, the short convolution and RoPE over a batch's documents in one call give
// the bits of one call per segment part, forward and backward (tests/kernels/document_calls.h), in
// float64 and float32, for global and windowed attention with grouped-query heads.
#include "kernels/document_calls.h"

namespace linattn::testing::documents {
namespace {

TEST(DocumentsInOneCall, AttentionMatchesThePerPartCalls) {
  for (DType dt : {DType::f64, DType::f32}) {
    EXPECT_EQ(one_call_mismatches(attention_body(Device::cpu, dt, 4, 2, 16, 0)), "");
    EXPECT_EQ(one_call_mismatches(attention_body(Device::cpu, dt, 2, 1, 8, 7)), "");
  }
}

TEST(DocumentsInOneCall, ShortConvolutionMatchesThePerPartCalls) {
  for (DType dt : {DType::f64, DType::f32}) EXPECT_EQ(one_call_mismatches(conv_body(Device::cpu, dt, 40, 4)), "");
}

TEST(DocumentsInOneCall, RopeMatchesThePerPartCalls) {
  for (DType dt : {DType::f64, DType::f32}) {
    EXPECT_EQ(one_call_mismatches(rope_body(Device::cpu, dt, 2, 16, 0)), "");
    EXPECT_EQ(one_call_mismatches(rope_body(Device::cpu, dt, 2, 16, 5)), "");
  }
}

}  // namespace
}  // namespace linattn::testing::documents
