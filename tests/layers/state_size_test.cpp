// The generation state of each mixer, counted by hand on a small model.
#include "layers/mixer.h"
#include "layers/state_size.h"

#include <gtest/gtest.h>

namespace linattn {
namespace {

// hidden 64 in 4 heads: head_dim 16; GLA's keys are half as wide (expand_k 0.5 by default).
ModelConfig four_layers() {
  ModelConfig c;
  c.hidden_size = 64;
  c.num_hidden_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  set_mixer_setting(c, "conv_size", int64_t(4));
  LayerSpec gla = c.default_layer(), delta = gla, window = gla, global = gla;
  gla.mixer = "gla";
  delta.mixer = "deltanet";
  window.mixer = "attention";
  window.window_size = 16;
  global.mixer = "attention";
  global.num_kv_heads = 2;
  c.layers = {gla, delta, window, global};
  return c;
}

TEST(StateSize, EachMixerCountedByHand) {
  const ModelConfig c = four_layers();
  const int64_t T = 100;
  // GLA: 4 heads of 8 x 16 = 512.
  EXPECT_EQ(layer_state_size(c, c.layers[0], T), 4 * 8 * 16);
  // DeltaNet: 4 heads of 16 x 16, plus the last 3 inputs of q, k (64 each) and v (64).
  EXPECT_EQ(layer_state_size(c, c.layers[1], T), 4 * 16 * 16 + 3 * (64 + 64 + 64));
  // Sliding window of 16: keys and values of the last 16 tokens, 4 kv heads of 16.
  EXPECT_EQ(layer_state_size(c, c.layers[2], T), 2 * 16 * 4 * 16);
  // Global attention with 2 kv heads: all 100 tokens.
  EXPECT_EQ(layer_state_size(c, c.layers[3], T), 2 * 100 * 2 * 16);
  EXPECT_EQ(state_size(c, T), 512 + 1600 + 2048 + 6400);
}

TEST(StateSize, OnlyAttentionGrowsWithTheSequence) {
  const ModelConfig c = four_layers();
  // Below the window both attention layers hold all 8 tokens; linear layers do not change.
  EXPECT_EQ(state_size(c, 8), 512 + 1600 + 2 * 8 * 4 * 16 + 2 * 8 * 2 * 16);
  EXPECT_EQ(state_size(c, 1000) - state_size(c, 100), 2 * 900 * 2 * 16);
}

TEST(StateSize, NormalizedLinearAttentionAndDeltaNetWithoutConvolution) {
  ModelConfig c = four_layers();
  c.layers[0].mixer = "linear_attn";
  EXPECT_EQ(layer_state_size(c, c.layers[0], 10), 4 * 16 * 16);
  set_mixer_setting(c, "normalize", true);  // its normalizer z: one key_dim vector
  EXPECT_EQ(layer_state_size(c, c.layers[0], 10), 4 * 16 * 16 + 64);
  set_mixer_setting(c, "use_short_conv", false);
  EXPECT_EQ(layer_state_size(c, c.layers[1], 10), 4 * 16 * 16);
}

}  // namespace
}  // namespace linattn
