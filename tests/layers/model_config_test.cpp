// The layer schedule without YAML: default mixer, then the attn block, then explicit layers, and
// the entry each schedule error points at.
#include "layers/mixer.h"
#include "layers/model_config.h"

#include <gtest/gtest.h>

namespace linattn {
namespace {

ModelConfig six_deltanet_layers() {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_hidden_layers = 6;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.mixer = "deltanet";
  return c;
}

AttnBlock attention_block(const ModelConfig& c) {
  AttnBlock a;
  a.spec = c.default_layer();
  a.spec.mixer = "attention";
  return a;
}

std::string schedule_error(ModelConfig c, const std::optional<AttnBlock>& attn,
                           const std::optional<std::vector<LayerSpec>>& layers = std::nullopt) {
  try {
    resolve_layers(c, attn, layers);
  } catch (const ScheduleError& e) {
    return e.path() + ": " + e.what();
  }
  return "";
}

TEST(ModelConfig, ScheduleInOrder) {
  ModelConfig c = six_deltanet_layers();
  AttnBlock a = attention_block(c);
  a.layers = std::vector<int64_t>{0};
  a.every = 3;  // layers 2 and 5
  resolve_layers(c, a, std::nullopt);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c.layers[i].mixer, i == 0 || i == 2 || i == 5 ? "attention" : "deltanet") << i;

  std::vector<LayerSpec> explicit_layers(6, c.default_layer());
  explicit_layers[4].mixer = "retnet";
  resolve_layers(c, a, explicit_layers);  // explicit layers replace the attn block's choice
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.layers[i].mixer, i == 4 ? "retnet" : "deltanet") << i;
}

TEST(ModelConfig, ScheduleErrorsNameTheEntry) {
  ModelConfig c = six_deltanet_layers();
  AttnBlock a = attention_block(c);
  EXPECT_EQ(schedule_error(c, a), "attn: the 'attn' block needs 'layers: [i, j, ...]' or 'every: N'");
  a.layers = std::vector<int64_t>{1, 6};
  EXPECT_EQ(schedule_error(c, a),
            "attn.layers.1: layer index 6 is out of range: num_hidden_layers is 6 (indices 0..5)");
  a.layers.reset();
  a.every = 0;
  EXPECT_EQ(schedule_error(c, a), "attn.every: 'every' must be at least 1");
  EXPECT_EQ(schedule_error(c, std::nullopt, std::vector<LayerSpec>(5, c.default_layer())),
            "layers: 'layers' has 5 entries but num_hidden_layers is 6");
  EXPECT_EQ(schedule_error(c, std::nullopt, std::vector<LayerSpec>(1, c.default_layer())),
            "layers: 'layers' has 1 entry but num_hidden_layers is 6");
  c.expand_v = 1.0 / 64;  // value dim 1 for 4 heads
  EXPECT_NE(schedule_error(c, std::nullopt).find(": the deltanet layers' key dim (64) and value dim (1) must be"),
            std::string::npos);
}

TEST(ModelConfig, MixerNames) {
  for (const std::string& name : mixer_names()) EXPECT_EQ(mixer_descriptor(name).name, name);
  EXPECT_EQ(find_mixer("gla2"), nullptr);
  EXPECT_THROW(mixer_descriptor("gla2"), Error);
}

}  // namespace
}  // namespace linattn
