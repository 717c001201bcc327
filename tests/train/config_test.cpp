// Config parsing: defaults, the hybrid schedule, overrides, and errors that point at FILE:LINE:COL.
#include "train/config.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace linattn {
namespace {

const char* kBase = R"(model:
  hidden_size: 64
  num_hidden_layers: 6
  num_heads: 4
train:
  max_steps: 10
)";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "test.yaml", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAndDerivedValues) {
  Config c = parse_config(kBase, "test.yaml");
  EXPECT_EQ(c.model.hidden_size, 64);
  EXPECT_EQ(c.model.num_kv_heads, 4);
  EXPECT_EQ(c.model.layers.size(), 6u);
  for (const LayerSpec& l : c.model.layers) EXPECT_EQ(l.mixer, MixerKind::gla);
  EXPECT_EQ(c.model.resolved_intermediate_size(), 256);  // 4 * 64 * 2/3 = 170.7 -> 256
  EXPECT_EQ(c.model.resolved_expand_k(MixerKind::gla), 0.5);
  EXPECT_EQ(c.train.micro_batch_size, 0);  // the trainer makes it batch_size / world size
  EXPECT_EQ(c.distributed.bucket_mb, 4);
  EXPECT_NE(c.text.find("hidden_size: 64"), std::string::npos);
}

TEST(Config, AttnBlockPicksLayers) {
  Config c = parse_config(std::string(kBase) + "  # placeholder\n", "t.yaml",
                          {"model.mixer=deltanet", "model.attn.layers=[2, 5]"});
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c.model.layers[i].mixer, i == 2 || i == 5 ? MixerKind::attention : MixerKind::deltanet) << i;
  EXPECT_EQ(c.model.layers[2].window_size, 0);  // no window_size in the attn block: global

  // Samba-style: every other layer sliding-window attention, one line.
  c = parse_config(kBase, "t.yaml", {"model.attn={every: 2, window_size: 64}"});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c.model.layers[i].mixer, i % 2 ? MixerKind::attention : MixerKind::gla) << i;
    if (i % 2) {
      EXPECT_EQ(c.model.layers[i].window_size, 64);
    }
  }
}

TEST(Config, ExplicitLayers) {
  Config c = parse_config(R"(model:
  hidden_size: 64
  num_hidden_layers: 3
  num_heads: 4
  layers:
    - retnet
    - {mixer: attention, window_size: 32, num_kv_heads: 2}
    - gated_deltanet
train: {max_time: 90s}
)",
                          "t.yaml");
  EXPECT_EQ(c.model.layers[0].mixer, MixerKind::retnet);
  EXPECT_EQ(c.model.layers[1].window_size, 32);
  EXPECT_EQ(c.model.layers[1].num_kv_heads, 2);
  EXPECT_EQ(c.model.layers[2].mixer, MixerKind::gated_deltanet);
  EXPECT_EQ(c.train.max_time, 90);
}

TEST(Config, UnknownKeyGetsLineColumnAndSuggestion) {
  std::string msg = error_of("model:\n  hiden_size: 64\ntrain: {max_steps: 1}\n");
  EXPECT_EQ(msg, "test.yaml:2:3: unknown key 'hiden_size' in 'model' (did you mean 'hidden_size'?)");
  msg = error_of("modle: {}\n");
  EXPECT_NE(msg.find("test.yaml:1:1: unknown key 'modle' (did you mean 'model'?)"), std::string::npos) << msg;
}

TEST(Config, WrongTypesAndRanges) {
  std::string msg = error_of("model:\n  hidden_size: big\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:2:16: 'hidden_size' has the wrong type: expected an integer, got 'big'"),
            std::string::npos)
      << msg;
  msg = error_of("model:\n  hidden_size: 65\n  num_heads: 4\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:3:14:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not divisible by 'num_heads'"), std::string::npos) << msg;
  msg = error_of(std::string(kBase) + "  lr: -1\n");
  EXPECT_NE(msg.find("test.yaml:7:7: 'lr' must be positive"), std::string::npos) << msg;
  msg = error_of("model: {num_hidden_layers: 4}\n");
  EXPECT_NE(msg.find("no bound"), std::string::npos) << msg;
  msg = error_of("model: {mixer: gla2}\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:1:16: unknown mixer 'gla2' (did you mean 'gla'?)"), std::string::npos) << msg;
  msg = error_of(std::string(kBase) + "distributed:\n  bucket_mb: 0\n");
  EXPECT_NE(msg.find("test.yaml:8:14: 'bucket_mb' (MiB of gradients per all-reduce) must be in (0, 65536]"),
            std::string::npos)
      << msg;
  msg = error_of(std::string(kBase) + "distributed: {bucket_size: 8}\n");
  EXPECT_NE(msg.find("test.yaml:7:15: unknown key 'bucket_size' in 'distributed' (known keys: bucket_mb)"),
            std::string::npos)
      << msg;
}

TEST(Config, LayerIndexOutOfRange) {
  std::string msg = error_of(std::string(kBase) + "", {"model.attn.layers=[1, 6]"});
  EXPECT_NE(msg.find("layer index 6 is out of range"), std::string::npos) << msg;
  msg = error_of("model:\n  num_hidden_layers: 2\n  attn:\n    layers: [0, 2]\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:4:17: layer index 2 is out of range: num_hidden_layers is 2"), std::string::npos)
      << msg;
}

TEST(Config, OverridesAreCheckedAndNamed) {
  Config c = parse_config(kBase, "t.yaml", {"train.lr=1e-4", "train.lr_min=0"});
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-4);
  EXPECT_EQ(c.where("train.lr"), "--set train.lr");
  EXPECT_EQ(c.where("model.hidden_size"), "t.yaml:2:16");
  std::string msg = error_of(kBase, {"train.lr=-3"});
  EXPECT_NE(msg.find("--set train.lr: 'lr' must be positive"), std::string::npos) << msg;
  msg = error_of(kBase, {"train.learning_rate=3"});
  EXPECT_NE(msg.find("unknown key 'learning_rate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--set train.learning_rate"), std::string::npos) << msg;
  msg = error_of(kBase, {"nonsense"});
  EXPECT_NE(msg.find("expected section.key=value"), std::string::npos) << msg;
}

TEST(Config, SyntaxErrorHasALine) {
  std::string msg = error_of("model:\n  hidden_size: [1, 2\ntrain: {}\n");
  EXPECT_NE(msg.find("test.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
}

}  // namespace
}  // namespace linattn
