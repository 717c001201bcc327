// CUDA DeltaNet and Gated DeltaNet (kernels/cuda/deltanet.{h,cu}, the delta_rule entries) against
// the CPU entries in float64: forward output, final state and every gradient (q, k, v, beta, the
// log-decay a, h0), chunk and recurrent forms, odd shapes (one token, T off the chunk, chunk sizes
// 16/32/64, with and without h0, gated and not).
//
// Two kinds of test:
// - CudaDeltaNet.*: the CUDA entries through the backend table; they run only where a GPU exists.
// - DeltaNetBlockMirror.*: the per-head work of kernels/cuda/deltanet_block.h (the very code the
//   CUDA kernels run) on the host with a sequential "block", in float64 (the algorithm, to 1e-10)
//   and float32 (the device's precision), its phases' iterations both in order and reversed (a
//   phase whose iterations depended on each other, a race on the device, would change the result).
//   They run everywhere.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernel_testing.h"
#include "kernels/backend.h"
#include "kernels/cpu/deltanet.h"
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
// columns in the forward's state pass), Dk = 128 at chunk 64 (the forward's chunk_factors_kernel
// then needs more than the default 48 KiB of shared memory), with and without states,
// gated and not, strong decays (whole chunks decaying to exp(-300)), the recurrent form, and no
// tokens at all (the final state is h0, dh0 is dht).
const std::vector<Case> kCases = {
    {2, 1, 2, 16, 16, 64, true, true, true},     {2, 100, 2, 32, 32, 64, true, true, true},
    {1, 100, 3, 16, 24, 16, false, false, true}, {2, 77, 2, 32, 48, 32, true, false, true},
    {1, 64, 2, 64, 64, 64, false, true, true},   {1, 50, 2, 16, 16, 16, true, true, true, -5.0},
    {2, 33, 2, 16, 24, 64, false, true, false},  {1, 70, 2, 24, 16, 64, true, true, false},
    {1, 1, 1, 16, 16, 64, true, false, false},   {1, 0, 2, 16, 16, 64, true, true, true},
    {1, 0, 2, 16, 16, 64, false, true, false},   {1, 40, 2, 16, 20, 16, true, true, true},
    {1, 20, 1, 128, 16, 64, true, true, true},
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
  std::vector<T> work(size_t(r.B * r.H * cuda::delta::backward_work(d))), sh(size_t(cuda::delta::backward_shared(d)));
  for (int64_t bh = 0; bh < r.B * r.H; ++bh) cuda::delta::chunk_backward_head(blk, p, work.data(), bh, sh.data());
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
