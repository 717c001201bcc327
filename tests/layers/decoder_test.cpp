// Decoding proven equal to the full forward pass: for every mixer kind and the default hybrid,
// the logits of prefill-then-step at every position equal Model::logits on the whole sequence; and
// the decoding state each linear mixer holds is its descriptor's state_size.
#include "layers/decoder.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "layers/state_size.h"
#include "testing.h"
#include "train/config.h"

namespace linattn {
namespace {

struct Case {
  std::string name;
  std::string model;  // the YAML model section's body; "" = configs/default.yaml's model
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// A tiny model of one kind (chunk 4, window 5) and the default hybrid. The mixer under test runs in
// both layers, so a second layer also decodes from a state its first layer produced.
std::vector<Case> cases() {
  const std::string tiny = "  vocab_size: 13\n  hidden_size: 16\n  num_hidden_layers: 2\n  num_heads: 2\n"
                           "  intermediate_size: 24\n  chunk_size: 4\n";
  std::vector<Case> c;
  for (const char* phi : {"identity", "elu1", "relu"})
    for (bool normalize : {false, true})
      c.push_back({std::string("linear_attn_") + phi + (normalize ? "_normalized" : ""),
                   tiny + "  mixer: linear_attn\n  feature_map: " + phi + "\n  normalize: " +
                       (normalize ? "true" : "false") + "\n"});
  // Every other mixer of the registry, as configured by default (linear attention and attention
  // have their variants here).
  for (const MixerDescriptor* m : all_mixers())
    if (m->name != "linear_attn" && !m->attention) c.push_back({m->name, tiny + "  mixer: " + m->name + "\n"});
  c.push_back({"mamba2_groups", tiny + "  mixer: mamba2\n  n_groups: 2\n  state_size: 8\n"});
  c.push_back({"mamba2_no_mlp", tiny + "  mixer: mamba2\n  mlp: none\n  n_groups: 2\n  state_size: 8\n"});
  c.push_back({"deltanet_no_short_conv", tiny + "  mixer: deltanet\n  use_short_conv: false\n"});
  c.push_back({"attention_global", tiny + "  mixer: attention\n"});
  c.push_back({"attention_window", tiny + "  mixer: attention\n  window_size: 5\n"});
  c.push_back({"attention_gqa_global", tiny + "  mixer: attention\n  num_kv_heads: 1\n"});
  c.push_back({"attention_gqa_window", tiny + "  mixer: attention\n  window_size: 5\n  num_kv_heads: 1\n"});
  c.push_back({"default_hybrid", ""});
  return c;
}

Case named(const std::string& name) {
  for (const Case& c : cases())
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

ModelConfig model_config(const Case& c) {
  if (c.model.empty()) return load_config(std::string(LINATTN_SOURCE_DIR) + "/configs/default.yaml").model;
  return parse_config("model:\n" + c.model + "train: {max_steps: 1}\n", c.name + ".yaml").model;
}

struct Sequence {
  Model model;
  Tensor ids;   // i32 [B, N]
  Tensor want;  // Model::logits(ids)
};

// Weights 5x the default init, so that every mixer moves the logits well above rounding: a decoding
// path that dropped its state would be off by far more than the tolerance.
Sequence make_run(const Case& c, DType dtype, int64_t B, int64_t N) {
  Sequence r{Model(model_config(c), dtype), Tensor::empty({B, N}, DType::i32), Tensor()};
  r.model.params().initialize(11);
  dispatch_float(dtype, [&](auto zero) {
    using T = decltype(zero);
    const Tensor& all = r.model.params().values().all();
    for (int64_t i = 0; i < all.numel(); ++i) all.data<T>()[i] *= T(5);
  });
  Rng rng(5);
  for (int64_t i = 0; i < B * N; ++i) r.ids.data<int32_t>()[i] = int32_t(rng.below(uint64_t(r.model.config().vocab_size)));
  NoGrad no_grad;
  r.want = r.model.logits(r.ids).value().clone();
  return r;
}

// Rows [t0, t1) along dim 1 of x [B, N, V].
Tensor rows(const Tensor& x, int64_t t0, int64_t t1) {
  const int64_t B = x.shape()[0], N = x.shape()[1], V = x.shape()[2];
  Tensor y = Tensor::empty({B, t1 - t0, V}, x.dtype());
  const size_t row = x.nbytes() / size_t(B * N);
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(static_cast<char*>(y.raw()) + size_t(b * (t1 - t0)) * row,
                static_cast<const char*>(x.raw()) + size_t(b * N + t0) * row, size_t(t1 - t0) * row);
  return y;
}

// Feeds the prompt pieces with prefill (their sum < N), then every other token with step, and
// checks the logits of every position against the full forward pass.
void check_decoding(const Sequence& r, const std::vector<int64_t>& pieces, double tol) {
  const int64_t B = r.ids.shape()[0], N = r.ids.shape()[1], V = r.model.config().vocab_size;
  Decoder decoder(r.model, B);
  int64_t pos = 0;
  for (int64_t piece : pieces) {
    SCOPED_TRACE("prefill of positions " + std::to_string(pos) + ".." + std::to_string(pos + piece - 1));
    Tensor got = decoder.prefill_all(rows(r.ids.view({B, N, 1}), pos, pos + piece).view({B, piece}));
    EXPECT_CLOSE(got, rows(r.want, pos, pos + piece), tol);
    pos += piece;
  }
  for (; pos < N; ++pos) {
    SCOPED_TRACE("step at position " + std::to_string(pos));
    std::vector<int32_t> tokens;
    for (int64_t b = 0; b < B; ++b) tokens.push_back(r.ids.data<int32_t>()[b * N + pos]);
    Tensor got = decoder.step(tokens);
    EXPECT_CLOSE(got.view({B, 1, V}), rows(r.want, pos, pos + 1), tol);
    EXPECT_EQ(decoder.position(), pos + 1);
    if (::testing::Test::HasFailure()) return;  // one position is enough to see what went wrong
  }
}

class DecoderTest : public ::testing::TestWithParam<Case> {};

// Bases: float64 decoding differs from the full pass only in summation order (chunk vs recurrent
// form, tiled vs cached attention): ~1e-15 per op, 1e-10 leaves room for depth and length. Float32:
// the same at ~1e-7 per op; 1e-4 is the bar.
TEST_P(DecoderTest, PrefillThenStepEqualsTheFullForwardPass) {
  const Case& c = GetParam();
  const bool hybrid = c.model.empty();
  // Past the default hybrid's window of 128 and its chunk of 64; past the tiny models' window of 5,
  // their chunk of 4 and the global cache's first allocation of 64 slots.
  const int64_t N = hybrid ? 150 : 70, chunks = hybrid ? 100 : 11;
  for (DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
    Sequence r = make_run(c, dtype, 2, N);
    {
      SCOPED_TRACE("one-token prompt");
      check_decoding(r, {1}, tol);
    }
    {
      SCOPED_TRACE("a prompt of several chunks");
      check_decoding(r, {chunks}, tol);
    }
    {
      SCOPED_TRACE("a prompt fed in two pieces");
      check_decoding(r, {chunks - 4, 7}, tol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryMixer, DecoderTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Each descriptor's state_size (layers/state_size.h: the sweep's `state` column) is what decoding
// really holds: the scalars of the layers' MixerStates per sequence, after a prompt and after a
// step. For every case of a linear mixer: attention's global cache grows in blocks of slots
// (tests/layers/state_size_test.cpp counts it by hand).
TEST(Decoder, StateSizeIsWhatDecodingHolds) {
  auto attention = [](const std::string& mixer) { return mixer_descriptor(mixer).attention; };
  std::set<std::string> checked;
  for (const Case& k : cases()) {
    const ModelConfig c = model_config(k);
    if (std::any_of(c.layers.begin(), c.layers.end(), [&](const LayerSpec& l) { return attention(l.mixer); })) continue;
    SCOPED_TRACE(k.name);
    const Model model(c, DType::f64);
    const int64_t B = 2, T = 9;
    Decoder decoder(model, B);
    decoder.prefill(Tensor::zeros({B, T}, DType::i32));
    EXPECT_EQ(decoder.state_bytes(), size_t(B * state_size(c, T)) * sizeof(double));
    decoder.step({1, 2});
    EXPECT_EQ(decoder.state_bytes(), size_t(B * state_size(c, T + 1)) * sizeof(double));
    for (const LayerSpec& l : c.layers) checked.insert(l.mixer);
  }
  for (const std::string& name : mixer_names()) {
    if (!attention(name)) {
      EXPECT_TRUE(checked.count(name)) << name << " has no case";
    }
  }
}

TEST(Decoder, StateOfALinearModelDoesNotGrowWithTheSequence) {
  Sequence r = make_run(named("gla"), DType::f32, 1, 40);
  Decoder decoder(r.model, 1);
  decoder.prefill(rows(r.ids.view({1, 40, 1}), 0, 8).view({1, 8}));
  const size_t bytes = decoder.state_bytes();
  EXPECT_GT(bytes, 0u);
  for (int64_t t = 8; t < 40; ++t) decoder.step({r.ids.data<int32_t>()[t]});
  EXPECT_EQ(decoder.state_bytes(), bytes);
}

TEST(Decoder, ARestoredStateContinuesTheSequence) {
  Sequence r = make_run(named("deltanet"), DType::f64, 1, 12);  // recurrent state and convolutions
  Decoder first(r.model, 1), second(r.model, 1);
  first.prefill(rows(r.ids.view({1, 12, 1}), 0, 6).view({1, 6}));
  second.restore(first.states(), first.position());
  Tensor got = second.step({r.ids.data<int32_t>()[6]});
  EXPECT_CLOSE(got.view({1, 1, 13}), rows(r.want, 6, 7), 1e-10);
}

TEST(Decoder, WrongBatchIsAnError) {
  Sequence r = make_run(named("gla"), DType::f32, 2, 4);
  Decoder decoder(r.model, 2);
  EXPECT_NE(testing::error_of([&] { decoder.step({1}); }).find("1 tokens for 2 sequences"), std::string::npos);
}

}  // namespace
}  // namespace linattn
