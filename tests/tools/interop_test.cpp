// Weights in and out of the Python world: linattn-export --format safetensors writes fla's names,
// shapes and config.json (its field names checked against fla's configs, written down here from
// fla's configuration_*.py), --init-from reads them (or our .h5 files) back bit for bit, and a file
// that does not fit the config is refused naming every difference, before anything trains.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../train/train_testing.h"
#include "data/json.h"
#include "data/safetensors.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train/fla_export.h"
#include "train/init_from.h"
#include "train/trainer.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

// The __init__ arguments of fla's configs (fla-org/flash-linear-attention, fla/models/*/configuration_*.py)
// and the PretrainedConfig fields every HF config may carry.
const std::set<std::string> kCommon = {"model_type", "architectures", "torch_dtype", "vocab_size", "hidden_size",
                                       "num_hidden_layers", "num_heads", "hidden_ratio", "intermediate_size",
                                       "hidden_act", "norm_eps", "tie_word_embeddings", "initializer_range",
                                       "fuse_cross_entropy", "attn", "max_position_embeddings", "use_cache"};
const std::map<std::string, std::set<std::string>> kFlaFields = {
    {"gla", {"expand_k", "expand_v", "num_kv_heads", "feature_map", "attn_mode", "use_short_conv", "conv_size",
             "use_output_gate", "clamp_min", "elementwise_affine", "use_gk", "use_gv"}},
    {"delta_net", {"attn_mode", "expand_k", "expand_v", "use_gate", "use_short_conv", "allow_neg_eigval", "conv_size",
                   "use_beta", "use_output_norm", "qk_norm", "qk_activation"}},
    {"gated_deltanet", {"attn_mode", "expand_v", "use_gate", "use_short_conv", "allow_neg_eigval", "conv_size",
                        "head_dim", "num_v_heads"}},
    {"linear_attn", {"attn_mode", "expand_k", "expand_v", "num_kv_heads", "feature_map", "tie_feature_map_qk",
                     "norm_q", "norm_k", "norm_feature_map", "elementwise_affine"}},
    {"transformer", {"num_kv_heads", "qkv_bias", "qk_norm", "window_size", "rope_theta", "elementwise_affine"}},
    // fla/models/mamba2/configuration_mamba2.py (no hidden_ratio, intermediate_size or attn: checked
    // below; num_heads is derived there and kept as given)
    {"mamba2", {"head_dim", "state_size", "expand", "conv_kernel", "n_groups", "use_bias", "use_conv_bias",
                "conv_init", "A_init_range", "D_has_hdim", "residual_in_fp32", "dt_min", "dt_max", "dt_init_floor",
                "dt_limit", "rescale_prenorm_residual", "rmsnorm", "norm_before_gate", "chunk_size", "fuse_norm",
                "fuse_linear_cross_entropy", "use_l2warp", "pad_token_id", "bos_token_id", "eos_token_id"}},
};
// fla's HybridAttentionSpec (fla/models/hybrid.py): the fields of each `attn` entry.
const std::set<std::string> kAttnFields = {"layers", "num_heads", "num_kv_heads", "qkv_bias", "window_size",
                                           "rope_theta"};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every field of config.json is one of fla's for its model_type; returns the parsed JSON.
data::Json check_fla_fields(const std::string& json) {
  data::Json v = data::parse_json(json, "config.json");
  EXPECT_TRUE(v.is_object());
  EXPECT_TRUE(v.contains("model_type"));
  if (!v.contains("model_type")) return v;
  const std::string type = v["model_type"];
  auto known = kFlaFields.find(type);
  EXPECT_NE(known, kFlaFields.end()) << type;
  if (known == kFlaFields.end()) return v;
  for (const auto& [key, value] : v.items()) {
    EXPECT_TRUE(kCommon.count(key) || known->second.count(key)) << "'" << key << "' is not a field of fla's "
                                                                << type << " config";
    if (key != "attn" || value.is_null()) continue;
    for (const data::Json& spec : value.is_array() ? value : data::Json::array({value}))
      for (const auto& [k, x] : spec.items()) EXPECT_TRUE(kAttnFields.count(k)) << "attn field '" << k << "'";
  }
  return v;
}

double number(const data::Json& v, const char* key) {
  const bool present = v.contains(key) && v[key].is_number();
  EXPECT_TRUE(present) << key;
  return present ? v[key].get<double>() : -1;
}

class Interop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("linattn-interop-" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint of a freshly initialized model of `c` (seed 11), written as the trainer writes them.
  std::string checkpoint_of(const Config& c, const std::string& name) {
    Model m(c.model, DType::f32);
    m.params().initialize(11);
    TrainState state;
    state.step = 7;
    const std::string path = (fs::path(dir_) / name).string();
    save_checkpoint(path, c, m, nullptr, state);
    return path;
  }
  testing::CommandResult tool(const std::string& args) {
    return testing::run_command(testing::built_binary("linattn-export") + " " + args);
  }
  std::string dir_;
};

bool same_bits(const Model& a, const Model& b) {
  const Tensor &x = a.params().values().all(), &y = b.params().values().all();
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

TEST_F(Interop, SafetensorsRoundTripIsBitIdenticalAndEvaluatesTheSame) {
  Config c = testing::tiny_config(dir_ + "/run");
  const std::string ckpt = checkpoint_of(c, "gla.h5");
  const std::string out = dir_ + "/gla-fla";
  testing::CommandResult r = tool(ckpt + " " + out + " --format safetensors");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(out + "/config.json")) << r.output;

  Model original(c.model, DType::f32);
  load_checkpoint(ckpt, c, original, nullptr, nullptr);
  // The folder, the file in it, our checkpoint and our hdf5 export all give the same bits.
  ASSERT_EQ(tool(ckpt + " " + dir_ + "/gla-export.h5").status, 0);
  for (const std::string& from : {out, out + "/model.safetensors", ckpt, dir_ + "/gla-export.h5"}) {
    SCOPED_TRACE(from);
    Model imported(c.model, DType::f32);
    imported.params().initialize(99);  // other weights first: the import must replace every one
    EXPECT_EQ(init_from(from, imported, "tiny.yaml"), original.params().size());
    EXPECT_TRUE(same_bits(imported, original));
  }
  Model imported(c.model, DType::f32);
  init_from(out, imported, "tiny.yaml");
  Arena arena;
  auto val = data::Dataset::open(c.data.path, "val");
  EvalResult a = evaluate(original, val, c.data.seq_len, 8, 8192, arena, nullptr, c.data.document_boundaries);
  EvalResult b = evaluate(imported, val, c.data.seq_len, 8, 8192, arena, nullptr, c.data.document_boundaries);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.bits_per_byte, b.bits_per_byte);
  // linattn-eval on the checkpoint prints the imported model's figure.
  r = testing::run_command(testing::built_binary("linattn-eval") + " " + ckpt + " --tokens 8192 --batch 8");
  char expected[64];
  std::snprintf(expected, sizeof expected, "val loss %.6f", b.loss);
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output << " (expected " << expected << ")";

  // config.json: fla's GLA with the window-32 attention layer in `attn`.
  data::Json j = check_fla_fields(read_text(out + "/config.json"));
  EXPECT_EQ(j["model_type"], "gla");
  EXPECT_EQ(number(j, "hidden_size"), 64);
  EXPECT_EQ(number(j, "num_hidden_layers"), 2);
  EXPECT_EQ(number(j, "num_heads"), 2);
  EXPECT_EQ(number(j, "expand_k"), 0.5);
  EXPECT_EQ(number(j, "intermediate_size"), double(c.model.resolved_intermediate_size()));
  ASSERT_TRUE(j.contains("attn") && j["attn"].is_object());
  const data::Json& attn = j["attn"];
  EXPECT_EQ(attn["layers"], data::Json::array({1}));
  EXPECT_EQ(number(attn, "window_size"), 32);
  EXPECT_EQ(number(attn, "num_kv_heads"), 2);
}

TEST_F(Interop, ShortConvolutionsTakeConv1dShapeAndHandBuiltFlaFilesImport) {
  Config c = testing::tiny_config(dir_ + "/run", {"model.layers=[deltanet, deltanet]"});
  const std::string ckpt = checkpoint_of(c, "delta.h5");
  ASSERT_EQ(tool(ckpt + " " + dir_ + "/delta --format safetensors").status, 0);
  data::SafetensorsFile f(dir_ + "/delta/model.safetensors");
  const data::SafetensorsEntry* conv = f.find("model.layers.0.attn.q_conv1d.weight");
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->shape, (Shape{64, 1, 4}));  // PyTorch Conv1d: [channels, 1, kernel]
  data::Json j = check_fla_fields(read_text(dir_ + "/delta/config.json"));
  EXPECT_EQ(j["model_type"], "delta_net");
  EXPECT_TRUE(j.contains("attn") && j["attn"].is_null());

  // A file as a Python user would write it: fla's names and shapes, in another order, in float64.
  Model source(c.model, DType::f64);
  source.params().initialize(5);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = source.params().size(); i-- > 0;) {
    const std::string& name = source.params().name(int(i));
    const Tensor& t = source.params().values()[int(i)];
    tensors.emplace_back(name, t.view(name.find("conv1d") != std::string::npos ? Shape{t.shape()[0], 1, t.shape()[1]}
                                                                                : t.shape()));
  }
  const std::string hand = dir_ + "/hand.safetensors";
  data::write_safetensors(hand, tensors);
  Model imported(c.model, DType::f64);
  init_from(hand, imported, "tiny.yaml");
  EXPECT_TRUE(same_bits(imported, source));
}

TEST_F(Interop, GatedDeltaNetConfigIsFlasAndModelsFlaCannotBuildGetNoConfig) {
  Config gdn = testing::tiny_config(dir_ + "/run", {"model.layers=[gated_deltanet, {mixer: attention}]"});
  FlaConfig fc = fla_config(gdn.model);
  ASSERT_TRUE(fc.problems.empty()) << fc.problems[0];
  data::Json j = check_fla_fields(fc.json);
  EXPECT_EQ(j["model_type"], "gated_deltanet");
  EXPECT_EQ(number(j, "head_dim"), 32);  // key dim 64 over 2 heads
  EXPECT_EQ(number(j, "expand_v"), 1);
  EXPECT_TRUE(j["attn"]["window_size"].is_null());  // global

  Config legacy = testing::tiny_config(
      dir_ + "/run", {"model.layers=[gated_deltanet, attention]", "model.gated_deltanet_decay=logsigmoid"});
  ASSERT_EQ(fla_config(legacy.model).problems.size(), 1u);
  EXPECT_NE(fla_config(legacy.model).problems[0].find("gated_deltanet_decay: fla"), std::string::npos);
  Config retnet = testing::tiny_config(dir_ + "/run", {"model.layers=[retnet, attention]"});
  ASSERT_EQ(fla_config(retnet.model).problems.size(), 1u);
  EXPECT_NE(fla_config(retnet.model).problems[0].find("rotary"), std::string::npos);

  // Two linear mixers: the weights, no config.json (an old one is removed), and the reason on stderr.
  Config mixed = testing::tiny_config(dir_ + "/run", {"model.layers=[gla, deltanet]"});
  const std::string ckpt = checkpoint_of(mixed, "mixed.h5");
  fs::create_directories(dir_ + "/mixed");
  std::ofstream(dir_ + "/mixed/config.json") << "{}";
  testing::CommandResult r = tool(ckpt + " " + dir_ + "/mixed --format safetensors");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no config.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layer 0 is gla but layer 1 is deltanet"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/mixed/config.json"));
  EXPECT_TRUE(fs::exists(dir_ + "/mixed/model.safetensors"));

  r = tool(ckpt + " " + dir_ + "/other --format onnx");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--format 'onnx' is not one of hdf5, safetensors"), std::string::npos) << r.output;
  r = tool(ckpt + " " + dir_ + "/other --format safetensors --dtype bf16");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--format safetensors writes f32"), std::string::npos) << r.output;
}

// A pure Mamba2 model (every layer Mamba2, no MLP): fla's Mamba2ForCausalLM, its names, shapes and
// config.json; and back bit for bit with --init-from.
TEST_F(Interop, PureMamba2ExportsAsFlasMamba2ForCausalLM) {
  Config c = testing::tiny_config(dir_ + "/run", {"model.layers=[mamba2, mamba2]", "model.mlp=none",
                                                  "model.n_groups=2", "model.state_size=8"});
  const std::string ckpt = checkpoint_of(c, "mamba2.h5");
  const std::string out = dir_ + "/mamba2-fla";
  testing::CommandResult r = tool(ckpt + " " + out + " --format safetensors");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_TRUE(fs::exists(out + "/config.json")) << r.output;
  data::Json j = check_fla_fields(read_text(out + "/config.json"));
  EXPECT_EQ(j["model_type"], "mamba2");
  EXPECT_EQ(j["architectures"], data::Json::array({"Mamba2ForCausalLM"}));
  EXPECT_EQ(number(j, "hidden_size"), 64);
  EXPECT_EQ(number(j, "num_hidden_layers"), 2);
  EXPECT_EQ(number(j, "vocab_size"), 257);
  EXPECT_EQ(number(j, "num_heads"), 2);
  EXPECT_EQ(number(j, "head_dim"), 32);  // inner width 64 (expand 1) over 2 heads
  EXPECT_EQ(number(j, "expand"), 1);
  EXPECT_EQ(number(j, "n_groups"), 2);
  EXPECT_EQ(number(j, "state_size"), 8);
  EXPECT_EQ(number(j, "conv_kernel"), 4);
  EXPECT_EQ(number(j, "chunk_size"), 64);
  EXPECT_EQ(j["use_conv_bias"], false);
  EXPECT_EQ(j["use_bias"], false);
  EXPECT_EQ(j["norm_before_gate"], false);
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["tie_word_embeddings"], false);
  for (const char* mlp_or_attn : {"hidden_ratio", "intermediate_size", "attn"})
    EXPECT_FALSE(j.contains(mlp_or_attn)) << mlp_or_attn << " is not a field of fla's Mamba2Config";

  // fla's names and shapes: in_proj's rows z [64], x [64], B [2 x 8], C [2 x 8], dt [2].
  data::SafetensorsFile f(out + "/model.safetensors");
  const std::map<std::string, Shape> want = {
      {"backbone.embeddings.weight", {257, 64}},
      {"backbone.layers.0.norm.weight", {64}},
      {"backbone.layers.1.mixer.in_proj.weight", {162, 64}},
      {"backbone.layers.1.mixer.conv1d.weight", {96, 1, 4}},
      {"backbone.layers.1.mixer.dt_bias", {2}},
      {"backbone.layers.1.mixer.A_log", {2}},
      {"backbone.layers.1.mixer.D", {2}},
      {"backbone.layers.1.mixer.norm.weight", {64}},
      {"backbone.layers.1.mixer.out_proj.weight", {64, 64}},
      {"backbone.norm_f.weight", {64}},
      {"lm_head.weight", {257, 64}},
  };
  for (const auto& [name, shape] : want) {
    const data::SafetensorsEntry* e = f.find(name);
    EXPECT_TRUE(e) << name;
    if (e) EXPECT_EQ(e->shape, shape) << name;
  }
  Model original(c.model, DType::f32);
  load_checkpoint(ckpt, c, original, nullptr, nullptr);
  EXPECT_EQ(f.entries().size(), original.params().size());  // one tensor per parameter: no MLP, no extras
  for (const data::SafetensorsEntry& e : f.entries())
    EXPECT_TRUE(e.name.rfind("backbone.", 0) == 0 || e.name == "lm_head.weight") << e.name;

  Model imported(c.model, DType::f32);
  imported.params().initialize(99);
  EXPECT_EQ(init_from(out, imported, "tiny.yaml"), original.params().size());
  EXPECT_TRUE(same_bits(imported, original));

  // Tied: fla's Mamba2ForCausalLM does not tie its lm_head, so the embedding is written under both
  // names; --init-from takes it back, and refuses a file whose two copies differ.
  Config tied = testing::tiny_config(dir_ + "/run", {"model.layers=[mamba2, mamba2]", "model.mlp=none",
                                                     "model.tie_word_embeddings=true"});
  EXPECT_EQ(fla_names(tied.model, "model.embeddings.weight"),
            (std::vector<std::string>{"backbone.embeddings.weight", "lm_head.weight"}));
  const std::string tied_ckpt = checkpoint_of(tied, "tied.h5");
  ASSERT_EQ(tool(tied_ckpt + " " + dir_ + "/tied --format safetensors").status, 0);
  EXPECT_EQ(check_fla_fields(read_text(dir_ + "/tied/config.json"))["tie_word_embeddings"], true);
  Model tied_original(tied.model, DType::f32), tied_imported(tied.model, DType::f32);
  load_checkpoint(tied_ckpt, tied, tied_original, nullptr, nullptr);
  init_from(dir_ + "/tied", tied_imported, "tied.yaml");
  EXPECT_TRUE(same_bits(tied_imported, tied_original));
  data::SafetensorsFile tf(dir_ + "/tied/model.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const data::SafetensorsEntry& e : tf.entries()) {
    Tensor t = tf.read(e.name, DType::f32);
    if (e.name == "lm_head.weight") t.data<float>()[3] += 1;
    tensors.emplace_back(e.name, t);
  }
  data::write_safetensors(dir_ + "/untied.safetensors", tensors);
  const std::string err =
      testing::error_of([&] { init_from(dir_ + "/untied.safetensors", tied_imported, "tied.yaml"); });
  EXPECT_NE(err.find("lm_head.weight differs from backbone.embeddings.weight"), std::string::npos) << err;
}

// What fla's Mamba2ForCausalLM cannot express gets no config.json and says why: an MLP in the
// Mamba2 blocks, attention layers beside them; and an fla model with MLPs gets none from mlp: none.
TEST_F(Interop, Mamba2WithAnMLPOrAttentionAndOtherMixersWithoutMLPsAreRefused) {
  auto problems = [&](const std::vector<std::string>& overrides) {
    std::string all;
    for (const std::string& p : fla_config(testing::tiny_config(dir_ + "/run", overrides).model).problems)
      all += p + "\n";
    return all;
  };
  std::string p = problems({"model.layers=[mamba2, mamba2]"});
  EXPECT_NE(p.find("Mamba2ForCausalLM's blocks are norm + mixer only"), std::string::npos) << p;
  EXPECT_NE(p.find("train with mlp: none"), std::string::npos) << p;
  p = problems({"model.layers=[mamba2, attention]", "model.mlp=none"});
  EXPECT_NE(p.find("Mamba2ForCausalLM has no softmax attention layers"), std::string::npos) << p;
  p = problems({"model.layers=[gla, gla]", "model.mlp=none"});
  EXPECT_NE(p.find("GLAForCausalLM has a SwiGLU MLP in every block"), std::string::npos) << p;
  EXPECT_EQ(problems({"model.layers=[mamba2, mamba2]", "model.mlp=none"}), "");

  // The refused Mamba2 model's weights keep our names (model.layers.N.attn: fla's Mamba2 layer's).
  Config c = testing::tiny_config(dir_ + "/run", {"model.layers=[mamba2, mamba2]"});
  EXPECT_EQ(fla_names(c.model, "model.layers.0.attn.in_proj.weight"),
            std::vector<std::string>{"model.layers.0.attn.in_proj.weight"});
  testing::CommandResult r = tool(checkpoint_of(c, "mlp.h5") + " " + dir_ + "/mlp --format safetensors");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("no config.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/mlp/config.json"));
}

TEST_F(Interop, InitFromAnotherShapeNamesEveryMismatchAndTrainsNothing) {
  Config small = testing::tiny_config(dir_ + "/run", {"model.hidden_size=32"});
  const std::string ckpt = checkpoint_of(small, "small.h5");
  ASSERT_EQ(tool(ckpt + " " + dir_ + "/small --format safetensors").status, 0);
  // The tiny config is 64 wide: every weight that touches hidden_size differs.
  const std::string yaml = dir_ + "/tiny.yaml";
  Config wide = testing::tiny_config(dir_ + "/wide-run", {"train.max_steps=3"});
  std::ofstream(yaml) << wide.text;
  testing::CommandResult r =
      testing::run_command(testing::built_binary("linattn-train") + " " + yaml + " --init-from " + dir_ + "/small");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("nothing was trained"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.embeddings.weight: expected [257, 64], found [257, 32]"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("model.layers.1.attn.o_proj.weight: expected [64, 64], found [32, 32]"), std::string::npos)
      << r.output;
  // Every parameter of the model has a hidden_size dim: all of them are listed.
  Model m(wide.model, DType::f32);
  EXPECT_NE(r.output.find("shapes that differ (the model of " + yaml + " vs the file) (" +
                          std::to_string(m.params().size()) + "):"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/wide-run/checkpoints")) << "a refused import must not train";

  // Names that match no parameter, and parameters the file lacks, are named too.
  Model source(wide.model, DType::f32);
  source.params().initialize(3);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < source.params().size(); ++i)
    if (source.params().name(int(i)) != "lm_head.weight")
      tensors.emplace_back(source.params().name(int(i)) == "model.norm.weight" ? "model.final_norm.weight"
                                                                                : source.params().name(int(i)),
                           source.params().values()[int(i)]);
  data::write_safetensors(dir_ + "/renamed.safetensors", tensors);
  std::string err = testing::error_of([&] { init_from(dir_ + "/renamed.safetensors", m, "tiny.yaml"); });
  EXPECT_NE(err.find("parameters of the model that the file lacks (2):\n  model.norm.weight [64]\n  lm_head.weight [257, 64]"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("tensors of the file that match no parameter of the model (1):\n  model.final_norm.weight [64]"),
            std::string::npos)
      << err;

  // A damaged file: the reader's error, naming the file.
  const std::string cut = dir_ + "/cut.safetensors";
  fs::copy_file(dir_ + "/small/model.safetensors", cut);
  fs::resize_file(cut, 100);
  err = testing::error_of([&] { init_from(cut, m, "tiny.yaml"); });
  EXPECT_NE(err.find(cut), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;

  // With --resume: one or the other.
  r = testing::run_command(testing::built_binary("linattn-train") + " " + yaml + " --init-from " + ckpt + " --resume");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("give one of them"), std::string::npos) << r.output;
}

TEST_F(Interop, InitFromWeightsWithNaNOrInfinityNamesTheFileAndTheTensors) {
  // A diverged run's weights: refused at load, naming the file and each tensor, before anything trains.
  Config c = testing::tiny_config(dir_ + "/run");
  Model source(c.model, DType::f32);
  source.params().initialize(3);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < source.params().size(); ++i) {
    Tensor t = source.params().values()[int(i)];
    const std::string& name = source.params().name(int(i));
    if (name == "model.norm.weight") t.data<float>()[1] = NAN;
    if (name == "lm_head.weight") t.data<float>()[0] = t.data<float>()[5] = -INFINITY;
    tensors.emplace_back(name, t);
  }
  data::write_safetensors(dir_ + "/diverged.safetensors", tensors);
  Model m(c.model, DType::f32);
  m.params().initialize(7);
  Model untouched(c.model, DType::f32);
  untouched.params().initialize(7);
  const std::string err = testing::error_of([&] { init_from(dir_ + "/diverged.safetensors", m, "tiny.yaml"); });
  EXPECT_NE(err.find("--init-from " + dir_ + "/diverged.safetensors: 2 tensors hold NaN or infinite values; nothing "
                     "was trained:\n  model.norm.weight [64]: 1 of 64 entries\n  lm_head.weight [257, 64]: 2 of "
                     "16448 entries"),
            std::string::npos)
      << err;
  EXPECT_TRUE(same_bits(m, untouched)) << "the model was changed by a refused import";
}

TEST_F(Interop, InitFromStartsATrainingRunAtStepZero) {
  Config c = testing::tiny_config(dir_ + "/run");
  const std::string ckpt = checkpoint_of(c, "start.h5");
  const std::string yaml = dir_ + "/tiny.yaml";
  Config run = testing::tiny_config(dir_ + "/run2", {"train.max_steps=2"});
  std::ofstream(yaml) << run.text;
  testing::CommandResult r =
      testing::run_command(testing::built_binary("linattn-train") + " " + yaml + " --init-from " + ckpt);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("initialized from " + ckpt), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("done after 2 steps"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace linattn
