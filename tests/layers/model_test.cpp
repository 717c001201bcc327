// The whole model in float64: every parameter's gradient through every mixer's layer (the
// registry's), the MLPs, norms, embedding and loss, against central finite differences.
#include "layers/model.h"

#include <omp.h>

#include <functional>

#include "autograd/mixer_ops.h"
#include "layers/mixer.h"
#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

// Every linear mixer of the registry, in its order, then windowed grouped-query attention as the
// last layer: a new mixer's layer joins the checks below by itself.
ModelConfig tiny_hybrid(const std::string& gdn_decay = "fla") {
  std::string layers;
  int n = 1;
  for (const MixerDescriptor* m : all_mixers())
    if (!m->attention) layers += "    - " + m->name + "\n", ++n;
  Config c = parse_config(R"(model:
  gated_deltanet_decay: )" + gdn_decay + R"(
  vocab_size: 11
  hidden_size: 8
  num_hidden_layers: )" + std::to_string(n) + R"(
  num_heads: 2
  intermediate_size: 12
  chunk_size: 4
  layers:
)" + layers + R"(    - {mixer: attention, window_size: 3, num_kv_heads: 1}
train: {max_steps: 1}
)",
                          "tiny.yaml");
  return c.model;
}

// The model section's lines for every mixer of the registry as configured by default (attention:
// global), then the layers `extra`.
std::string every_mixer_and(const std::string& extra) {
  std::string list;
  for (const std::string& name : mixer_names()) list += name + ", ";
  return "  num_hidden_layers: " + std::to_string(mixer_names().size() + 1) + "\n  layers: [" + list + extra + "]\n";
}

// "model.layers.N.attn." + rest, N the first layer of c running `mixer`.
std::string layer_param(const ModelConfig& c, const std::string& mixer, const std::string& rest) {
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].mixer == mixer) return "model.layers." + std::to_string(i) + ".attn." + rest;
  throw std::runtime_error("no " + mixer + " layer");
}

// Every parameter's gradient of the model of c (seed 8, weights 4x the init) against Richardson-
// extrapolated central differences; prepare(model) adjusts the weights first.
void expect_model_gradients_match(const ModelConfig& c, const std::function<void(Model&)>& prepare = {}) {
  // Thousands of forward passes of a tiny model: one thread avoids fork/join overhead per op.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Model model(c, DType::f64);
  // (Seed 7 draws models the differences cannot check to 1e-6: with the fla decay they miss the
  // embedding's gradient by 1e-5 relative (a curved draw); with the logsigmoid decay and Mamba2's
  // layer, layer 0's o_proj by 6e-6 (an error that goes when h is halved: truncation) and Mamba2's
  // D, whose gradient is ~2e-5 there, by 1.6e-6 (one that grows when h is halved: rounding). Seed 8
  // draws neither. The ops' own float64 checks are in tests/autograd.)
  model.params().initialize(8);
  // Weights 4x the default init so every path carries a gradient well above FD noise.
  Rng rng(3);
  const Tensor& all = model.params().values().all();
  for (int64_t i = 0; i < all.numel(); ++i) all.data<double>()[i] *= 4;
  // A decay from A_log and dt_bias (Gated DeltaNet's fla decay, Mamba2's) starts, scaled, far too
  // strong (A = exp(A_log) up to 16^4), and Gated DeltaNet's logsigmoid decay weak (bias sigmoid(2..6)):
  // either way its gradient would be below the noise of the differences. A decay of about 0.5 per
  // step makes it count.
  for (size_t p = 0; p < model.params().size(); ++p) {
    const std::string& name = model.params().name(int(p));
    for (const std::string tail : {".A_log", ".dt_bias"})
      if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
        model.params().values()[int(p)].fill_(0.0);
  }
  if (prepare) prepare(model);

  Tensor ids = Tensor::empty({2, 7}, DType::i32), targets = Tensor::empty({2, 7}, DType::i32);
  for (int64_t i = 0; i < 14; ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(uint64_t(c.vocab_size)));
    targets.data<int32_t>()[i] = int32_t(rng.below(uint64_t(c.vocab_size)));
  }
  model.params().zero_grad();
  backward(model.loss(ids, targets));
  auto loss = [&] {
    NoGrad no_grad;
    return model.loss(ids, targets).value().data<double>()[0];
  };
  for (size_t p = 0; p < model.params().size(); ++p) {
    SCOPED_TRACE(model.params().name(int(p)));
    // Richardson extrapolation of two central differences cancels their h^2 error term: the
    // composed model is far more curved than a single op, so plain differences are only good to ~1e-6.
    const Tensor& w = model.params().values()[int(p)];
    Tensor coarse = testing::finite_difference(loss, w, 2e-5), fine = testing::finite_difference(loss, w, 1e-5);
    Tensor numeric = fine.clone();
    for (int64_t i = 0; i < numeric.numel(); ++i)
      numeric.data<double>()[i] = (4 * fine.data<double>()[i] - coarse.data<double>()[i]) / 3;
    EXPECT_CLOSE(model.params().grads()[int(p)], numeric, 1e-6);
  }
  omp_set_num_threads(threads);
}

class ModelGradients : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelGradients, EveryParameterMatchesFiniteDifferences) {
  const std::string decay = GetParam();
  const ModelConfig c = tiny_hybrid(decay);
  expect_model_gradients_match(c, [&](Model& model) {
    if (decay == "logsigmoid")
      model.params().values()[model.params().layout().find(layer_param(c, "gated_deltanet", "a_proj.bias"))].fill_(0.0);
  });
}
INSTANTIATE_TEST_SUITE_P(GatedDeltaNetDecay, ModelGradients, ::testing::Values("fla", "logsigmoid"));

// fla's Mamba2 model: blocks of norm + mixer only (mlp: none), the gated norm per group of heads
// (n_groups: 2), through the whole model.
TEST(ModelGradients, PureMamba2WithoutMLPsAndTwoGroups) {
  const ModelConfig c = parse_config(R"(model:
  mixer: mamba2
  mlp: none
  n_groups: 2
  state_size: 4
  vocab_size: 11
  hidden_size: 8
  num_hidden_layers: 2
  num_heads: 2
  chunk_size: 4
train: {max_steps: 1}
)",
                                     "mamba2.yaml")
                               .model;
  expect_model_gradients_match(c);
}

// mlp: none leaves out every block's mlp_norm and MLP, and nothing else.
TEST(Model, MlpNoneLeavesOutTheMLPs) {
  ModelConfig with = tiny_hybrid(), without = tiny_hybrid();
  without.mlp = Mlp::none;
  const Model a(with, DType::f32), b(without, DType::f32);
  const int64_t h = with.hidden_size, inter = with.resolved_intermediate_size();
  EXPECT_EQ(a.params().count() - b.params().count(), with.num_hidden_layers * (h + 3 * h * inter));
  EXPECT_EQ(a.params().size() - b.params().size(), size_t(with.num_hidden_layers) * 4);
  for (size_t i = 0; i < b.params().size(); ++i) {
    EXPECT_EQ(b.params().name(int(i)).find(".mlp"), std::string::npos) << b.params().name(int(i));
    EXPECT_GE(a.params().layout().find(b.params().name(int(i))), 0) << b.params().name(int(i));
  }
  EXPECT_NE(b.summary().find(", no MLP,"), std::string::npos) << b.summary();
  EXPECT_EQ(a.summary().find("no MLP"), std::string::npos) << a.summary();
}

TEST(Model, ParameterNamesFollowTheHFConvention) {
  const ModelConfig c = tiny_hybrid();
  Model model(c, DType::f32), legacy(tiny_hybrid("logsigmoid"), DType::f32);
  EXPECT_GE(legacy.params().layout().find(layer_param(c, "gated_deltanet", "a_proj.bias")), 0);
  const FlatLayout& layout = model.params().layout();
  const std::string attention = layer_param(c, "attention", "k_proj.weight");
  for (const std::string& name : {std::string("model.embeddings.weight"), layer_param(c, "linear_attn", "q_proj.weight"),
                                  layer_param(c, "gla", "gk_proj.1.bias"), layer_param(c, "deltanet", "q_conv1d.weight"),
                                  layer_param(c, "gated_deltanet", "A_log"), layer_param(c, "gated_deltanet", "dt_bias"),
                                  attention, std::string("model.layers.5.mlp.gate_proj.weight"),
                                  std::string("model.layers.5.mlp_norm.weight"), std::string("model.norm.weight"),
                                  std::string("lm_head.weight")})
    EXPECT_GE(layout.find(name), 0) << name;
  // Linear weights are [out, in]: grouped-query attention's k_proj has Hkv * head_dim = 4 rows.
  EXPECT_EQ(layout.entries()[size_t(layout.find(attention))].shape, (Shape{4, 8}));
}

// Document-aware training: a window holding two documents, cut where the second one's end-of-text
// token starts it, gives every mixer kind (and global and windowed attention, the short convolution,
// RoPE) exactly the logits of the two documents run alone, and the loss and parameter gradients of
// their token-weighted sum.
TEST(Model, AWindowOfTwoDocumentsEqualsTheDocumentsRunAlone) {
  Config c = parse_config(R"(model:
  vocab_size: 11
  hidden_size: 8
  num_heads: 2
  intermediate_size: 12
  chunk_size: 4
)" + every_mixer_and("{mixer: attention, window_size: 3, num_kv_heads: 1}") + R"(train: {max_steps: 1}
)",
                          "tiny.yaml");
  Model model(c.model, DType::f64);
  model.params().initialize(9);
  constexpr int32_t eot = 10;
  constexpr int64_t T = 13, first = 5;  // document 1: [0, 5), document 2: [5, 13), each opened by eot
  Rng rng(4);
  auto tokens = [&](int64_t n) {
    Tensor t = Tensor::empty({1, n}, DType::i32);
    for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = int32_t(rng.below(10));
    return t;
  };
  Tensor ids = tokens(T), targets = tokens(T);
  ids.data<int32_t>()[0] = ids.data<int32_t>()[first] = eot;
  auto part = [&](const Tensor& x, int64_t t0, int64_t n) {
    Tensor out = Tensor::empty({1, n}, DType::i32);
    std::copy_n(x.data<int32_t>() + t0, n, out.data<int32_t>());
    return out;
  };
  const ops::Segments segments = ops::Segments::starting_at(ids, eot);
  ASSERT_EQ(segments.offsets, (std::vector<int64_t>{0, first, T}));

  Tensor logits = model.logits(ids, segments).value();
  model.params().zero_grad();
  Variable loss = model.loss(ids, targets, segments);
  backward(loss);
  const Tensor window_grads = model.params().grads().all().clone();

  const int64_t V = c.model.vocab_size;
  double alone_loss = 0;
  Tensor alone_grads = Tensor::zeros(window_grads.shape(), DType::f64);
  for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, first}, {first, T - first}}) {
    SCOPED_TRACE("document from " + std::to_string(t0));
    Tensor doc_logits = model.logits(part(ids, t0, n)).value();
    Tensor window_part = Tensor::empty({1, n, V}, DType::f64);
    std::copy_n(logits.data<double>() + t0 * V, n * V, window_part.data<double>());
    EXPECT_CLOSE(window_part, doc_logits, 0.0);
    model.params().zero_grad();
    Variable l = model.loss(part(ids, t0, n), part(targets, t0, n));
    backward(l);
    // The window's mean over T targets is the documents' means weighted by their lengths.
    alone_loss += l.value().data<double>()[0] * double(n) / double(T);
    const Tensor& g = model.params().grads().all();
    for (int64_t i = 0; i < g.numel(); ++i) alone_grads.data<double>()[i] += g.data<double>()[i] * double(n) / double(T);
  }
  // Sums in another order: 1e-12 relative is float64 rounding.
  EXPECT_NEAR(loss.value().data<double>()[0], alone_loss, 1e-12);
  EXPECT_CLOSE(window_grads, alone_grads, 1e-12);

  // Without the cut the second document sees the first: the comparison above can fail.
  Tensor crossed = model.logits(ids).value();
  EXPECT_GT(testing::compare(crossed, logits).max_abs, 1e-6);
}

// The same in float32 at the default run's window and chunk sizes (256 tokens, chunks of 64; hidden
// 128), where the fast paths run (blocked chunk kernels, oneDNN products): documents cut off a chunk edge
// in one row, at one in the other, give the logits and every parameter's gradient of the documents
// run alone, to float32 rounding.
TEST(Model, AWindowOfTwoDocumentsEqualsTheDocumentsRunAloneInFloat32) {
  Config c = parse_config(R"(model:
  vocab_size: 257
  hidden_size: 128
  num_heads: 2
)" + every_mixer_and("{mixer: attention, window_size: 128}") + R"(train: {max_steps: 1}
)",
                          "default-sizes.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(3);
  constexpr int32_t eot = 256;
  constexpr int64_t T = 256;
  const int64_t cuts[2] = {100, 192};  // where the second document starts in row 0 and in row 1
  Rng rng(5);
  Tensor ids = Tensor::empty({2, T}, DType::i32), targets = Tensor::empty({2, T}, DType::i32);
  for (int64_t i = 0; i < 2 * T; ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(256));
    targets.data<int32_t>()[i] = int32_t(rng.below(256));
  }
  for (int64_t b = 0; b < 2; ++b) ids.data<int32_t>()[b * T + cuts[b]] = eot;
  const ops::Segments segments = ops::Segments::starting_at(ids, eot);
  ASSERT_EQ(segments.offsets, (std::vector<int64_t>{0, cuts[0], T, T + cuts[1], 2 * T}));

  const int64_t V = c.model.vocab_size;
  Tensor logits = model.logits(ids, segments).value();
  model.params().zero_grad();
  backward(model.loss(ids, targets, segments));
  std::vector<Tensor> window_grads, alone_grads;
  for (size_t i = 0; i < model.params().size(); ++i) {
    window_grads.push_back(model.params()[int(i)].grad().to(DType::f64));
    alone_grads.push_back(Tensor::zeros(window_grads.back().shape(), DType::f64));
  }
  for (size_t d = 0; d + 1 < segments.offsets.size(); ++d) {
    const int64_t at = segments.offsets[d], n = segments.offsets[d + 1] - at;
    SCOPED_TRACE("document at " + std::to_string(at) + ", " + std::to_string(n) + " tokens");
    Tensor doc = Tensor::empty({1, n}, DType::i32), doc_targets = Tensor::empty({1, n}, DType::i32);
    std::copy_n(ids.data<int32_t>() + at, n, doc.data<int32_t>());
    std::copy_n(targets.data<int32_t>() + at, n, doc_targets.data<int32_t>());
    Tensor window_part = Tensor::empty({1, n, V}, DType::f32);
    std::copy_n(logits.data<float>() + at * V, n * V, window_part.data<float>());
    EXPECT_CLOSE(window_part, model.logits(doc).value(), 1e-5);
    model.params().zero_grad();
    backward(model.loss(doc, doc_targets));
    // The window's loss is the mean over its 2T targets: each document's mean weighs n / 2T.
    for (size_t i = 0; i < alone_grads.size(); ++i) {
      const Tensor g = model.params()[int(i)].grad().to(DType::f64);
      for (int64_t j = 0; j < g.numel(); ++j) alone_grads[i].data<double>()[j] += g.data<double>()[j] * double(n) / (2.0 * T);
    }
  }
  // About 1e-6 measured; up to 1.03e-5 for a parameter of a few numbers, each a sum over all 512
  // tokens with cancellation (Mamba2's A_log and dt_bias, one per head), which the documents add in
  // another order: 3e-5 there. A state or position leaking across the cut differs by far more.
  for (size_t i = 0; i < alone_grads.size(); ++i) {
    SCOPED_TRACE(model.params().name(int(i)));
    EXPECT_CLOSE(window_grads[i], alone_grads[i], window_grads[i].numel() <= 8 ? 3e-5 : 1e-5);
  }
}

// A step of the whole model (every mixer of the registry, then attention) in the freeing arena,
// poisoned: a slice freed is filled with NaN, and so is every fresh block, so a value or gradient read
// after its last holder let it go, or a gradient buffer read before its first write (a GEMM with
// beta = 0), would show. The gradients equal those computed on the heap bit for bit, for two steps
// (the second in the one merged block), and the step's peak is below three quarters of the sum of its
// slices (about half, measured: the tiny model's mixers' `saved` buffers weigh much).
TEST(Model, AStepInTheFreeingArenaEqualsTheHeapBitForBit) {
  Config c = parse_config(R"(model:
  vocab_size: 37
  hidden_size: 32
  num_heads: 2
  chunk_size: 8
)" + every_mixer_and("{mixer: attention, window_size: 5}") + R"(train: {max_steps: 1}
)",
                          "arena.yaml");
  Model model(c.model, DType::f32);
  model.params().initialize(4);
  Rng rng(9);
  Tensor ids = Tensor::empty({2, 24}, DType::i32), targets = Tensor::empty({2, 24}, DType::i32);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int32_t>()[i] = int32_t(rng.below(37));
    targets.data<int32_t>()[i] = int32_t(rng.below(37));
  }
  ids.data<int32_t>()[30] = 36;
  const ops::Segments segments = ops::Segments::starting_at(ids, 36);  // a document starts inside row 1
  model.params().zero_grad();
  backward(model.loss(ids, targets, segments));
  const Tensor heap = model.params().grads().all().clone();

  Arena arena;
  arena.poison_freed(true);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    model.params().zero_grad();
    {
      ArenaScope scope(arena);
      backward(model.loss(ids, targets, segments));
    }
    EXPECT_EQ(testing::compare(model.params().grads().all(), heap).max_abs, 0.0);
    EXPECT_EQ(arena.used(), 0u);  // the step left nothing behind
    EXPECT_LT(4 * arena.high_water(), 3 * arena.allocated())
        << "peak " << arena.high_water() << " bytes of " << arena.allocated() << " allocated";
    arena.reset();
    EXPECT_EQ(arena.blocks(), 1u);
  }
}

// On a device without a mixer's kernels, the model names the first layer that cannot run there and
// the backend entries it lacks; the layers whose kernels the backend table has pass (which those
// are depends on the build).
TEST(Model, UnsupportedDeviceNamesTheLayer) {
  const ModelConfig c = tiny_hybrid();  // every linear mixer, then attention
  EXPECT_EQ(Model(c, DType::f32).unsupported_on(Device::cpu), "");
  std::string first;  // what the whole hybrid should say
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const std::string missing = mixer_descriptor(c.layers[i].mixer).op->missing_kernels(Device::cuda);
    const std::string problem =
        missing.empty() ? "" : "(" + c.layers[i].mixer + "): no CUDA kernel yet for " + missing;
    if (first.empty() && !problem.empty()) first = "model.layers." + std::to_string(i) + " " + problem;
    ModelConfig alone = c;
    alone.layers = {c.layers[i]};
    alone.num_hidden_layers = 1;
    EXPECT_EQ(Model(alone, DType::f32).unsupported_on(Device::cuda), problem.empty() ? "" : "model.layers.0 " + problem);
  }
  EXPECT_EQ(Model(c, DType::f32).unsupported_on(Device::cuda), first);
}

}  // namespace
}  // namespace linattn
