// Config parsing: defaults, the hybrid schedule, overrides, and errors that point at FILE:LINE:COL.
#include "train/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "testing.h"
#include "train/checkpoint.h"

namespace linattn {
namespace {

const char* kBase = R"(model:
  hidden_size: 64
  num_hidden_layers: 6
  num_heads: 4
train:
  max_steps: 10
)";

// The message parse_config throws for `yaml` (read as test.yaml) with `overrides`, or "".
std::string config_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return testing::error_of([&] { parse_config(yaml, "test.yaml", overrides); });
}

TEST(Config, DefaultsAndDerivedValues) {
  Config c = parse_config(kBase, "test.yaml");
  EXPECT_EQ(c.model.hidden_size, 64);
  EXPECT_EQ(c.model.num_kv_heads, 4);
  EXPECT_EQ(c.model.layers.size(), 6u);
  for (const LayerSpec& l : c.model.layers) EXPECT_EQ(l.mixer, "gla");
  EXPECT_EQ(c.model.resolved_intermediate_size(), 256);  // 4 * 64 * 2/3 = 170.7 -> 256
  EXPECT_EQ(c.model.resolved_expand_k("gla"), 0.5);
  EXPECT_EQ(c.train.micro_batch_size, 0);  // the trainer makes it batch_size / world size
  EXPECT_EQ(c.distributed.bucket_mb, 4);
  EXPECT_NE(c.text.find("hidden_size: 64"), std::string::npos);
}

TEST(Config, AttnBlockPicksLayers) {
  Config c = parse_config(std::string(kBase) + "  # placeholder\n", "t.yaml",
                          {"model.mixer=deltanet", "model.attn.layers=[2, 5]"});
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c.model.layers[i].mixer, i == 2 || i == 5 ? "attention" : "deltanet") << i;
  EXPECT_EQ(c.model.layers[2].window_size, 0);  // no window_size in the attn block: global

  // Samba-style: every other layer sliding-window attention, one line.
  c = parse_config(kBase, "t.yaml", {"model.attn={every: 2, window_size: 64}"});
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(c.model.layers[i].mixer, i % 2 ? "attention" : "gla") << i;
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
  EXPECT_EQ(c.model.layers[0].mixer, "retnet");
  EXPECT_EQ(c.model.layers[1].window_size, 32);
  EXPECT_EQ(c.model.layers[1].num_kv_heads, 2);
  EXPECT_EQ(c.model.layers[2].mixer, "gated_deltanet");
  EXPECT_EQ(c.train.max_time, 90);
}

TEST(Config, UnknownKeyGetsLineColumnAndSuggestion) {
  std::string msg = config_error("model:\n  hiden_size: 64\ntrain: {max_steps: 1}\n");
  EXPECT_EQ(msg, "test.yaml:2:3: unknown key 'hiden_size' in 'model' (did you mean 'hidden_size'?)");
  msg = config_error("modle: {}\n");
  EXPECT_NE(msg.find("test.yaml:1:1: unknown key 'modle' (did you mean 'model'?)"), std::string::npos) << msg;
}

TEST(Config, WrongTypesAndRanges) {
  std::string msg = config_error("model:\n  hidden_size: big\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:2:16: 'hidden_size' has the wrong type: expected an integer, got 'big'"),
            std::string::npos)
      << msg;
  msg = config_error("model:\n  hidden_size: 65\n  num_heads: 4\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:3:14:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not divisible by 'num_heads'"), std::string::npos) << msg;
  msg = config_error(std::string(kBase) + "  lr: -1\n");
  EXPECT_NE(msg.find("test.yaml:7:7: 'lr' must be positive"), std::string::npos) << msg;
  msg = config_error("model: {num_hidden_layers: 4}\n");
  EXPECT_NE(msg.find("no bound"), std::string::npos) << msg;
  msg = config_error("model: {mixer: gla2}\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:1:16: unknown mixer 'gla2' (did you mean 'gla'?)"), std::string::npos) << msg;
  // Far from every mixer: the list says what it lists.
  msg = config_error("model: {mixer: xyzzy}\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:1:16: unknown mixer 'xyzzy' (known mixers: "), std::string::npos) << msg;
  msg = config_error(std::string(kBase) + "distributed:\n  bucket_mb: 0\n");
  EXPECT_EQ(msg, "test.yaml:8:14: 'bucket_mb' must be in (0, 65536] (MiB of gradients per all-reduce; the default is 4)");
  msg = config_error(std::string(kBase) + "distributed: {bucket_size: 8}\n");
  EXPECT_NE(msg.find("test.yaml:7:15: unknown key 'bucket_size' in 'distributed' (known keys: bucket_mb)"),
            std::string::npos)
      << msg;
}

TEST(Config, DeviceKeys) {
  Config c = parse_config(kBase, "test.yaml");
  EXPECT_EQ(c.train.device, "cpu");
  EXPECT_EQ(c.train.precision, "fp32");
  EXPECT_FALSE(c.train.tf32);
  c = parse_config(std::string(kBase) + "  device: cuda\n  tf32: true\n", "test.yaml");
  EXPECT_EQ(c.train.device, "cuda");
  EXPECT_TRUE(c.train.tf32);
  EXPECT_EQ(c.where("train.device"), "test.yaml:7:11");
  EXPECT_EQ(parse_config(kBase, "test.yaml", {"train.device=cuda"}).train.device, "cuda");
  // The resolved config (config.yaml, checkpoints) keeps them.
  EXPECT_EQ(parse_config(c.text, "resolved.yaml").train.device, "cuda");
  EXPECT_TRUE(parse_config(c.text, "resolved.yaml").train.tf32);

  std::string msg = config_error(std::string(kBase) + "  device: gpu\n");
  EXPECT_NE(msg.find("test.yaml:7:11: 'device' must be cpu or cuda, got 'gpu'"), std::string::npos) << msg;
  // bf16 parses on either device; whether this CPU has bf16 products is the trainer's check at
  // start-up (tests/train/startup_test.cpp).
  EXPECT_EQ(parse_config(std::string(kBase) + "  precision: bf16\n", "test.yaml").train.precision, "bf16");
  EXPECT_EQ(parse_config(std::string(kBase) + "  precision: bf16\n  device: cuda\n", "test.yaml").train.precision,
            "bf16");
  msg = config_error(std::string(kBase) + "  precision: bf16\n  dtype: f64\n");
  EXPECT_NE(msg.find("test.yaml:7:14: 'precision: bf16' keeps float32 weights and activations: it needs "
                     "train.dtype: f32"),
            std::string::npos)
      << msg;
  msg = config_error(std::string(kBase) + "  precision: fp8\n");
  EXPECT_NE(msg.find("test.yaml:7:14: 'precision' must be fp32 or bf16, got 'fp8'"), std::string::npos) << msg;
  msg = config_error(std::string(kBase) + "  dtype: f64\n  device: cuda\n");
  EXPECT_NE(msg.find("test.yaml:7:10: 'dtype: f64' runs on the CPU only"), std::string::npos) << msg;
  msg = config_error(std::string(kBase) + "  tf32: maybe\n");
  EXPECT_NE(msg.find("test.yaml:7:9: 'tf32' has the wrong type: expected true or false"), std::string::npos) << msg;
}

TEST(Config, LayerIndexOutOfRange) {
  std::string msg = config_error(std::string(kBase) + "", {"model.attn.layers=[1, 6]"});
  EXPECT_NE(msg.find("layer index 6 is out of range"), std::string::npos) << msg;
  msg = config_error("model:\n  num_hidden_layers: 2\n  attn:\n    layers: [0, 2]\ntrain: {max_steps: 1}\n");
  EXPECT_NE(msg.find("test.yaml:4:17: layer index 2 is out of range: num_hidden_layers is 2"), std::string::npos)
      << msg;
}

TEST(Config, OverridesAreCheckedAndNamed) {
  Config c = parse_config(kBase, "t.yaml", {"train.lr=1e-4", "train.lr_min=0"});
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-4);
  EXPECT_EQ(c.where("train.lr"), "--set train.lr=1e-4");
  EXPECT_EQ(c.where("model.hidden_size"), "t.yaml:2:16");
  std::string msg = config_error(kBase, {"train.lr=-3"});
  EXPECT_EQ(msg, "--set train.lr=-3: 'lr' must be positive");
  msg = config_error(kBase, {"train.learning_rate=3"});
  EXPECT_NE(msg.find("unknown key 'learning_rate'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--set train.learning_rate=3"), std::string::npos) << msg;
  msg = config_error(kBase, {"nonsense"});
  EXPECT_EQ(msg, "--set nonsense: expected section.key=value (e.g. train.lr=1e-3)");
}

// Errors inside a --set value name the flag, not a position in the file.
TEST(Config, OverrideErrorsNameTheFlag) {
  EXPECT_EQ(config_error(kBase, {"model.attn={every: 0}"}), "--set model.attn={every: 0}: 'every' must be at least 1");
  EXPECT_EQ(config_error(kBase, {"model.attn.layers=[1, 6]"}),
            "--set model.attn.layers=[1, 6]: layer index 6 is out of range: num_hidden_layers is 6 (indices 0..5)");
  EXPECT_EQ(config_error(kBase, {"model.attn.window_size=3"}),
            "--set model.attn.window_size=3: the 'attn' block needs 'layers: [i, j, ...]' or 'every: N'");
  EXPECT_EQ(config_error(kBase, {"model.attn={every: 2}", "model.attn.window_size=-1"}),
            "--set model.attn.window_size=-1: 'window_size' must be in [0, 16777216] (0 = global)");
  EXPECT_EQ(config_error(kBase, {"train.lr="}),
            "--set train.lr=: no value after '=': expected section.key=value (e.g. train.lr=1e-3)");
  EXPECT_EQ(config_error(kBase, {"train.lr"}), "--set train.lr: expected section.key=value (e.g. train.lr=1e-3)");
}

// A config without a model section (or with an empty one) is the defaults, not an attn block.
TEST(Config, NoModelSectionMeansDefaults) {
  for (const char* yaml : {"train: {max_steps: 1}\n", "model:\ntrain: {max_steps: 1}\n",
                           "model: {}\ntrain: {max_steps: 1}\n"}) {
    Config c = parse_config(yaml, "test.yaml");
    ASSERT_EQ(c.model.layers.size(), 4u) << yaml;
    for (const LayerSpec& l : c.model.layers) EXPECT_EQ(l.mixer, "gla") << yaml;
  }
  EXPECT_EQ(config_error("model:\n"), "test.yaml: the run has no bound: set 'max_steps', 'max_tokens' or 'max_time'");
}

TEST(Config, EmptyListOrDirectoryIsRefused) {
  const std::string empty =
      "test.yaml is empty: a config has the sections model, data, train, checkpoint and distributed; start from "
      "configs/default.yaml";
  EXPECT_EQ(config_error(""), empty);
  EXPECT_EQ(config_error("# nothing but a comment\n\n"), empty);
  EXPECT_EQ(config_error("- model\n- train\n"),
            "test.yaml: expected a mapping of sections (model:, data:, train:, ...), found a list");
  std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(testing::error_of([&] { load_config(dir); }),
            dir + " is a directory, expected a YAML file (e.g. configs/default.yaml)");
}

TEST(Config, DuplicateKeysNameBothLines) {
  EXPECT_EQ(config_error(std::string(kBase) + "  lr: 1e-3\n  lr: 2e-3\n"),
            "test.yaml:8:3: duplicate key 'lr' in 'train': it is also set at line 7; remove one of them");
  EXPECT_EQ(config_error(std::string(kBase) + "train: {lr: 1e-3}\n"),
            "test.yaml:7:1: duplicate key 'train': it is also set at line 5; remove one of them");
  EXPECT_EQ(config_error("model:\n  layers:\n    - {mixer: gla, mixer: retnet}\ntrain: {max_steps: 1}\n"),
            "test.yaml:3:20: duplicate key 'mixer' in 'model.layers.0': it is also set at line 3; remove one of them");
}

TEST(Config, NumbersMustBeFinite) {
  EXPECT_EQ(config_error(std::string(kBase) + "  lr: .inf\n"), "test.yaml:7:7: 'lr' must be a finite number, got .inf");
  EXPECT_EQ(config_error(std::string(kBase) + "  grad_clip: .nan\n"),
            "test.yaml:7:14: 'grad_clip' must be a finite number, got .nan");
  EXPECT_EQ(config_error(kBase, {"model.initializer_range=.inf"}),
            "--set model.initializer_range=.inf: 'initializer_range' must be a finite number, got .inf");
  EXPECT_EQ(config_error(kBase, {"model.rope_theta=-.inf"}),
            "--set model.rope_theta=-.inf: 'rope_theta' must be a finite number, got -.inf");
  std::string msg = config_error(kBase, {"train.max_time=1000000h"});
  EXPECT_NE(msg.find("--set train.max_time=1000000h: 'max_time' must be a duration up to a year (8784h)"),
            std::string::npos)
      << msg;
  msg = config_error(kBase, {"train.max_time=inf"});
  EXPECT_NE(msg.find("'max_time' must be a duration up to a year"), std::string::npos) << msg;
  EXPECT_EQ(parse_config(kBase, "t.yaml", {"train.max_time=8784h"}).train.max_time, 8784.0 * 3600);
}

// Each size is bounded, and so are the products the model and the batch are built from.
TEST(Config, SizesAreBoundedAndNamed) {
  EXPECT_EQ(config_error("model:\n  hidden_size: 100000000000\ntrain: {max_steps: 1}\n"),
            "test.yaml:2:16: 'hidden_size' must be in [1, 65536]");
  EXPECT_EQ(config_error(kBase, {"model.vocab_size=1e30"}),
            "--set model.vocab_size=1e30: 'vocab_size' is too large: 1e30 (at most 2^53 = 9007199254740992)");
  // Above 2^53 a double cannot tell neighbours apart: 2^53 + 1 is refused, not rounded to 2^53 (two
  // "different" seeds would be one), and so is a fraction that a double would round to a whole number.
  EXPECT_EQ(config_error(kBase, {"train.seed=9007199254740993"}),
            "--set train.seed=9007199254740993: 'seed' is too large: 9007199254740993 (at most 2^53 = "
            "9007199254740992)");
  EXPECT_EQ(config_error("train:\n  max_steps: 1\n  seed: 9007199254740993\n"),
            "test.yaml:3:9: 'seed' is too large: 9007199254740993 (at most 2^53 = 9007199254740992)");
  EXPECT_EQ(config_error(kBase, {"train.seed=4503599627370496.5"}),
            "--set train.seed=4503599627370496.5: 'seed' must be a whole number, got 4503599627370496.5");
  EXPECT_EQ(parse_config(kBase, "t.yaml", {"train.seed=9007199254740992"}).train.seed, 9007199254740992u);
  EXPECT_EQ(parse_config(kBase, "t.yaml", {"train.seed=9007199254740991"}).train.seed, 9007199254740991u);
  EXPECT_EQ(config_error(kBase, {"train.seed=-1"}),
            "--set train.seed=-1: 'seed' must not be negative, got -1");
  EXPECT_EQ(config_error(kBase, {"data.seq_len=100000000"}), "--set data.seq_len=100000000: 'seq_len' must be in [1, 16777216]");
  EXPECT_EQ(config_error(kBase, {"train.batch_size=2000000"}),
            "--set train.batch_size=2000000: 'batch_size' must be in [1, 1048576]");
  EXPECT_EQ(config_error(kBase, {"model.num_hidden_layers=5000"}),
            "--set model.num_hidden_layers=5000: 'num_hidden_layers' must be in [1, 1024]");
  EXPECT_EQ(config_error(kBase, {"model.expand_v=100"}), "--set model.expand_v=100: 'expand_v' must be in (0, 16]");
  std::string msg = config_error(kBase, {"model.vocab_size=16777216", "model.hidden_size=65536"});
  EXPECT_NE(msg.find("--set model.hidden_size=65536: the model would have about"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than 2^40: lower hidden_size"), std::string::npos) << msg;
  msg = config_error(kBase, {"data.seq_len=16777216", "train.batch_size=65536"});
  EXPECT_NE(msg.find("--set data.seq_len=16777216: one micro-batch's activations would hold more than 2^40"),
            std::string::npos)
      << msg;
}

// The resolved config.yaml: numbers that YAML 1.1 readers (PyYAML) read as numbers too, and the
// expand_k that runs.
TEST(Config, EmittedNumbersAndExpandK) {
  std::string text = parse_config(kBase, "t.yaml").text;
  EXPECT_NE(text.find("norm_eps: 1.0e-06\n"), std::string::npos) << text;
  EXPECT_NE(text.find("adam_eps: 1.0e-08\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lr: 0.003\n"), std::string::npos) << text;
  // YAML 1.1 floats need a '.' before the exponent.
  EXPECT_FALSE(std::regex_search(text, std::regex(": -?[0-9]+[eE]"))) << text;
  EXPECT_NE(text.find("expand_k: 0.5\n"), std::string::npos) << text;  // GLA's default
  text = parse_config(kBase, "t.yaml", {"model.mixer=deltanet", "model.attn={every: 2}"}).text;
  EXPECT_NE(text.find("expand_k: 1\n"), std::string::npos) << text;
  // GLA (0.5) beside DeltaNet (1): -1, each mixer's default.
  text = parse_config(kBase, "t.yaml", {"model.layers=[gla, deltanet, gla, attention, gla, gla]"}).text;
  EXPECT_NE(text.find("expand_k: -1\n"), std::string::npos) << text;
}

// What checkpoints compare: a config written, read back and written again is the same text.
TEST(Config, EmitParseRoundTrip) {
  std::vector<std::pair<std::string, Config>> cases;
  cases.emplace_back("defaults", parse_config("train: {max_steps: 1}\n", "t.yaml"));
  for (const auto& entry : std::filesystem::directory_iterator("configs"))
    if (entry.path().extension() == ".yaml") cases.emplace_back(entry.path().string(), load_config(entry.path().string()));
  ASSERT_GE(cases.size(), 3u) << "run from the project root";
  cases.emplace_back("samba", parse_config(kBase, "t.yaml", {"model.attn={every: 2, window_size: 64, num_kv_heads: 2}"}));
  cases.emplace_back("deltanet", parse_config(kBase, "t.yaml", {"model.mixer=deltanet", "model.attn.layers=[2, 5]",
                                                                "model.expand_v=2", "train.lr=1e-4", "train.lr_min=1e-5"}));
  cases.emplace_back("mixed", parse_config(kBase, "t.yaml",
                                           {"model.layers=[linear_attn, gla, retnet, deltanet, gated_deltanet, "
                                            "{mixer: attention, window_size: 32, rope_theta: 500000}]",
                                            "model.feature_map=relu", "model.normalize=true",
                                            "model.tie_word_embeddings=true", "train.max_time=1.5h"}));
  for (const auto& [name, c] : cases) {
    Config again = parse_config(c.text, "emitted.yaml");
    EXPECT_EQ(again.text, c.text) << name;
    ASSERT_EQ(again.model.layers.size(), c.model.layers.size()) << name;
    for (size_t i = 0; i < c.model.layers.size(); ++i) {
      EXPECT_EQ(again.model.layers[i].mixer, c.model.layers[i].mixer) << name << " layer " << i;
      if (c.model.layers[i].mixer == "attention") continue;  // has no key expansion
      EXPECT_EQ(again.model.resolved_expand_k(again.model.layers[i].mixer),
                c.model.resolved_expand_k(c.model.layers[i].mixer))
          << name << " layer " << i;
    }
  }
}

// data.document_boundaries: reset by default on a token corpus, cross on request, anything else
// refused at its position. (MQAR's default, cross: Config.MqarKeysRoundTrip.)
TEST(Config, Recompute) {
  EXPECT_EQ(parse_config(kBase, "t.yaml").train.recompute, ops::Recompute::none);
  for (auto [name, mode] : {std::pair{"none", ops::Recompute::none}, {"selective", ops::Recompute::selective},
                            {"full", ops::Recompute::full}}) {
    Config c = parse_config(std::string(kBase) + "  recompute: " + name + "\n", "t.yaml");
    EXPECT_EQ(c.train.recompute, mode) << name;
    EXPECT_EQ(parse_config(c.text, "emitted.yaml").train.recompute, mode) << name;
    EXPECT_EQ(parse_config(kBase, "t.yaml", {std::string("train.recompute=") + name}).train.recompute, mode) << name;
  }
  std::string msg = config_error(std::string(kBase) + "  recompute: partial\n");
  EXPECT_NE(msg.find("test.yaml:7:14: 'recompute' must be none (keep what backward reads), selective (recompute the "
                     "norms, SwiGLUs, gates and mixer cores) or full (keep each block's input only, replay the block), "
                     "got 'partial'"),
            std::string::npos)
      << msg;
  EXPECT_EQ(config_error(kBase, {"train.recompute=true"}).rfind("--set train.recompute=true: 'recompute' must be none", 0),
            0u);
}

TEST(Config, DocumentBoundaries) {
  EXPECT_EQ(parse_config(kBase, "t.yaml").data.document_boundaries, DocumentBoundaries::reset);
  Config c = parse_config(std::string(kBase) + "data:\n  document_boundaries: cross\n", "t.yaml");
  EXPECT_EQ(c.data.document_boundaries, DocumentBoundaries::cross);
  EXPECT_EQ(parse_config(c.text, "emitted.yaml").data.document_boundaries, DocumentBoundaries::cross);
  std::string msg = config_error(std::string(kBase) + "data:\n  document_boundaries: split\n");
  EXPECT_NE(msg.find("test.yaml:8:24: 'document_boundaries' must be cross or reset, got 'split'"), std::string::npos)
      << msg;
  EXPECT_EQ(config_error(kBase, {"data.document_boundaries=yes"}),
            "--set data.document_boundaries=yes: 'document_boundaries' must be cross or reset, got 'yes'");
  // A checkpoint's config from before the key: every window was one sequence then.
  std::string old_text = parse_config(kBase, "t.yaml").text;
  const std::string line = "  document_boundaries: reset\n";
  ASSERT_NE(old_text.find(line), std::string::npos) << old_text;
  old_text.erase(old_text.find(line), line.size());
  EXPECT_EQ(parse_config(upgrade_saved_config(old_text), "ckpt").data.document_boundaries, DocumentBoundaries::cross);
}

// model.mlp: swiglu by default (config.yaml then reads as before: no mlp key); none written back,
// without the MLP's sizes, which it ignores; anything else refused at its position.
TEST(Config, MlpNoneLeavesOutTheMLPSizes) {
  const Config swiglu = parse_config(kBase, "t.yaml");
  EXPECT_EQ(swiglu.model.mlp, Mlp::swiglu);
  EXPECT_EQ(swiglu.text.find("mlp:"), std::string::npos) << swiglu.text;
  EXPECT_NE(swiglu.text.find("intermediate_size: 256"), std::string::npos) << swiglu.text;
  // Switched off on top of a written config (a sweep over mlp): the sizes there are ignored.
  const Config none = parse_config(swiglu.text, "emitted.yaml", {"model.mlp=none"});
  EXPECT_EQ(none.model.mlp, Mlp::none);
  EXPECT_EQ(none.model.resolved_intermediate_size(), 0);
  EXPECT_NE(none.text.find("  mlp: none\n"), std::string::npos) << none.text;
  EXPECT_EQ(none.text.find("intermediate_size"), std::string::npos) << none.text;
  EXPECT_EQ(none.text.find("hidden_ratio"), std::string::npos) << none.text;
  EXPECT_EQ(parse_config(none.text, "again.yaml").text, none.text);
  const std::string msg = config_error("model:\n  mlp: gelu\ntrain: {max_steps: 1}\n");
  EXPECT_EQ(msg, "test.yaml:2:8: 'mlp' must be swiglu (down(silu(gate(x)) * up(x)) after every mixer) or none "
                 "(blocks of norm + mixer only), got 'gelu'");
}

TEST(Config, SyntaxErrorHasALine) {
  std::string msg = config_error("model:\n  hidden_size: [1, 2\ntrain: {}\n");
  EXPECT_NE(msg.find("test.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("tab"), std::string::npos) << msg;  // no tab here, no hint about one
  // A tab in the indentation: YAML's own words, then what to do.
  EXPECT_EQ(config_error("model:\n\thidden_size: 64\n"),
            "test.yaml:2:13: YAML syntax error: illegal map value; line 2 is indented with a tab: YAML indents with "
            "spaces only (replace the tab with spaces)");
  EXPECT_EQ(config_error("model:\n  hidden_size: 64\n\ttrain: 1\n"),
            "test.yaml:3:1: YAML syntax error: illegal tab when looking for indentation; line 3 is indented with a "
            "tab: YAML indents with spaces only (replace the tab with spaces)");
}

// Checkpoints written before expand_k was resolved and floats had a '.' compare their config
// through the parser (train/checkpoint.cpp), which writes today's text for it.
TEST(Config, EarlierEmittedTextReadsTheSame) {
  std::string now = parse_config(kBase, "t.yaml").text;
  std::string before = std::regex_replace(now, std::regex("expand_k: 0.5"), "expand_k: -1");
  before = std::regex_replace(before, std::regex("1\\.0e-0"), "1e-0");
  ASSERT_NE(before, now);
  EXPECT_EQ(parse_config(before, "checkpoint").text, now);
}

// MQAR keys: read, written back, and checked against each other and the model, at FILE:LINE:COL.
const char* kMqar = R"(model:
  vocab_size: 256
  hidden_size: 64
data:
  source: mqar
  seq_len: 64
  mqar:
    vocab_size: 256
    num_kv_pairs: 8
    power_a: 0.05
train: {max_steps: 1}
)";

TEST(Config, MqarKeysRoundTrip) {
  Config c = parse_config(kMqar, "test.yaml", {"data.mqar.seed=4"});
  EXPECT_EQ(c.data.source, "mqar");
  EXPECT_EQ(c.data.mqar.vocab_size, 256);
  EXPECT_EQ(c.data.mqar.num_kv_pairs, 8);
  EXPECT_EQ(c.data.mqar.power_a, 0.05);
  EXPECT_EQ(c.data.mqar.num_train_examples, 100000u);  // defaults
  EXPECT_EQ(c.data.mqar.num_val_examples, 3000u);
  EXPECT_EQ(c.data.mqar.seed, 4u);
  EXPECT_EQ(c.data.document_boundaries, DocumentBoundaries::cross);  // one example per row: nothing to cut
  Config again = parse_config(c.text, "config.yaml");
  EXPECT_EQ(again.data.mqar, c.data.mqar);
  EXPECT_EQ(again.text, c.text);
  // Token runs write no MQAR keys: their config text is as before.
  EXPECT_EQ(parse_config(kBase, "test.yaml").text.find("mqar"), std::string::npos);
}

TEST(Config, MqarErrorsNameTheLinesToChange) {
  // The model's vocabulary must hold the task's: both lines are named.
  std::string msg = config_error(kMqar, {"data.mqar.vocab_size=512"});
  EXPECT_NE(msg.find("test.yaml:2:15: vocab_size 256 is smaller than the MQAR task's vocabulary 512 "
                     "(data.mqar.vocab_size, --set data.mqar.vocab_size=512): set model.vocab_size to at least 512"),
            std::string::npos)
      << msg;
  std::string yaml = kMqar;
  yaml.replace(yaml.find("vocab_size: 256"), 15, "vocab_size: 128");
  msg = config_error(yaml);
  EXPECT_NE(msg.find("test.yaml:2:15: vocab_size 128 is smaller than the MQAR task's vocabulary 256 "
                     "(data.mqar.vocab_size, test.yaml:8:17)"),
            std::string::npos)
      << msg;
  // Too many pairs for the sequence, or for the keys of the vocabulary.
  msg = config_error(kMqar, {"data.mqar.num_kv_pairs=17"});
  EXPECT_NE(msg.find("test.yaml:6:12: seq_len 64 is too short for 17 key-value pairs and their queries: MQAR needs "
                     "seq_len >= 4 num_kv_pairs = 68"),
            std::string::npos)
      << msg;
  msg = config_error(kMqar, {"data.mqar.vocab_size=16", "model.vocab_size=16"});
  EXPECT_NE(msg.find("--set data.mqar.vocab_size=16: 'vocab_size' 16 must be in [2 num_kv_pairs + 2, 2^24] = [18, "),
            std::string::npos)
      << msg;
  msg = config_error(std::string(kMqar) + "", {"data.mqar.power_a=0"});
  EXPECT_NE(msg.find("--set data.mqar.power_a=0: 'power_a' must be positive"), std::string::npos) << msg;
  // Unknown keys, an unknown source, and MQAR keys without the source.
  yaml = kMqar;
  yaml.replace(yaml.find("num_kv_pairs"), 12, "num_kv_pair");
  msg = config_error(yaml);
  EXPECT_NE(msg.find("test.yaml:9:5: unknown key 'num_kv_pair' in 'data.mqar' (did you mean 'num_kv_pairs'?)"),
            std::string::npos)
      << msg;
  msg = config_error(kMqar, {"data.source=mqra"});
  EXPECT_NE(msg.find("--set data.source=mqra: 'source' must be tokens (the prepared folder at data.path) or mqar"),
            std::string::npos)
      << msg;
  yaml = kMqar;
  yaml.replace(yaml.find("  source: mqar\n"), 14, "");
  msg = config_error(yaml);
  EXPECT_NE(msg.find("test.yaml:8:5: 'mqar' is set but data.source is 'tokens': set data.source: mqar"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace linattn
