// The CPU column: attention, the short convolution, RoPE and every linear mixer over a batch's
// documents in one call give the bits of one call per segment part, forward and backward
// (tests/kernels/document_calls.h), in float64 and float32, for global and windowed attention with
// grouped-query heads and the mixers' forms and options (mixer_cases).
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

TEST(DocumentsInOneCall, LinearMixersMatchThePerPartCalls) {
  for (DType dt : {DType::f64, DType::f32})
    for (const MixerCase& c : mixer_cases())
      EXPECT_EQ(one_call_mismatches(mixer_body(Device::cpu, dt, c)), "") << c.name << ", " << dtype_name(dt);
}

// The negative control: per-part calls in which a document inside a row also takes the row's initial
// state differ from the one call, in every layout with such a document (the h0 rule is checked).
TEST(DocumentsInOneCall, AWrongInitialStateRuleIsCaught) {
  for (const MixerCase& c : mixer_cases()) {
    const std::string mismatches = one_call_mismatches(mixer_body(Device::cpu, DType::f64, c, true));
    for (const char* layout : {"one-token documents at the starts and ends of rows", "many short documents",
                               "a row of documents beside a whole row"})
      EXPECT_NE(mismatches.find(std::string(layout) + ": o of the one call differs"), std::string::npos)
          << c.name << ": " << layout << "\n" << mismatches;
    EXPECT_EQ(mismatches.find("the rows: "), std::string::npos) << c.name << "\n" << mismatches;
  }
}

}  // namespace
}  // namespace linattn::testing::documents
