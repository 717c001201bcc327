// The tensor-core paths of the CUDA linear attention, GLA and RetNet kernels (kernels/cuda/chunk_gla.cu,
// bf16 and tf32 operands with float32 accumulation, chosen by backend::matmul_precision()) through the
// backend table against the CPU entry in float64: the output, the final states and every gradient,
// for every feature map and the normalized form, GLA's weak and strong decays, RetNet's fixed decays,
// T off the kernels' 64-token chunk and head sizes 32/64/128. And a negative control: the same check
// fails on a perturbed input. Runs only where a GPU exists; elsewhere every test skips with the reason.
//
// Tolerances (relative to each output's largest reference entry, testing::compare). bf16 keeps 8
// significant bits: rounding an operand costs a relative error up to u = 2^-8 ~ 3.9e-3 (tf32, 11
// bits: u = 2^-11 ~ 4.9e-4). A product of two rounded operands is then off by up to 2u per term; the
// float32 accumulation adds ~1e-6. The longest chain, dq and dk, rounds three times (dP = dO Vᵀ is
// rounded again before dP K), so a bound per term is ~6u, and over a sum of terms of random signs the
// errors largely cancel: measured (printed per case), the worst output is off by 4.8e-3 ~ 1.2u in
// bf16 and 8.6e-4 ~ 1.8u in tf32. The bars, 2e-2 ~ 5u (bf16) and 3e-3 ~ 6u (tf32), cover the
// per-term bound with room for the GPU's own summation order; a wrong row, index, mask or gate moves
// an output by a whole term, O(1) relative, which the negative control shows they catch.
#include <cmath>
#include <cstdio>
#include <string>

#include "kernel_testing.h"
#include "kernels/cpu/entries.h"
#include "mixer_testing.h"

namespace linattn {
namespace {

using namespace testing;

constexpr double kBf16Tol = 2e-2;
constexpr double kTf32Tol = 3e-3;

double tolerance(MatmulPrecision p) { return p == MatmulPrecision::bf16 ? kBf16Tol : kTf32Tol; }

// backend::matmul_precision() for the scope, back to float32 after it (it is process-wide).
struct PrecisionScope {
  explicit PrecisionScope(MatmulPrecision p) { backend::set_matmul_precision(p); }
  ~PrecisionScope() { backend::set_matmul_precision(MatmulPrecision::f32); }
};

void la_cuda_forward(const backend::MixerArgs& r) { backend::linear_attention_forward(Device::cuda, r); }
void la_cuda_backward(const backend::MixerArgs& r) { backend::linear_attention_backward(Device::cuda, r); }
void gla_cuda_forward(const backend::MixerArgs& r) { backend::gla_forward(Device::cuda, r); }
void gla_cuda_backward(const backend::MixerArgs& r) { backend::gla_backward(Device::cuda, r); }

// The worst relative error over every output of got against want.
std::pair<double, std::string> worst_error(const MixerResult& got, const MixerResult& want) {
  const std::pair<const char*, const Tensor*> g[] = {{"o", &got.o},   {"ht", &got.ht}, {"zt", &got.zt},
                                                     {"dq", &got.dq}, {"dk", &got.dk}, {"dv", &got.dv},
                                                     {"dg", &got.dg}, {"dh0", &got.dh0}, {"dz0", &got.dz0}};
  const Tensor* w[] = {&want.o, &want.ht, &want.zt, &want.dq, &want.dk, &want.dv, &want.dg, &want.dh0, &want.dz0};
  std::pair<double, std::string> worst{0.0, ""};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(g[i].second->defined(), w[i]->defined()) << g[i].first;
    if (!w[i]->defined() || !g[i].second->defined()) continue;
    worst = std::max(worst, {compare(*g[i].second, *w[i]).relative, std::string(g[i].first)});
  }
  return worst;
}

// RetNet's fixed decay as GLA's log-gate: gamma_h = 1 - 2^(-5-h) for every token and key column
// (layers/mixers/gla.cpp).
Tensor retnet_gate(const MixerCase& c) {
  Tensor g = Tensor::zeros({c.B, c.T, c.H, c.Dk}, DType::f64);
  double* p = g.data<double>();
  for (int64_t i = 0; i < g.numel(); ++i) p[i] = std::log(1 - std::exp2(-5.0 - double(i / c.Dk % c.H)));
  return g;
}

enum class Mixer { linear_attention, gla, retnet };

struct PrecisionCase {
  Mixer mixer;
  MixerCase shape;
};

// T off the 64-token chunk (and one multiple of it), head sizes 32/64/128 and Dk != Dv, with and
// without initial states; linear attention with every feature map and the normalized form; GLA with
// weak and strong (log-gate -40) decays; RetNet.
const PrecisionCase kCases[] = {
    {Mixer::linear_attention, {2, 100, 2, 64, 64, 64}},
    {Mixer::linear_attention, {1, 150, 2, 128, 128, 64, false}},
    {Mixer::linear_attention, {1, 77, 2, 32, 48, 64, true, FeatureMap::elu1}},
    {Mixer::linear_attention, {1, 90, 2, 32, 32, 64, true, FeatureMap::relu}},
    {Mixer::linear_attention, {2, 100, 2, 64, 64, 64, true, FeatureMap::elu1, true}},
    {Mixer::linear_attention, {1, 128, 1, 32, 32, 64, false, FeatureMap::elu1, true}},
    {Mixer::gla, {2, 100, 2, 64, 64, 64}},
    {Mixer::gla, {1, 150, 1, 128, 128, 64, false}},
    {Mixer::gla, {1, 77, 2, 32, 48, 64, true, FeatureMap::identity, false, false, -1e-3}},
    {Mixer::gla, {1, 130, 2, 32, 32, 64, true, FeatureMap::identity, false, false, -40}},
    {Mixer::retnet, {2, 100, 4, 64, 64, 64}},
    {Mixer::retnet, {1, 70, 2, 128, 128, 64, false}},
};

std::string name_of(Mixer m) {
  return m == Mixer::linear_attention ? "linear attention" : m == Mixer::gla ? "GLA" : "RetNet";
}

// The case's forward and backward on CUDA in `precision` and on the CPU in float64; `perturb` adds it
// `wrong_row`: on the CUDA side only, token 0's q row (batch 0, head 0) replaced by token 1's, as an
// off-by-one row index would (the negative control).
std::pair<MixerResult, MixerResult> run_case(const PrecisionCase& pc, MatmulPrecision precision, Rng& rng,
                                             bool wrong_row = false) {
  const MixerKind kind = pc.mixer == Mixer::linear_attention ? MixerKind::linear_attention : MixerKind::gla;
  MixerData d = random_mixer_data(pc.shape, kind, rng);
  if (pc.mixer == Mixer::retnet) d.g = retnet_gate(pc.shape);
  const auto cpu_fwd = kind == MixerKind::gla ? cpu::entry::gla_forward : cpu::entry::linear_attention_forward;
  const auto cpu_bwd = kind == MixerKind::gla ? cpu::entry::gla_backward : cpu::entry::linear_attention_backward;
  MixerResult want = run_mixer(cpu_fwd, cpu_bwd, kind, pc.shape, d, DType::f64, Device::cpu);
  if (wrong_row) {
    double* q = d.q.data<double>();
    const int64_t row = pc.shape.H * pc.shape.Dk;  // [B, T, H, Dk]: token 1 of batch 0, head 0
    for (int64_t i = 0; i < pc.shape.Dk; ++i) q[i] = q[row + i];
  }
  PrecisionScope scope(precision);
  MixerResult got = run_mixer(kind == MixerKind::gla ? gla_cuda_forward : la_cuda_forward,
                              kind == MixerKind::gla ? gla_cuda_backward : la_cuda_backward, kind, pc.shape, d,
                              DType::f32, Device::cuda);
  return {got, want};
}

class CudaChunkPrecision : public ::testing::TestWithParam<MatmulPrecision> {};

TEST_P(CudaChunkPrecision, MatchesTheCpuInFloat64) {
  SKIP_WITHOUT_GPU();
  const MatmulPrecision precision = GetParam();
  Rng rng(61);
  for (const PrecisionCase& pc : kCases) {
    SCOPED_TRACE(name_of(pc.mixer) + " " + pc.shape.str());
    const auto [got, want] = run_case(pc, precision, rng);
    EXPECT_MIXER_CLOSE(got, want, tolerance(precision));
    const auto [err, where] = worst_error(got, want);
    std::printf("  %s %s %s: worst relative error %.2g (%s), tolerance %.2g\n", matmul_precision_name(precision),
                name_of(pc.mixer).c_str(), pc.shape.str().c_str(), err, where.c_str(), tolerance(precision));
  }
}

// The tolerance catches a wrong result: one token's query row of one head taken from the next token
// on the CUDA side only moves that token's output and the gradients that depend on it past it.
TEST_P(CudaChunkPrecision, ToleranceCatchesAPerturbedInput) {
  SKIP_WITHOUT_GPU();
  const MatmulPrecision precision = GetParam();
  for (const PrecisionCase& pc : {kCases[0], kCases[6]}) {
    SCOPED_TRACE(name_of(pc.mixer) + " " + pc.shape.str());
    Rng rng(62);
    const auto [got, want] = run_case(pc, precision, rng, true);
    const auto [err, where] = worst_error(got, want);
    std::printf("  %s %s, token 0's q row wrong: worst relative error %.2g (%s), tolerance %.2g\n",
                matmul_precision_name(precision), name_of(pc.mixer).c_str(), err, where.c_str(), tolerance(precision));
    EXPECT_GT(err, 3 * tolerance(precision)) << "a perturbed q passes the " << matmul_precision_name(precision)
                                             << " tolerance: worst relative error " << err << " (" << where << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(, CudaChunkPrecision, ::testing::Values(MatmulPrecision::bf16, MatmulPrecision::tf32),
                         [](const ::testing::TestParamInfo<MatmulPrecision>& info) {
                           return std::string(matmul_precision_name(info.param));
                         });

}  // namespace
}  // namespace linattn
