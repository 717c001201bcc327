// CUDA DeltaNet and Gated DeltaNet (kernels/cuda/deltanet.{h,cu}, the delta_rule entries) against
// the CPU entries in float64: forward output, final state and every gradient (q, k, v, beta, the
// log-decay a, h0), chunk and recurrent forms, odd shapes (one token, T off the chunk, chunk sizes
// 16/32/64, with and without h0, gated and not).
//
// Two kinds of test:
// - CudaDeltaNet.*: the CUDA entries through the backend table; they run only where a GPU exists.
//   CudaDeltaNetPrecision.* runs the tensor-core paths (bf16, tf32) of the forward and the backward
//   against the same reference.
// - DeltaNetBlockMirror.*: the per-head work of kernels/cuda/deltanet_block.h (the very code the
//   CUDA kernels run) on the host with a sequential "block", in float64 (the algorithm, to 1e-10)
//   and float32 (the device's precision), its phases' iterations both in order and reversed (a
//   phase whose iterations depended on each other, a race on the device, would change the result).
//   One of them runs each of the backward's three launches alone on what the CPU's stages
//   (kernels/cpu/deltanet_stages.h) computed before it. They run everywhere.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernel_testing.h"
#include "kernels/backend.h"
#include "kernels/cpu/deltanet.h"
#include "kernels/cpu/deltanet_stages.h"
#include "kernels/cuda/deltanet_block.h"
#include "kernels/deltanet_args.h"
#include "kernels/deltanet_cases.h"

namespace linattn {
namespace {

using backend::MixerArgs;
using deltanet_testing::Inputs;

struct Case {
  int64_t B, T, H, Dk, Dv, C;
  bool gated, states, chunk;
  double a_lo = -1.0;  // gated: log-decays uniform in [a_lo, -0.01]
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " Dk=" +
           std::to_string(Dk) + " Dv=" + std::to_string(Dv) + (chunk ? " chunk C=" + std::to_string(C) : " recurrent") +
           (gated ? " gated" : "") + (states ? " h0+dht" : "") + " a_lo=" + std::to_string(a_lo);
  }
};

// One token, T off every chunk size, chunk sizes 16/32/64, Dk != Dv (Dv = 20: a partial tile of state
// columns in the state passes), Dk = 128 at chunk 64 (the forward's chunk_factors_kernel then needs
// more than the default 48 KiB of shared memory), Dk = Dv = 64 at chunk 64 over three chunks, the
// last one partial (the backward's chunk_backward_grads_kernel above 48 KiB), with and without states,
// gated and not, strong decays (whole chunks decaying to exp(-300)), the recurrent form, and no
// tokens at all (the final state is h0, dh0 is dht).
const std::vector<Case> kCases = {
    {2, 1, 2, 16, 16, 64, true, true, true},     {2, 100, 2, 32, 32, 64, true, true, true},
    {1, 100, 3, 16, 24, 16, false, false, true}, {2, 77, 2, 32, 48, 32, true, false, true},
    {1, 64, 2, 64, 64, 64, false, true, true},   {1, 50, 2, 16, 16, 16, true, true, true, -5.0},
    {2, 33, 2, 16, 24, 64, false, true, false},  {1, 70, 2, 24, 16, 64, true, true, false},
    {1, 1, 1, 16, 16, 64, true, false, false},   {1, 0, 2, 16, 16, 64, true, true, true},
    {1, 0, 2, 16, 16, 64, false, true, false},   {1, 40, 2, 16, 20, 16, true, true, true},
    {1, 20, 1, 128, 16, 64, true, true, true},   {2, 130, 2, 64, 64, 64, true, true, true},
    {1, 45, 3, 48, 40, 32, false, true, true},
};

struct Result {
  Tensor o, ht, dq, dk, dv, dbeta, da, dh0;  // float64 on the CPU (da, dh0 undefined when absent)
};

using Entry = std::function<void(const MixerArgs&)>;

// Forward, then backward from gradients that start at g0 (so the += is checked too), of the given
// entries on tensors of dtype dt on device dev.
Result run(const Inputs<double>& in, const Case& c, const Result& g0, DType dt, Device dev, const Entry& forward,
           const Entry& backward) {
  auto put = [&](const Tensor& t) { return t.defined() ? t.to(dt).to(dev) : Tensor(); };
  auto get = [](const Tensor& t) { return t.defined() ? t.to(Device::cpu).to(DType::f64) : Tensor(); };
  MixerArgs r;
  r.B = c.B, r.T = c.T, r.H = c.H, r.Dk = c.Dk, r.Dv = c.Dv;
  r.scale = in.scale, r.chunk = c.chunk, r.chunk_size = c.C;
  r.q = put(in.q), r.k = put(in.k), r.v = put(in.v), r.gate = put(in.beta), r.decay = put(in.a), r.h0 = put(in.h0);
  r.o = Tensor::zeros({c.B, c.T, c.H, c.Dv}, dt, dev);
  r.ht = Tensor::zeros({c.B, c.H, c.Dk, c.Dv}, dt, dev);
  if (c.chunk) r.saved = Tensor::zeros({deltanet_chunk_saved_size(c.B, c.T, c.H, c.Dk, c.Dv, c.C)}, dt, dev);
  forward(r);
  r.dq = put(g0.dq), r.dk = put(g0.dk), r.dv = put(g0.dv), r.dgate = put(g0.dbeta), r.ddecay = put(g0.da);
  r.dh0 = put(g0.dh0);
  r.dO = put(in.do_), r.dht = put(in.dht);
  backward(r);
  if (dev == Device::cuda) testing::device_sync();
  return {get(r.o), get(r.ht), get(r.dq), get(r.dk), get(r.dv), get(r.dgate), get(r.ddecay), get(r.dh0)};
}

Inputs<double> inputs_for(const Case& c, Rng& rng) {
  return deltanet_testing::make_inputs(rng, c.B, c.T, c.H, c.Dk, c.Dv, c.gated, c.states, c.a_lo);
}

// Starting gradients: random, so that a kernel that overwrote instead of accumulating fails.
Result start_grads(const Inputs<double>& in, Rng& rng) {
  auto rnd = [&](const Tensor& like) { return like.defined() ? testing::random_tensor(like.shape(), rng) : Tensor(); };
  return {Tensor(), Tensor(), rnd(in.q), rnd(in.k), rnd(in.v), rnd(in.beta), rnd(in.a), rnd(in.h0)};
}

Result cpu_reference(const Inputs<double>& in, const Case& c, const Result& g0) {
  return run(
      in, c, g0, DType::f64, Device::cpu, [](const MixerArgs& r) { backend::delta_rule_forward(Device::cpu, r); },
      [](const MixerArgs& r) { backend::delta_rule_backward(Device::cpu, r); });
}

void expect_match(const Result& got, const Result& want, double tol) {
  EXPECT_CLOSE(got.o, want.o, tol);
  EXPECT_CLOSE(got.ht, want.ht, tol);
  EXPECT_CLOSE(got.dq, want.dq, tol);
  EXPECT_CLOSE(got.dk, want.dk, tol);
  EXPECT_CLOSE(got.dv, want.dv, tol);
  EXPECT_CLOSE(got.dbeta, want.dbeta, tol);
  ASSERT_EQ(got.da.defined(), want.da.defined());
  if (want.da.defined()) EXPECT_CLOSE(got.da, want.da, tol);
  ASSERT_EQ(got.dh0.defined(), want.dh0.defined());
  if (want.dh0.defined()) EXPECT_CLOSE(got.dh0, want.dh0, tol);
}

// ---- the host mirror of the CUDA entries (kernels/cuda/entries.cpp) -------------------------------

// A CUDA block played by one host thread. In order: every each() and one() runs at once, its
// iterations in order. Reversed: the work issued between two syncs (a phase) is held until the sync
// and then run last-issued first, each loop's iterations last first; a phase whose parts or
// iterations depend on each other (a missing sync or a race on the device) then computes something else.
class HostBlock {
 public:
  explicit HostBlock(bool reversed) : reversed_(reversed) {}
  template <class F>
  void each(int64_t n, F f) const {
    issue([this, n, f] {
      if (reversed_)
        for (int64_t e = n - 1; e >= 0; --e) f(e);
      else
        for (int64_t e = 0; e < n; ++e) f(e);
    });
  }
  template <class F>
  void one(F f) const {
    issue(f);
  }
  void sync() const {
    for (auto it = phase_.rbegin(); it != phase_.rend(); ++it) (*it)();
    phase_.clear();
  }
  ~HostBlock() { EXPECT_TRUE(phase_.empty()) << "a head function returned with work after its last sync"; }

 private:
  void issue(std::function<void()> f) const {
    if (reversed_) phase_.push_back(std::move(f));
    else f();
  }
  bool reversed_;
  mutable std::vector<std::function<void()>> phase_;
};

// The three launches of cuda::deltanet_chunk_forward, in order, every grid's blocks in order (the
// blocks of one launch share nothing, so their order cannot matter): chunk_factors per chunk,
// chunk_states per head and tile of state columns (Dv = 20 cuts a partial tile), chunk_outputs per chunk.
template <class T>
void mirror_chunk_forward(const DeltaNetArgs<T>& p, const HostBlock& blk) {
  const cuda::delta::Dims d = cuda::delta::dims(p);
  const int64_t heads = d.B * d.H;
  std::vector<T> sh(size_t(cuda::delta::factors_shared(d)));
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t c = 0; c < d.chunks(); ++c) cuda::delta::chunk_factors(blk, p, bh, c, sh.data());
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t tile = 0; tile < cuda::delta::state_tiles(d); ++tile)
      cuda::delta::chunk_states(blk, p, bh, cuda::delta::state_columns(d, tile), sh.data());
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t c = 0; c < d.chunks(); ++c) cuda::delta::chunk_outputs(blk, p, bh, c, sh.data());
}

// The three launches of cuda::deltanet_chunk_backward, in order: chunk_backward_inputs per chunk,
// chunk_backward_states per head and tile of state columns, chunk_backward_grads per chunk.
template <class T>
void mirror_chunk_backward(const DeltaNetArgs<T>& p, T* work, const HostBlock& blk) {
  const cuda::delta::Dims d = cuda::delta::dims(p);
  const int64_t heads = d.B * d.H;
  std::vector<T> sh(size_t(cuda::delta::backward_grads_shared(d) + cuda::delta::backward_states_shared(d) +
                           cuda::delta::backward_inputs_shared(d)));
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t c = 0; c < d.chunks(); ++c) cuda::delta::chunk_backward_inputs(blk, p, work, bh, c, sh.data());
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t tile = 0; tile < cuda::delta::state_tiles(d); ++tile)
      cuda::delta::chunk_backward_states(blk, p, work, bh, cuda::delta::state_columns(d, tile), sh.data());
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t c = 0; c < d.chunks(); ++c) cuda::delta::chunk_backward_grads(blk, p, work, bh, c, sh.data());
}

// What the CUDA delta_rule_forward entry launches.
template <class T>
void mirror_forward(const MixerArgs& r, const HostBlock& blk) {
  const DeltaNetArgs<T> p = backend::deltanet_args<T>(r);
  const cuda::delta::Dims d = cuda::delta::dims(p);
  if (r.chunk) {
    mirror_chunk_forward(p, blk);
  } else {
    std::vector<T> sh(size_t(cuda::delta::recurrent_shared(d))), state(size_t(d.state()));
    for (int64_t bh = 0; bh < r.B * r.H; ++bh) cuda::delta::recurrent_forward_head(blk, p, state.data(), bh, sh.data());
  }
}

// What the CUDA delta_rule_backward entry launches (the recurrent form recomputes with chunk 64).
template <class T>
void mirror_backward(const MixerArgs& r, const HostBlock& blk) {
  DeltaNetArgs<T> p = backend::deltanet_args<T>(r);
  p.chunk_size = r.chunk ? r.chunk_size : 64;
  const cuda::delta::Dims d = cuda::delta::dims(p);
  Tensor saved = r.saved;
  if (!r.chunk) {
    saved = Tensor::zeros({deltanet_chunk_saved_size(r.B, r.T, r.H, r.Dk, r.Dv, d.C)}, r.q.dtype());
    Tensor o = Tensor::zeros(r.dO.shape(), r.q.dtype());
    DeltaNetArgs<T> f = p;
    f.o = o.data<T>(), f.ht = nullptr, f.saved = saved.data<T>();
    mirror_chunk_forward(f, blk);
  }
  p.saved = saved.data<T>();
  std::vector<T> work(size_t(r.B * r.H * cuda::delta::backward_work(d)));
  mirror_chunk_backward(p, work.data(), blk);
}

template <class T>
Result mirror_run(const Inputs<double>& in, const Case& c, const Result& g0, bool reversed) {
  const HostBlock blk(reversed);
  return run(
      in, c, g0, dtype_of<T>(), Device::cpu, [&](const MixerArgs& r) { mirror_forward<T>(r, blk); },
      [&](const MixerArgs& r) { mirror_backward<T>(r, blk); });
}

// float64: the mirror is the CPU kernels' math, reordered; only rounding differs (~1e-15 per
// operation; the gated backward's sums of exp ratios and the A^-1 substitution grow it to ~1e-13).
TEST(DeltaNetBlockMirror, Float64MatchesTheCpuKernels) {
  Rng rng(14);
  for (const Case& c : kCases)
    for (bool reversed : {false, true}) {
      SCOPED_TRACE(c.str() + (reversed ? " reversed" : " in order"));
      const Inputs<double> in = inputs_for(c, rng);
      const Result g0 = start_grads(in, rng);
      expect_match(mirror_run<double>(in, c, g0, reversed), cpu_reference(in, c, g0), 1e-10);
    }
}

// float32 (the device's precision): unit roundoff 6e-8, grown by dot products of up to 64 terms, the
// forward substitution over up to 64 rows and the state carried over up to 7 chunks: ~1e-6; 2e-5 leaves
// a margin, while a wrong term moves a gradient by far more than 1e-3.
TEST(DeltaNetBlockMirror, Float32MatchesTheCpuInFloat64) {
  Rng rng(15);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.str());
    const Inputs<double> in = inputs_for(c, rng);
    const Result g0 = start_grads(in, rng);
    expect_match(mirror_run<float>(in, c, g0, false), cpu_reference(in, c, g0), 2e-5);
  }
}

// ---- each backward launch alone against the CPU's stages ------------------------------------------

// What the CPU's backward stages (kernels/cpu/deltanet_stages.h) hand from one chunk to the next, per
// (batch, head) and chunk in the layout of cuda::delta's backward scratch: the inputs of the dS pass
// (du0 = scale P^T dO in X, hq = scale Q^T diag(gamma) dO in dS) and its results (X = A^-T dU' in X,
// dS1 in dS), and the final dS0 (dLoss/dh0 before the += into dh0).
struct StageWork {
  std::vector<double> inputs, pass, dS0;
};

StageWork cpu_stage_work(const DeltaNetArgs<double>& p) {
  using namespace cpu::deltanet;
  const cuda::delta::Dims d = cuda::delta::dims(p);
  const int64_t C = d.C, Dk = d.Dk, Dv = d.Dv, S = d.state(), NC = d.chunks();
  StageWork out{std::vector<double>(size_t(d.B * d.H * cuda::delta::backward_work(d))), {}, {}};
  out.pass = out.inputs;
  out.dS0.assign(size_t(d.B * d.H * S), 0.0);
  std::vector<double> P(C * C), D(C * C, 1.0), G(C), gamma(C), inv_gamma(C), lambda(C), gdg(C), dl(C), dG(C), db(C);
  std::vector<double> du(C * Dv), x(C * Dv), dr(C * Dv), y(C * Dv), ul(C * Dv), dog(C * Dv), zero_dr(C * Dv, 0.0);
  std::vector<double> dS(S), hq(S), sink_k(size_t(d.B * d.T * d.H * Dk)), sink_v(size_t(d.B * d.T * d.H * Dv));
  const ChunkDecays<double> g{p.a != nullptr, G.data(), gamma.data(), inv_gamma.data(), lambda.data(), D.data()};
  const ChunkGateGrads<double> gg{gdg.data(), dl.data(), dG.data(), db.data()};
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    for (int64_t e = 0; e < S; ++e) dS[e] = p.dht ? p.dht[bh * S + e] : 0.0;
    for (int64_t c = NC - 1; c >= 0; --c) {
      const cuda::delta::ChunkAt at = cuda::delta::chunk_at(d, bh, c);
      const ChunkShape s{at.n, C, Dk, Dv, d.H * Dk, d.H * Dv, d.H};
      const double* S0 = p.saved + (bh * NC + c) * d.block();
      const double *ainv = S0 + S, *pg = ainv + C * C, *u = pg + C * C, *r = u + C * Dv;
      const double *q = p.q + at.qk, *k = p.k + at.qk, *v = p.v + at.vo, *dO = p.dO + at.vo;
      if (g.gated) chunk_decays(g, p.a + at.s, s);
      for (int64_t i = 0; i < at.n; ++i)
        for (int64_t j = 0; j < at.n; ++j) P[i * C + j] = j <= i ? pg[i * C + j] : 0.0;
      const cuda::delta::WorkChunk w = cuda::delta::work_chunk(d, bh, c);
      intra_output_backward_du(du.data(), P.data(), dO, p.scale, s);
      std::fill(hq.begin(), hq.end(), 0.0);
      state_backward(hq.data(), gg, S0, q, k, dO, zero_dr.data(), p.scale, g, s, dog.data());
      std::copy(du.begin(), du.begin() + at.n * Dv, out.inputs.begin() + w.X);
      std::copy(hq.begin(), hq.end(), out.inputs.begin() + w.dS);
      std::copy(dS.begin(), dS.end(), out.pass.begin() + w.dS);
      state_pass_backward(du.data(), sink_k.data() + at.qk, gg, dS.data(), k, u, g, s, y.data(), ul.data());
      wy_backward(x.data(), dr.data(), sink_v.data() + at.vo, sink_k.data() + at.qk, gg, du.data(), ainv, r, v,
                  p.beta + at.s, S0, g, s);
      std::copy(x.begin(), x.begin() + at.n * Dv, out.pass.begin() + w.X);
      state_backward(dS.data(), gg, S0, q, k, dO, dr.data(), p.scale, g, s, dog.data());
    }
    std::copy(dS.begin(), dS.end(), out.dS0.begin() + bh * S);
  }
  return out;
}

// The largest error of got against want over the entries want marks as used (a partial last chunk
// leaves rows of its X block unused), relative to want's largest entry.
void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double err = 0, top = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    top = std::max(top, std::abs(want[i]));
  }
  EXPECT_LE(err, tol * std::max(top, 1.0)) << what << ": max abs error " << err << ", relative " << err / top
                                           << ", tolerance " << tol;
}

std::vector<double> values(const Tensor& t) {
  return t.defined() ? std::vector<double>(t.data<double>(), t.data<double>() + t.numel()) : std::vector<double>();
}

// Each of the backward's three launches alone, fed what the CPU's stages computed before it:
// chunk_backward_inputs gives intra_output_backward_du's du0 and state_backward's dO term;
// chunk_backward_states, given those, gives X (wy_backward) and dS1 of every chunk and dh0
// (state_pass_backward, wy_backward, state_backward in turn); chunk_backward_grads, given X and dS1,
// gives the CPU backward's dq, dk, dv, dbeta and da. float64, the phases in order and reversed.
TEST(DeltaNetBlockMirror, BackwardLaunchesEachMatchTheCpuStages) {
  Rng rng(19);
  const std::vector<Case> cases = {
      {2, 100, 2, 32, 32, 64, true, true, true},  {1, 100, 3, 16, 24, 16, false, false, true},
      {2, 77, 2, 32, 48, 32, true, false, true},  {1, 40, 2, 16, 20, 16, true, true, true},
      {1, 50, 2, 16, 16, 16, true, true, true, -5.0}, {1, 20, 1, 128, 16, 64, true, true, true},
  };
  for (const Case& c : cases)
    for (bool reversed : {false, true}) {
      SCOPED_TRACE(c.str() + (reversed ? " reversed" : " in order"));
      const HostBlock blk(reversed);
      const Inputs<double> in = inputs_for(c, rng);
      Rng grads_rng(20);
      const Result g0 = start_grads(in, grads_rng);
      MixerArgs r;
      r.B = c.B, r.T = c.T, r.H = c.H, r.Dk = c.Dk, r.Dv = c.Dv, r.scale = in.scale, r.chunk = true, r.chunk_size = c.C;
      r.q = in.q, r.k = in.k, r.v = in.v, r.gate = in.beta, r.decay = in.a, r.h0 = in.h0, r.dO = in.do_, r.dht = in.dht;
      r.o = Tensor::zeros({c.B, c.T, c.H, c.Dv}, DType::f64);
      r.saved = Tensor::zeros({deltanet_chunk_saved_size(c.B, c.T, c.H, c.Dk, c.Dv, c.C)}, DType::f64);
      backend::delta_rule_forward(Device::cpu, r);
      auto grads = [&](MixerArgs& a) {
        a.dq = g0.dq.clone(), a.dk = g0.dk.clone(), a.dv = g0.dv.clone(), a.dgate = g0.dbeta.clone();
        a.ddecay = g0.da.defined() ? g0.da.clone() : Tensor();
        a.dh0 = g0.dh0.defined() ? g0.dh0.clone() : Tensor();
      };
      MixerArgs want = r, got = r;
      grads(want), grads(got);
      backend::delta_rule_backward(Device::cpu, want);
      const DeltaNetArgs<double> p = backend::deltanet_args<double>(got);
      const cuda::delta::Dims d = cuda::delta::dims(p);
      const StageWork ref = cpu_stage_work(p);
      std::vector<double> sh(size_t(cuda::delta::backward_grads_shared(d) + cuda::delta::backward_states_shared(d) +
                                    cuda::delta::backward_inputs_shared(d)));
      std::vector<double> work(ref.inputs.size());
      for (int64_t bh = 0; bh < d.B * d.H; ++bh)
        for (int64_t ch = 0; ch < d.chunks(); ++ch)
          cuda::delta::chunk_backward_inputs(blk, p, work.data(), bh, ch, sh.data());
      expect_near(work, ref.inputs, 1e-12, "chunk_backward_inputs: du0 and hq");
      work = ref.inputs;
      for (int64_t bh = 0; bh < d.B * d.H; ++bh)
        for (int64_t tile = 0; tile < cuda::delta::state_tiles(d); ++tile)
          cuda::delta::chunk_backward_states(blk, p, work.data(), bh, cuda::delta::state_columns(d, tile), sh.data());
      expect_near(work, ref.pass, 1e-12, "chunk_backward_states: X and dS1");
      if (c.states) {
        std::vector<double> dh0 = values(g0.dh0);
        for (size_t e = 0; e < dh0.size(); ++e) dh0[e] += ref.dS0[e];
        expect_near(values(got.dh0), dh0, 1e-12, "chunk_backward_states: dh0");
      }
      work = ref.pass;
      for (int64_t bh = 0; bh < d.B * d.H; ++bh)
        for (int64_t ch = 0; ch < d.chunks(); ++ch)
          cuda::delta::chunk_backward_grads(blk, p, work.data(), bh, ch, sh.data());
      expect_near(values(got.dq), values(want.dq), 1e-12, "chunk_backward_grads: dq");
      expect_near(values(got.dk), values(want.dk), 1e-12, "chunk_backward_grads: dk");
      expect_near(values(got.dv), values(want.dv), 1e-12, "chunk_backward_grads: dv");
      expect_near(values(got.dgate), values(want.dgate), 1e-12, "chunk_backward_grads: dbeta");
      expect_near(values(got.ddecay), values(want.ddecay), 1e-12, "chunk_backward_grads: da");
    }
}

// The device's division-free index split (deltanet_block.h) against / and %: every row length up to
// 300 (past C, Dk, Dv and the tiles) and every index below 70000 (past C * 256 and 256 * 256), and
// quotients near its stated 2^22 bound.
TEST(DeltaNetBlockMirror, SplitByReciprocalIsExact) {
  int64_t wrong = 0;
  for (int64_t w = 1; w <= 300; ++w)
    for (int64_t e = 0; e < 70000; ++e) {
      const cuda::delta::RowCol rc = cuda::delta::split_by_reciprocal(e, w);
      wrong += rc.row != e / w || rc.col != e % w;
    }
  for (int64_t w : {1, 7, 64, 255})
    for (int64_t e = (int64_t(1) << 22) * w - 1000; e < (int64_t(1) << 22) * w + 1000; ++e) {
      const cuda::delta::RowCol rc = cuda::delta::split_by_reciprocal(e, w);
      wrong += rc.row != e / w || rc.col != e % w;
    }
  EXPECT_EQ(wrong, 0);
}

// ---- the CUDA entries ----------------------------------------------------------------------------

TEST(CudaDeltaNet, Float32MatchesTheCpuInFloat64) {
  SKIP_WITHOUT_GPU();
  Rng rng(16);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.str());
    const Inputs<double> in = inputs_for(c, rng);
    const Result g0 = start_grads(in, rng);
    const Result got = run(
        in, c, g0, DType::f32, Device::cuda, [](const MixerArgs& r) { backend::delta_rule_forward(Device::cuda, r); },
        [](const MixerArgs& r) { backend::delta_rule_backward(Device::cuda, r); });
    expect_match(got, cpu_reference(in, c, g0), 2e-5);
  }
}

// The training shape of the benchmarks (B=4 T=2048 H=4 D=64), gated, chunk 64: 32 chunks carried.
TEST(CudaDeltaNet, LongSequenceMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(17);
  const Case c{4, 2048, 4, 64, 64, 64, true, true, true};
  const Inputs<double> in = inputs_for(c, rng);
  const Result g0 = start_grads(in, rng);
  const Result got = run(
      in, c, g0, DType::f32, Device::cuda, [](const MixerArgs& r) { backend::delta_rule_forward(Device::cuda, r); },
      [](const MixerArgs& r) { backend::delta_rule_backward(Device::cuda, r); });
  expect_match(got, cpu_reference(in, c, g0), 1e-4);
}

// ---- the tensor-core paths: the per-chunk products in bf16 (tf32) -------------------------------
//
// The chunk forward and backward with backend::matmul_precision() bf16 or tf32 (the forward's K Kᵀ,
// Q Kᵀ, diag(gamma) Q S0 + P U'; the backward's P^T dO, Q^T diag(gamma) dO in chunk_backward_inputs
// and U' dS1^T, X S0^T, dO S0^T, dO U'^T, U' X^T, M K, M^T Q, (F + F^T) K in chunk_backward_grads;
// Dk = 128 takes the float32 backward), against the CPU in float64: output, final state and every
// gradient. Tolerances (relative to each output's largest reference entry), with the basis of
// chunk_precision_test's: rounding an operand costs a relative u = 2^-8 (bf16; tf32 2^-11), so a
// Gram or score entry is off by up to 2u of |k_i||k_j| (|q_i||k_j|) and reaches U', the state and
// the gradients through A⁻¹ and PG; the output rounds P, U', S0 and Q again, ~4u per term in all,
// and a gradient goes through two rounded products (dP = dO U'^T, then M K), ~4u as well. The bars
// are those of linear attention and GLA, 2e-2 ~ 5u (bf16) and 3e-3 ~ 6u (tf32); measured (printed
// per case, emulation) the worst of all outputs is 4.2e-3 ~ 1.1u in bf16 (da) and 5.7e-4 ~ 1.2u
// in tf32 (o), the worst gradient 4.2e-3 (bf16) and 4.5e-4 (tf32). A wrong row, mask or decay moves
// an output by O(1) relative, as the negative controls show (and leaving out one product of the
// backward, (F + F^T) K, moved dk by 0.06 to 0.6 in the cases of full chunks).
constexpr double kBf16Tol = 2e-2;
constexpr double kTf32Tol = 3e-3;

struct PrecisionScope {  // backend::matmul_precision() is process-wide: float32 again after the scope
  explicit PrecisionScope(MatmulPrecision p) { backend::set_matmul_precision(p); }
  ~PrecisionScope() { backend::set_matmul_precision(MatmulPrecision::f32); }
};

// T off the chunk, chunk sizes 16/32/64 (the tiles' rows past C are zeros), Dk = 24 and 48 (padded to a
// multiple of 16 with zeros), 128 (the backward then float32) and Dk != Dv, one token (a chunk of one
// row), with and without h0 and dht, gated (strong decays too) and not.
const std::vector<Case> kPrecisionCases = {
    {2, 100, 2, 64, 64, 64, true, true, true},   {1, 150, 2, 64, 64, 64, false, true, true},
    {1, 77, 2, 32, 48, 32, true, false, true},   {1, 70, 1, 128, 128, 64, true, true, true},
    {1, 45, 3, 48, 40, 16, false, true, true},   {1, 50, 2, 24, 16, 16, true, true, true, -5.0},
    {2, 1, 2, 16, 24, 64, true, true, true},
};

// The worst relative error over every output (gradients_only: over the gradients), and which output it is.
std::pair<double, const char*> worst_error(const Result& got, const Result& want, bool gradients_only = false) {
  const std::pair<const char*, Tensor Result::*> outputs[] = {
      {"o", &Result::o},   {"ht", &Result::ht}, {"dq", &Result::dq},       {"dk", &Result::dk},
      {"dv", &Result::dv}, {"dbeta", &Result::dbeta}, {"da", &Result::da}, {"dh0", &Result::dh0}};
  std::pair<double, const char*> worst{0.0, ""};
  for (const auto& [name, member] : outputs)
    if ((want.*member).defined() && !(gradients_only && (member == &Result::o || member == &Result::ht)))
      worst = std::max(worst, {testing::compare(got.*member, want.*member).relative, name});
  return worst;
}

// Which input the CUDA side of a negative control reads wrong: token 0's row (batch 0, head 0) of q
// (forward and backward) or of dO (the backward only) replaced by token 1's, as an off-by-one row
// index in a product's operand would.
enum class WrongRow { none, q, dO };

// The case in `precision` on CUDA against the CPU in float64, the CUDA side reading `wrong` wrong.
std::pair<Result, Result> run_precision_case(const Case& c, MatmulPrecision precision, Rng& rng,
                                             WrongRow wrong = WrongRow::none) {
  Inputs<double> in = inputs_for(c, rng);
  const Result g0 = start_grads(in, rng);
  const Result want = cpu_reference(in, c, g0);
  if (wrong != WrongRow::none) {
    Tensor& t = wrong == WrongRow::q ? in.q : in.do_;  // [B, T, H, D]
    const int64_t D = wrong == WrongRow::q ? c.Dk : c.Dv;
    t = t.clone();
    double* x = t.data<double>();
    for (int64_t i = 0; i < D; ++i) x[i] = x[c.H * D + i];
  }
  PrecisionScope scope(precision);
  const Result got = run(
      in, c, g0, DType::f32, Device::cuda, [](const MixerArgs& r) { backend::delta_rule_forward(Device::cuda, r); },
      [](const MixerArgs& r) { backend::delta_rule_backward(Device::cuda, r); });
  return {got, want};
}

class CudaDeltaNetPrecision : public ::testing::TestWithParam<MatmulPrecision> {};

TEST_P(CudaDeltaNetPrecision, MatchesTheCpuInFloat64) {
  SKIP_WITHOUT_GPU();
  const MatmulPrecision precision = GetParam();
  const double tol = precision == MatmulPrecision::bf16 ? kBf16Tol : kTf32Tol;
  Rng rng(19);
  for (const Case& c : kPrecisionCases) {
    SCOPED_TRACE(c.str());
    const auto [got, want] = run_precision_case(c, precision, rng);
    expect_match(got, want, tol);
    const auto [err, where] = worst_error(got, want);
    const auto [grad_err, grad_where] = worst_error(got, want, true);
    std::printf("  %s %s: worst relative error %.2g (%s), of the gradients %.2g (%s), tolerance %.2g\n",
                matmul_precision_name(precision), c.str().c_str(), err, where, grad_err, grad_where, tol);
  }
}

// The tolerance catches a wrong result: token 0's q row taken from token 1 on the CUDA side moves that
// token's output and the gradients that depend on it past it.
TEST_P(CudaDeltaNetPrecision, ToleranceCatchesAPerturbedInput) {
  SKIP_WITHOUT_GPU();
  const MatmulPrecision precision = GetParam();
  const double tol = precision == MatmulPrecision::bf16 ? kBf16Tol : kTf32Tol;
  for (const Case& c : {kPrecisionCases[0], kPrecisionCases[1]}) {
    SCOPED_TRACE(c.str());
    Rng rng(20);
    const auto [got, want] = run_precision_case(c, precision, rng, WrongRow::q);
    const auto [err, where] = worst_error(got, want);
    std::printf("  %s %s, token 0's q row wrong: worst relative error %.2g (%s), tolerance %.2g\n",
                matmul_precision_name(precision), c.str().c_str(), err, where, tol);
    EXPECT_GT(err, 3 * tol) << "a perturbed q passes the " << matmul_precision_name(precision)
                            << " tolerance: worst relative error " << err << " (" << where << ")";
  }
}

// The tolerance catches a wrong backward product: token 0's dO row taken from token 1 on the CUDA
// side, as a backward product reading the wrong row of dO would (P^T dO, Q^T diag(gamma) dO, dO S0^T,
// dO U'^T), leaves the forward within the tolerance and moves the gradients past it, DeltaNet and
// Gated DeltaNet alike.
TEST_P(CudaDeltaNetPrecision, ToleranceCatchesAWrongBackwardOperand) {
  SKIP_WITHOUT_GPU();
  const MatmulPrecision precision = GetParam();
  const double tol = precision == MatmulPrecision::bf16 ? kBf16Tol : kTf32Tol;
  for (const Case& c : {kPrecisionCases[0], kPrecisionCases[1]}) {
    SCOPED_TRACE(c.str());
    Rng rng(21);
    const auto [got, want] = run_precision_case(c, precision, rng, WrongRow::dO);
    EXPECT_CLOSE(got.o, want.o, tol);
    EXPECT_CLOSE(got.ht, want.ht, tol);
    const auto [err, where] = worst_error(got, want, true);
    std::printf("  %s %s, token 0's dO row wrong: worst relative error of the gradients %.2g (%s), tolerance %.2g\n",
                matmul_precision_name(precision), c.str().c_str(), err, where, tol);
    EXPECT_GT(err, 3 * tol) << "a perturbed dO passes the " << matmul_precision_name(precision)
                            << " tolerance: worst relative error " << err << " (" << where << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(, CudaDeltaNetPrecision, ::testing::Values(MatmulPrecision::bf16, MatmulPrecision::tf32),
                         [](const ::testing::TestParamInfo<MatmulPrecision>& info) {
                           return std::string(matmul_precision_name(info.param));
                         });

// float64 tensors are refused with a message naming the op and the fix.
TEST(CudaDeltaNet, RefusesFloat64) {
  SKIP_WITHOUT_GPU();
  Rng rng(18);
  const Case c{1, 8, 1, 16, 16, 16, false, false, true};
  const Inputs<double> in = inputs_for(c, rng);
  try {
    run(
        in, c, start_grads(in, rng), DType::f64, Device::cuda,
        [](const MixerArgs& r) { backend::delta_rule_forward(Device::cuda, r); },
        [](const MixerArgs& r) { backend::delta_rule_backward(Device::cuda, r); });
    FAIL() << "float64 on the CUDA DeltaNet entry was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("deltanet: the CUDA kernels take float32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn
