// Document-aware ops (autograd/segments.h): a batch cut into sequences gives, for every mixer, the
// attention, RoPE and the short convolution, exactly the outputs and gradients of each sequence run
// alone (float64, bit for bit), the chunk and recurrent forms agree with boundaries anywhere (chunk
// edges, position 0 and T - 1), and the gradients match central finite differences.
#include "autograd/segments.h"

#include <cstring>

#include "autograd/mixers.h"
#include "autograd/ops.h"
#include "gradcheck.h"

namespace linattn {
namespace {

using testing::random_tensor;
using V = std::vector<Variable>;

// How an input or output of an op relates to the [B, T] batch: per token ([B, T, ...]), per row
// (a state [B, ...]: the first sequence of a row takes it, the last gives it), or shared (weights).
enum class Kind { token, state, shared };
struct Arg {
  Tensor t;
  Kind kind;
};
using SegFn = std::function<V(const V&, const ops::Segments&)>;

constexpr int64_t B = 2, T = 11, C = 4;  // chunk size 4: boundaries at 4 and 8 are chunk edges

// Sequences starting at 0, 4 (a chunk edge), 5, 10 (T - 1) in row 0 and 0, 1, 8 (a chunk edge) in row 1.
const ops::Segments kCuts{{0, 4, 5, 10, 11, 12, 19, 22}};
// Row 0 whole, row 1 cut at 3.
const ops::Segments kOneCut{{0, 11, 14, 22}};

// Of x: per_token, positions [t0, t0 + len) of row b ([1, len, ...]); else row b ([1, ...]).
Tensor rows_of(const Tensor& x, int64_t b, int64_t t0, int64_t len, bool per_token) {
  Shape s = x.shape();
  const int64_t width = x.numel() / (per_token ? s[0] * s[1] : s[0]);
  const int64_t at = per_token ? (b * s[1] + t0) * width : b * width;
  s[0] = 1;
  if (per_token) s[1] = len;
  Tensor out = Tensor::zeros(s, DType::f64);
  std::memcpy(out.data<double>(), x.data<double>() + at, sizeof(double) * out.numel());
  return out;
}

// Writes (or, shared, adds) the part's tensor back where rows_of took it.
void put_rows(Tensor& into, const Tensor& part, int64_t b, int64_t t0, Kind kind) {
  double* dst = into.data<double>();
  const double* src = part.data<double>();
  if (kind == Kind::shared) {
    for (int64_t i = 0; i < part.numel(); ++i) dst[i] += src[i];
    return;
  }
  const Shape& s = into.shape();
  const int64_t at = kind == Kind::token ? (b * s[1] + t0) * (into.numel() / (s[0] * s[1])) : b * part.numel();
  std::memcpy(dst + at, src, sizeof(double) * part.numel());
}

Tensor grad_or_zeros(const Variable& v) {
  return v.grad().defined() ? v.grad().clone() : Tensor::zeros(v.shape(), DType::f64);
}

// f on the whole batch cut by `segments` against f on each sequence alone (B = 1, T = its length,
// the row's states only for its first / last sequence): outputs and gradients bit for bit (shared
// weights' gradients are sums over the sequences, so to rounding).
void expect_sequences_run_alone(const SegFn& f, const std::vector<Arg>& in, const std::vector<Kind>& out_kinds,
                                const ops::Segments& segments, Rng& rng) {
  V vars;
  for (const Arg& a : in) vars.emplace_back(a.t, true);
  V outs = f(vars, segments);
  ASSERT_EQ(outs.size(), out_kinds.size());
  std::vector<Tensor> upstream;
  for (const Variable& o : outs) upstream.push_back(random_tensor(o.shape(), rng));
  backward(outs, upstream);

  std::vector<Tensor> grads;  // assembled from the sequences run alone
  for (const Arg& a : in) grads.push_back(Tensor::zeros(a.t.shape(), DType::f64));
  const std::vector<int64_t>& o = segments.offsets;
  for (size_t i = 0; i + 1 < o.size(); ++i) {
    const int64_t b = o[i] / T, t0 = o[i] % T, len = o[i + 1] - o[i];
    const bool first = t0 == 0, last = t0 + len == T;
    SCOPED_TRACE("sequence of row " + std::to_string(b) + " from " + std::to_string(t0) + ", " + std::to_string(len) +
                 " tokens");
    V alone;
    for (const Arg& a : in)
      if (a.kind == Kind::token) alone.emplace_back(rows_of(a.t, b, t0, len, true), true);
      else if (a.kind == Kind::state) alone.push_back(first ? Variable(rows_of(a.t, b, 0, 0, false), true) : Variable());
      else alone.emplace_back(a.t.clone(), true);
    V got = f(alone, {});
    std::vector<Tensor> up;
    for (size_t j = 0; j < got.size(); ++j) {
      if (out_kinds[j] == Kind::token) {
        EXPECT_CLOSE(got[j].value(), rows_of(outs[j].value(), b, t0, len, true), 0.0);
        up.push_back(rows_of(upstream[j], b, t0, len, true));
      } else {  // a final state: the whole batch's is its row's last sequence's
        if (last) EXPECT_CLOSE(got[j].value(), rows_of(outs[j].value(), b, 0, 0, false), 0.0);
        up.push_back(last ? rows_of(upstream[j], b, 0, 0, false) : Tensor::zeros(got[j].shape(), DType::f64));
      }
    }
    backward(got, up);
    for (size_t j = 0; j < in.size(); ++j)
      if (alone[j].defined()) put_rows(grads[j], grad_or_zeros(alone[j]), b, t0, in[j].kind);
  }
  for (size_t j = 0; j < in.size(); ++j) {
    SCOPED_TRACE("gradient of input " + std::to_string(j) + " " + in[j].t.str());
    EXPECT_GT(testing::max_abs(grads[j]), 0.0);
    // Shared weights: a sum over sequences in another order; 1e-13 relative is rounding in float64.
    EXPECT_CLOSE(grad_or_zeros(vars[j]), grads[j], in[j].kind == Kind::shared ? 1e-13 : 0.0);
  }
}

// Analytic gradients of sum_j <f_j, R_j> with segments against central differences.
void expect_gradients_match(const SegFn& f, const std::vector<Arg>& in, const ops::Segments& segments, Rng& rng) {
  V vars;
  for (const Arg& a : in) vars.emplace_back(a.t, true);
  V outs = f(vars, segments);
  std::vector<Tensor> upstream;
  for (const Variable& o : outs) upstream.push_back(random_tensor(o.shape(), rng));
  backward(outs, upstream);
  auto loss = [&] {
    NoGrad no_grad;
    V plain;
    for (const Arg& a : in) plain.emplace_back(a.t, false);
    V got = f(plain, segments);
    double l = 0;
    for (size_t j = 0; j < got.size(); ++j) l += testing::dot(got[j].value(), upstream[j]);
    return l;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i) + " " + in[i].t.str());
    Tensor numeric = testing::finite_difference(loss, in[i].t);
    EXPECT_GT(testing::max_abs(numeric), 0.0);
    EXPECT_CLOSE(grad_or_zeros(vars[i]), numeric, testing::kGradTolerance);
  }
}

// The linear mixers, parameterized: q, k, v, (gate inputs), h0 -> o, ht.
struct MixerCase {
  const char* name;
  std::function<std::vector<Arg>(Rng&)> inputs;
  std::function<ops::MixerOutput(const V&, const ops::MixerOptions&)> run;
};

constexpr int64_t H = 2, DK = 4, DV = 3;

Tensor unit_rows(Tensor t) {  // L2-normalized along the last dim, as the DeltaNet layer makes k
  double* p = t.data<double>();
  const int64_t d = t.shape().last();
  for (int64_t r = 0; r < t.numel() / d; ++r) {
    double n = 0;
    for (int64_t j = 0; j < d; ++j) n += p[r * d + j] * p[r * d + j];
    for (int64_t j = 0; j < d; ++j) p[r * d + j] /= std::sqrt(n);
  }
  return t;
}

std::vector<Arg> qkv(Rng& rng, bool unit_k) {
  return {{random_tensor({B, T, H, DK}, rng), Kind::token},
          {unit_k ? unit_rows(random_tensor({B, T, H, DK}, rng)) : random_tensor({B, T, H, DK}, rng), Kind::token},
          {random_tensor({B, T, H, DV}, rng), Kind::token}};
}

std::vector<Arg> with(std::vector<Arg> a, std::vector<Arg> more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::vector<MixerCase> mixer_cases() {
  return {
      {"linear_attention_elu1",
       [](Rng& r) { return with(qkv(r, false), {{random_tensor({B, H, DK, DV}, r), Kind::state}}); },
       [](const V& x, const ops::MixerOptions& o) {
         return ops::linear_attention(x[0], x[1], x[2], x[3], FeatureMap::elu1, false, o);
       }},
      {"linear_attention_normalized",
       [](Rng& r) {
         return with(qkv(r, false), {{random_tensor({B, H, DK, DV}, r), Kind::state},
                                     {random_tensor({B, H, DK}, r, 1.0, 2.0), Kind::state}});
       },
       [](const V& x, const ops::MixerOptions& o) {
         return ops::linear_attention(x[0], x[1], x[2], x[3], FeatureMap::elu1, true, o, x[4]);
       }},
      {"gla",
       [](Rng& r) {
         return with(qkv(r, false), {{random_tensor({B, T, H, DK}, r, -2.0, -0.01), Kind::token},
                                     {random_tensor({B, H, DK, DV}, r), Kind::state}});
       },
       [](const V& x, const ops::MixerOptions& o) { return ops::gla(x[0], x[1], x[2], x[3], x[4], o); }},
      {"deltanet",
       [](Rng& r) {
         return with(qkv(r, true), {{random_tensor({B, T, H}, r, 0.1, 0.9), Kind::token},
                                    {random_tensor({B, H, DK, DV}, r), Kind::state}});
       },
       [](const V& x, const ops::MixerOptions& o) { return ops::deltanet(x[0], x[1], x[2], x[3], x[4], o); }},
      {"gated_deltanet",
       [](Rng& r) {
         return with(qkv(r, true), {{random_tensor({B, T, H}, r, 0.1, 0.9), Kind::token},
                                    {random_tensor({B, T, H}, r, -1.0, -0.01), Kind::token},
                                    {random_tensor({B, H, DK, DV}, r), Kind::state}});
       },
       [](const V& x, const ops::MixerOptions& o) {
         return ops::gated_deltanet(x[0], x[1], x[2], x[3], x[4], x[5], o);
       }},
  };
}

class SegmentedMixer : public ::testing::TestWithParam<std::tuple<int, ops::MixerForm>> {
 protected:
  MixerCase mixer() const { return mixer_cases()[size_t(std::get<0>(GetParam()))]; }
  ops::MixerOptions options(const ops::Segments& segments) const {
    ops::MixerOptions o;
    o.form = std::get<1>(GetParam());
    o.chunk_size = C;
    o.segments = &segments;
    return o;
  }
  SegFn fn() const {
    MixerCase m = mixer();
    return [m, this](const V& x, const ops::Segments& s) {
      ops::MixerOutput out = m.run(x, options(s));
      V r{out.o, out.ht};
      if (out.zt.defined()) r.push_back(out.zt);
      return r;
    };
  }
  std::vector<Kind> out_kinds() const {
    return std::string(mixer().name) == "linear_attention_normalized"
               ? std::vector<Kind>{Kind::token, Kind::state, Kind::state}
               : std::vector<Kind>{Kind::token, Kind::state};
  }
};

TEST_P(SegmentedMixer, EverySequenceGivesWhatItGivesAlone) {
  for (const ops::Segments* s : {&kCuts, &kOneCut}) {
    Rng rng(11);
    expect_sequences_run_alone(fn(), mixer().inputs(rng), out_kinds(), *s, rng);
  }
}

TEST_P(SegmentedMixer, GradientsMatchFiniteDifferences) {
  Rng rng(12);
  expect_gradients_match(fn(), mixer().inputs(rng), kCuts, rng);
}

// Chunk against recurrent with the same cuts: outputs, final states and gradients. Tolerance: the
// two forms sum in different orders; 1e-12 relative is float64 rounding, far below any real error.
TEST(SegmentedMixers, ChunkMatchesRecurrent) {
  for (const MixerCase& m : mixer_cases()) {
    SCOPED_TRACE(m.name);
    Rng rng(13);
    std::vector<Arg> in = m.inputs(rng);
    std::vector<Tensor> values, grads;
    for (ops::MixerForm form : {ops::MixerForm::chunk, ops::MixerForm::recurrent}) {
      ops::MixerOptions o;
      o.form = form;
      o.chunk_size = C;
      o.segments = &kCuts;
      V vars;
      for (const Arg& a : in) vars.emplace_back(a.t, true);
      ops::MixerOutput out = m.run(vars, o);
      Rng up(14);
      backward({out.o, out.ht}, {random_tensor(out.o.shape(), up), random_tensor(out.ht.shape(), up)});
      values.push_back(out.o.value());
      values.push_back(out.ht.value());
      for (const Variable& v : vars) grads.push_back(grad_or_zeros(v));
    }
    EXPECT_CLOSE(values[0], values[2], 1e-12);
    EXPECT_CLOSE(values[1], values[3], 1e-12);
    for (size_t i = 0; i < in.size(); ++i) EXPECT_CLOSE(grads[i], grads[i + in.size()], 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(AllMixers, SegmentedMixer,
                         ::testing::Combine(::testing::Range(0, int(mixer_cases().size())),
                                            ::testing::Values(ops::MixerForm::chunk, ops::MixerForm::recurrent)),
                         [](const auto& info) {
                           return std::string(mixer_cases()[size_t(std::get<0>(info.param))].name) +
                                  (std::get<1>(info.param) == ops::MixerForm::chunk ? "_chunk" : "_recurrent");
                         });

// Attention with RoPE (positions restart at each sequence), global and windowed, grouped heads.
SegFn attention_fn(int64_t window) {
  return [window](const V& x, const ops::Segments& s) {
    return V{ops::attention(ops::rope(x[0], 10000.0, 0, s), ops::rope(x[1], 10000.0, 0, s), x[2], window, 0, s)};
  };
}
std::vector<Arg> attention_inputs(Rng& rng) {
  return {{random_tensor({B, T, 4, 4}, rng), Kind::token},
          {random_tensor({B, T, 2, 4}, rng), Kind::token},
          {random_tensor({B, T, 2, 3}, rng), Kind::token}};
}

TEST(SegmentedAttention, EverySequenceGivesWhatItGivesAlone) {
  for (int64_t window : {0, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    for (const ops::Segments* s : {&kCuts, &kOneCut}) {
      Rng rng(21);
      expect_sequences_run_alone(attention_fn(window), attention_inputs(rng), {Kind::token}, *s, rng);
    }
  }
}

TEST(SegmentedAttention, GradientsMatchFiniteDifferences) {
  for (int64_t window : {0, 3}) {
    SCOPED_TRACE("window " + std::to_string(window));
    Rng rng(22);
    expect_gradients_match(attention_fn(window), attention_inputs(rng), kCuts, rng);
  }
}

// RoPE with a position offset: the offset belongs to each row's first sequence; the others start at 0.
TEST(SegmentedRope, PositionsRestartAtEachSequence) {
  Rng rng(23);
  Tensor x = random_tensor({B, T, 2, 4}, rng);
  Variable y = ops::rope(Variable(x), 10000.0, 5, kCuts);
  // Row 1's sequence at 8 (flattened 19) is rotated as positions 0.. alone.
  Tensor alone = ops::rope(Variable(rows_of(x, 1, 8, 3, true)), 10000.0, 0).value();
  EXPECT_CLOSE(rows_of(y.value(), 1, 8, 3, true), alone, 0.0);
  Tensor first = ops::rope(Variable(rows_of(x, 0, 0, 4, true)), 10000.0, 5).value();
  EXPECT_CLOSE(rows_of(y.value(), 0, 0, 4, true), first, 0.0);
}

// The short convolution (DeltaNet's q, k, v): weights shared by every sequence.
TEST(SegmentedShortConv, EverySequenceGivesWhatItGivesAloneAndGradientsMatch) {
  SegFn f = [](const V& x, const ops::Segments& s) { return V{ops::short_conv(x[0], x[1], x[2], s)}; };
  auto inputs = [](Rng& rng) {
    return std::vector<Arg>{{random_tensor({B, T, 5}, rng), Kind::token},
                            {random_tensor({5, 4}, rng), Kind::shared},
                            {random_tensor({5}, rng), Kind::shared}};
  };
  for (const ops::Segments* s : {&kCuts, &kOneCut}) {
    Rng rng(31);
    expect_sequences_run_alone(f, inputs(rng), {Kind::token}, *s, rng);
  }
  Rng rng(32);
  expect_gradients_match(f, inputs(rng), kCuts, rng);
}

TEST(Segments, StartAtRowStartsAndAtTheToken) {
  Tensor ids = Tensor::zeros({2, 5}, DType::i32);
  int32_t* p = ids.data<int32_t>();
  for (int i : {0, 2, 4, 6}) p[i] = 7;  // row 0: 7 at 0, 2, 4; row 1: 7 at 1
  EXPECT_EQ(ops::Segments::starting_at(ids, 7).offsets, (std::vector<int64_t>{0, 2, 4, 5, 6, 10}));
  EXPECT_EQ(ops::Segments::starting_at(ids, 9).offsets, (std::vector<int64_t>{0, 5, 10}));
}

TEST(Segments, WholeRowsShareOneCall) {
  std::vector<ops::SegmentPart> parts = ops::segment_parts(ops::Segments{{0, 5, 10, 12, 15, 20}}, 4, 5);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].rows, 2);  // rows 0 and 1
  EXPECT_EQ(parts[1].start, 10);
  EXPECT_TRUE(parts[1].first && !parts[1].last);
  EXPECT_TRUE(!parts[2].first && parts[2].last);
  EXPECT_EQ(parts[3].row, 3);
  EXPECT_EQ(ops::segment_parts({}, 4, 5).size(), 1u);
}

// The table staged into a fixed buffer ends in empty sequences at B * T (what the kernels skip), and
// the host's offsets stay the batch's own.
TEST(Segments, StagingPadsTheTableWithEmptySequences) {
  ops::Segments s{{0, 3, 5, 10}};
  const Tensor buffer = Tensor::empty({6}, DType::i32);
  ASSERT_TRUE(s.stage(buffer));
  EXPECT_EQ(s.table.raw(), buffer.raw());
  const int32_t* t = buffer.data<int32_t>();
  EXPECT_EQ((std::vector<int32_t>(t, t + 6)), (std::vector<int32_t>{0, 3, 5, 10, 10, 10}));
  Tensor holder;
  EXPECT_EQ(s.sequences(Device::cpu, holder).count, 5);
  EXPECT_EQ(s.offsets.size(), 4u);
  EXPECT_EQ(ops::segment_parts(s, 2, 5).size(), 3u);
  ops::Segments more{{0, 1, 2, 3, 4, 5, 10}};  // 6 sequences: more than the buffer's 5
  EXPECT_FALSE(more.stage(buffer));
  EXPECT_FALSE(more.table.defined());
  EXPECT_EQ((std::vector<int32_t>(t, t + 6)), (std::vector<int32_t>{0, 3, 5, 10, 10, 10})) << "nothing staged";
}

TEST(Segments, OffsetsThatAreNotSequencesOfTheBatchThrow) {
  EXPECT_NE(testing::error_of([] { ops::segment_parts(ops::Segments{{0, 7, 10}}, 2, 5); }).find("crosses the end of row 0"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { ops::segment_parts(ops::Segments{{0, 5, 9}}, 2, 5); }).find("from 0 to B * T = 10"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { ops::segment_parts(ops::Segments{{0, 3, 3, 10}}, 2, 5); }).find("must increase"),
            std::string::npos);
}

}  // namespace
}  // namespace linattn
