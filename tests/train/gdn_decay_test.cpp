// model.gated_deltanet_decay: fla's parameterization by default, and a checkpoint written before
// the key existed (its config has no such key, its weights a_proj.bias) resumes with its own decay.
#include <cmath>
#include <filesystem>

#include "testing.h"
#include "layers/mixer.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

class GdnDecay : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-gdn-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// The model's gated_deltanet_decay, as config.yaml writes it.
std::string decay(const ModelConfig& c) { return std::get<std::string>(mixer_setting(c, "gated_deltanet_decay")); }

bool has_param(const Model& m, const std::string& name) {
  for (size_t i = 0; i < m.params().size(); ++i)
    if (m.params().name(int(i)) == name) return true;
  return false;
}

TEST_F(GdnDecay, DefaultIsFlasParameterizationWithFlasInit) {
  Config c = testing::tiny_config(dir_, {"model.layers=[gated_deltanet, attention]"});
  EXPECT_EQ(decay(c.model), "fla");
  EXPECT_NE(c.text.find("gated_deltanet_decay: fla"), std::string::npos) << c.text;
  Model m(c.model, DType::f64);
  m.params().initialize(1);
  EXPECT_FALSE(has_param(m, "model.layers.0.attn.a_proj.bias"));
  for (size_t i = 0; i < m.params().size(); ++i) {
    const std::string& name = m.params().name(int(i));
    const Tensor& t = m.params().values()[int(i)];
    if (name == "model.layers.0.attn.A_log") {
      for (int64_t h = 0; h < t.numel(); ++h) EXPECT_LT(t.data<double>()[h], std::log(16.0));  // log U(0, 16)
    } else if (name == "model.layers.0.attn.dt_bias") {
      for (int64_t h = 0; h < t.numel(); ++h) {
        const double dt = std::log1p(std::exp(t.data<double>()[h]));  // softplus(dt_bias) in [0.001, 0.1]
        EXPECT_GE(dt, 0.001 - 1e-12);
        EXPECT_LE(dt, 0.1 + 1e-12);
      }
    }
  }
  EXPECT_TRUE(has_param(m, "model.layers.0.attn.A_log"));
  EXPECT_TRUE(has_param(m, "model.layers.0.attn.dt_bias"));
}

TEST_F(GdnDecay, AnUnknownDecayIsRefusedAtItsLine) {
  std::string err = testing::error_of([] {
    parse_config("model:\n  hidden_size: 64\n  gated_deltanet_decay: softplus\ntrain: {max_steps: 1}\n", "c.yaml");
  });
  EXPECT_NE(err.find("c.yaml:3:25: 'gated_deltanet_decay' must be fla"), std::string::npos) << err;
  EXPECT_NE(err.find("got 'softplus'"), std::string::npos) << err;
}

TEST_F(GdnDecay, ACheckpointFromBeforeTheKeyResumesWithItsDecay) {
  const std::vector<std::string> schedule = {"model.layers=[gated_deltanet, attention]", "train.max_steps=6",
                                             "checkpoint.every=3", "checkpoint.keep_last=5"};
  std::vector<std::string> old_overrides = schedule;
  old_overrides.push_back("model.gated_deltanet_decay=logsigmoid");
  Config old = testing::tiny_config(dir_, old_overrides);
  TrainSummary full = Trainer(old).run();
  ASSERT_EQ(full.losses.size(), 6u);

  // The step-3 checkpoint as a build before the key wrote it: the same weights, no key in its config.
  Model model(old.model, DType::f32);
  AdamW opt(model.params(), old.train);
  TrainState state;
  load_checkpoint(checkpoint_path(dir_, 3), old, model, &opt, &state);
  Config before = old;
  const std::string line = "  gated_deltanet_decay: logsigmoid\n";
  ASSERT_NE(before.text.find(line), std::string::npos) << before.text;
  before.text.erase(before.text.find(line), line.size());
  const std::string legacy = (fs::path(dir_) / "legacy.h5").string();
  save_checkpoint(legacy, before, model, &opt, state);

  // Read back (by linattn-eval and linattn-export), its config says logsigmoid.
  EXPECT_EQ(decay(parse_config(checkpoint_config_text(legacy), legacy).model), "logsigmoid");

  // Resumed with a config that does not name the decay: logsigmoid, the same losses.
  Config now = testing::tiny_config(dir_, schedule);
  ASSERT_EQ(decay(now.model), "fla");
  Trainer resumed(now, legacy);
  EXPECT_TRUE(has_param(resumed.model(), "model.layers.0.attn.a_proj.bias"));
  TrainSummary rest = resumed.run();
  ASSERT_EQ(rest.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rest.losses[i], full.losses[3 + i]) << "step " << 3 + i;

  // A config that names fla explicitly is refused, naming the field.
  std::vector<std::string> fla = schedule;
  fla.push_back("model.gated_deltanet_decay=fla");
  std::string err = testing::error_of([&] { Trainer(testing::tiny_config(dir_, fla), legacy); });
  EXPECT_NE(err.find("model.gated_deltanet_decay: logsigmoid -> fla"), std::string::npos) << err;
}

}  // namespace
}  // namespace linattn
