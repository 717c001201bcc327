// The training log's sample (train.sample_every): seeded, one printable line, and its keys checked.
#include "train/sample.h"

#include <gtest/gtest.h>

#include "data/unicode.h"
#include "testing.h"

namespace linattn {
namespace {

Model tiny_byte_model() {
  Config c = parse_config("model: {vocab_size: 257, hidden_size: 16, num_hidden_layers: 2, num_heads: 2, "
                          "layers: [deltanet, {mixer: attention, window_size: 4}]}\ntrain: {max_steps: 1}\n",
                          "tiny.yaml");
  Model m(c.model, DType::f32);
  m.params().initialize(3);
  return m;
}

TEST(TrainingSample, SeededOneLineOfWellFormedText) {
  Model model = tiny_byte_model();
  data::ByteTokenizer bytes;
  const std::string a = training_sample(model, bytes, "Mr. Speaker", 200, 9);
  EXPECT_EQ(a, training_sample(model, bytes, "Mr. Speaker", 200, 9));
  EXPECT_NE(a, training_sample(model, bytes, "Mr. Speaker", 200, 10));
  EXPECT_EQ(a.rfind("Mr. Speaker", 0), 0u) << a;
  EXPECT_GT(a.size(), std::string("Mr. Speaker").size());
  // An untrained byte-level model writes any bytes: the line stays well-formed and free of controls.
  EXPECT_EQ(data::find_invalid_utf8(a), std::string_view::npos) << a;
  for (unsigned char c : a) EXPECT_FALSE(c < 0x20 || c == 0x7f) << int(c) << " in " << a;
}

TEST(TrainingSample, AProblemIsAWarningNotAnError) {
  Model model = tiny_byte_model();
  TrainConfig t;
  t.sample_prompt = "caf\xC3";  // GPT-2's tokenizer refuses text that is not UTF-8 (or its files are missing)
  const std::string line = training_sample_line(model, "gpt2", t, 7);
  EXPECT_EQ(line.rfind("warning: no sample at step 7: ", 0), 0u) << line;
  EXPECT_EQ(training_sample_line(model, "bytes", t, 7).rfind("sample step 7 | caf", 0), 0u);
}

TEST(TrainingSample, KeysAreChecked) {
  auto error = [](const std::string& train) {
    return testing::error_of([&] { parse_config("train: {max_steps: 1, " + train + "}\n", "t.yaml"); });
  };
  EXPECT_NE(error("sample_every: -1").find("t.yaml:1:37: 'sample_every' must be >= 0"), std::string::npos)
      << error("sample_every: -1");
  EXPECT_NE(error("sample_tokens: 0").find("'sample_tokens' must be in [1, 100000]"), std::string::npos);
  Config c = parse_config("train: {max_steps: 1, sample_every: 5, sample_prompt: \"It is\"}\n", "t.yaml");
  EXPECT_EQ(c.train.sample_every, 5);
  EXPECT_EQ(c.train.sample_tokens, 64);
  EXPECT_EQ(parse_config(c.text, "again.yaml").train.sample_prompt, "It is");
}

}  // namespace
}  // namespace linattn
