// The mixers' own settings (layers/model_config.h's MixerSettings, declared by the mixers' descriptors):
// a config written before they left ModelConfig reads the same and is written back identically, and
// the settings are values of the config (copied with it, defaults until set).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <variant>
#include <vector>

#include "layers/mixer.h"
#include "layers/model.h"
#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

// The config.yaml that linattn-train wrote (and stored in its checkpoints) at commit b0f49b0, when
// every mixer's setting was a member of ModelConfig, for a hybrid with each setting away from its
// default (only out_dir changed). linattn-train of this build resumes that run's checkpoint with the
// same losses (checked by hand when the settings moved).
const char* kWrittenBeforeTheMove = R"(# resolved from c.yaml
model:
  vocab_size: 64
  hidden_size: 32
  num_hidden_layers: 5
  num_heads: 2
  num_kv_heads: 2
  expand_k: -1
  expand_v: 1
  hidden_ratio: 4
  intermediate_size: 256
  norm_eps: 1.0e-06
  tie_word_embeddings: false
  initializer_range: 0.02
  mixer: gla
  chunk_size: 64
  window_size: 0
  rope_theta: 10000
  feature_map: relu
  normalize: true
  use_short_conv: false
  conv_size: 3
  gated_deltanet_decay: logsigmoid
  state_size: 16
  n_groups: 2
  layers:
    - {mixer: linear_attn, num_heads: 2}
    - {mixer: deltanet, num_heads: 2}
    - {mixer: gated_deltanet, num_heads: 2}
    - {mixer: mamba2, num_heads: 2}
    - {mixer: gla, num_heads: 2}
data:
  path: data/cache/sotu-bytes
  seq_len: 64
  val_tokens: 0
  document_boundaries: cross
  source: mqar
  mqar:
    vocab_size: 64
    num_kv_pairs: 4
    power_a: 0.01
    num_train_examples: 64
    num_val_examples: 16
    seed: 0
train:
  batch_size: 4
  micro_batch_size: 0
  lr: 0.003
  lr_min: 0.0003
  warmup_steps: 100
  schedule: cosine
  weight_decay: 0.1
  beta1: 0.9
  beta2: 0.95
  adam_eps: 1.0e-08
  grad_clip: 1
  max_steps: 2
  max_tokens: 0
  max_time: 0
  seed: 1234
  threads: 0
  eval_every: 0
  log_every: 1
  dtype: f32
  out_dir: runs/settings
  max_bad_steps: 5
  sample_every: 0
  sample_tokens: 64
  sample_prompt: ""
  device: cpu
  precision: fp32
  tf32: false
checkpoint:
  every: 1
  keep_last: 3
distributed:
  bucket_mb: 4
)";

TEST(MixerSettings, AConfigWrittenBeforeTheMoveReadsAndWritesTheSame) {
  const Config c = parse_config(kWrittenBeforeTheMove, "c.yaml");
  // Keys added since are written back with their defaults: train.log_grad_norms,
  // train.cuda_graphs, train.recompute.
  std::string written_back = kWrittenBeforeTheMove;
  const std::string log_every = "  log_every: 1\n";
  written_back.insert(written_back.find(log_every) + log_every.size(), "  log_grad_norms: false\n");
  const std::string tf32 = "  tf32: false\n";
  written_back.insert(written_back.find(tf32) + tf32.size(), "  cuda_graphs: true\n  recompute: none\n");
  EXPECT_EQ("# resolved from c.yaml\n" + c.text, written_back);  // the trainer heads config.yaml so
  const std::pair<const char*, ConfigValue> expected[] = {
      {"feature_map", std::string("relu")}, {"normalize", true},  {"use_short_conv", false},
      {"conv_size", int64_t(3)},           {"gated_deltanet_decay", std::string("logsigmoid")},
      {"state_size", int64_t(16)},         {"n_groups", int64_t(2)}};
  for (const auto& [key, value] : expected) EXPECT_EQ(mixer_setting(c.model, key), value) << key;
  // The settings reach the layers: mamba2's B and C have state_size channels in n_groups groups,
  // DeltaNet has no short convolution, Gated DeltaNet the logsigmoid decay's bias.
  const Model model(c.model, DType::f32);
  std::vector<std::string> names;
  for (size_t i = 0; i < model.params().size(); ++i) names.push_back(model.params().name(int(i)));
  auto has = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  EXPECT_FALSE(has("model.layers.1.attn.q_conv1d.weight"));
  EXPECT_TRUE(has("model.layers.2.attn.a_proj.bias"));
  EXPECT_FALSE(has("model.layers.2.attn.A_log"));
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "model.layers.3.attn.conv1d.weight") {  // x (32 channels), B and C (2 groups x 16 each); width 3
      EXPECT_EQ(model.params()[int(i)].shape(), (Shape{32 + 2 * 2 * 16, 3}));
    }
  }
}

TEST(MixerSettings, AreValuesOfTheConfig) {
  ModelConfig a;
  EXPECT_EQ(mixer_setting(a, "state_size"), ConfigValue(int64_t(64)));  // the default, never written
  ModelConfig b = a;
  set_mixer_setting(b, "state_size", int64_t(16));
  set_mixer_setting(b, "feature_map", std::string("relu"));
  ModelConfig c = b;
  set_mixer_setting(c, "state_size", int64_t(8));
  EXPECT_EQ(mixer_setting(a, "state_size"), ConfigValue(int64_t(64)));
  EXPECT_EQ(mixer_setting(b, "state_size"), ConfigValue(int64_t(16)));
  EXPECT_EQ(mixer_setting(c, "state_size"), ConfigValue(int64_t(8)));
  EXPECT_EQ(mixer_setting(c, "feature_map"), ConfigValue(std::string("relu")));
  EXPECT_EQ(testing::error_of([&] { mixer_setting(a, "hiden_size"); }), "no mixer has the config key 'hiden_size'");
  EXPECT_EQ(testing::error_of([&] { set_mixer_setting(a, "state_size", 16.0); }),
            "set_mixer_setting: 'state_size' takes a value of another type (bool, int64_t, double or std::string) "
            "than the one given");
}

}  // namespace
}  // namespace linattn
