// The CUDA linear attention and GLA scans (kernels/cuda/linear_scan.h) run on the CPU: every block of
// every launch in turn, every phase of a block thread by thread with the CUDA block's thread count,
// through the same code the kernels run and the same MixerArgs → pointer mapping the CUDA entries
// use (kernels/cuda/mixer_args.h). Checked against the CPU entries in float64, so that everything
// but the CUDA launch itself (grids, shared-memory sizes, the barriers) is verified where no GPU
// exists. Not a Cuda* suite: it runs everywhere.
#include <deque>
#include <vector>

#include "kernels/cpu/entries.h"
#include "kernels/cuda/mixer_args.h"
#include "mixer_testing.h"

namespace linattn {
namespace {

using namespace testing;
namespace scan = cuda::scan;

// A thread block on the host: each phase runs thread 0, 1, ... to the end, which is what the
// barrier after each phase on the device guarantees.
struct HostBlock {
  int threads = scan::kBlockThreads;
  template <class F>
  void phase(F f) {
    for (int tid = 0; tid < threads; ++tid) f(tid);
  }
};

template <class T>
struct HostRun {
  std::deque<std::vector<T>> buffers;
  T* scratch(int64_t n) { return buffers.emplace_back(size_t(n), T(0)).data(); }
  void zero(T* p, int64_t n) { std::fill(p, p + n, T(0)); }
  template <class F>
  void each(int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  void scan_c(const scan::Scan<T>& s) {
    std::vector<T> sm(size_t(scan::scan_c_smem(s.chunk, s.K, s.g.p != nullptr)));
    for (int64_t bh = 0; bh < s.B * s.H; ++bh)
      for (int64_t tile = 0; tile * scan::kTile < s.N; ++tile) {
        std::fill(sm.begin(), sm.end(), T(NAN));  // shared memory starts as garbage
        HostBlock ex;
        scan::scan_c_block(ex, s, bh, tile, sm.data());
      }
  }
  void scan_o(const scan::Scan<T>& s) {
    std::vector<T> sm(size_t(scan::scan_o_smem(s.chunk, s.N, s.g.p != nullptr)));
    for (int64_t bh = 0; bh < s.B * s.H; ++bh)
      for (int64_t tile = 0; tile * scan::kTile < s.K; ++tile) {
        std::fill(sm.begin(), sm.end(), T(NAN));
        HostBlock ex;
        scan::scan_o_block(ex, s, bh, tile, sm.data());
      }
  }
};

// The host runs of the four CUDA mixer functions, as backend entries.
template <class F>
void host_run(const backend::MixerArgs& r, F&& f) {
  dispatch_float(r.q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    HostRun<T> run;
    f(run, scan::to_mixer<T>(r));
  });
}
void la_forward(const backend::MixerArgs& r) {
  host_run(r, [](auto& run, const auto& m) { scan::linear_attention_forward(run, m); });
}
void la_backward(const backend::MixerArgs& r) {
  host_run(r, [](auto& run, const auto& m) { scan::linear_attention_backward(run, m); });
}
void gla_forward(const backend::MixerArgs& r) {
  host_run(r, [](auto& run, const auto& m) { scan::gla_forward(run, m); });
}
void gla_backward(const backend::MixerArgs& r) {
  host_run(r, [](auto& run, const auto& m) { scan::gla_backward(run, m); });
}

// float64 on both sides: the algorithm alone, to rounding (sums of at most a few thousand terms).
constexpr double kTol64 = 1e-10;
// float32 scans against the float64 CPU: float32 rounding of sums over a chunk and the state.
constexpr double kTol32 = 2e-5;

// Shapes: one token, T off the chunk size, a multiple of it, chunk sizes 16/32/64, the recurrent
// form, head sizes off the 32-column tile (40, 33) and above it (72), with and without h0.
const MixerCase kLinearCases[] = {
    {2, 1, 2, 8, 8, 16},
    {1, 37, 2, 16, 24, 16},
    {2, 64, 1, 8, 40, 32, false},
    {1, 100, 1, 72, 33, 64},
    {2, 19, 2, 8, 8, 1, true, FeatureMap::identity, false, true},
    {1, 45, 2, 16, 8, 16, true, FeatureMap::elu1},
    {1, 45, 2, 16, 8, 32, true, FeatureMap::relu},
    {2, 50, 1, 16, 12, 16, true, FeatureMap::elu1, true},
    {1, 30, 2, 8, 40, 64, false, FeatureMap::elu1, true},
    {1, 23, 1, 8, 8, 1, true, FeatureMap::elu1, true, true},
    {1, 1, 1, 8, 8, 64, true, FeatureMap::relu, true},
    {1, 70, 1, 128, 128, 64, true, FeatureMap::elu1, true},  // the largest heads of the device tests
};

const MixerCase kGlaCases[] = {
    {2, 1, 2, 8, 8, 16},
    {1, 37, 2, 16, 24, 16},
    {2, 64, 1, 40, 8, 32, false},
    {1, 100, 1, 33, 72, 64},
    {2, 19, 2, 8, 8, 1, true, FeatureMap::identity, false, true},
    {1, 70, 2, 16, 16, 32, true, FeatureMap::identity, false, false, -40},  // strong decays
    {1, 50, 1, 8, 8, 16, true, FeatureMap::identity, false, false, -1e-3},  // almost none
    {1, 70, 1, 128, 128, 64},  // the largest heads of the device tests
};

TEST(LinearScanHost, LinearAttentionMatchesTheCpuEntry) {
  Rng rng(7);
  for (const MixerCase& c : kLinearCases) {
    SCOPED_TRACE(c.str());
    MixerData d = random_mixer_data(c, MixerKind::linear_attention, rng);
    MixerResult want = run_mixer(cpu::entry::linear_attention_forward, cpu::entry::linear_attention_backward,
                                 MixerKind::linear_attention, c, d, DType::f64, Device::cpu);
    EXPECT_MIXER_CLOSE(run_mixer(la_forward, la_backward, MixerKind::linear_attention, c, d, DType::f64, Device::cpu),
                       want, kTol64);
    EXPECT_MIXER_CLOSE(run_mixer(la_forward, la_backward, MixerKind::linear_attention, c, d, DType::f32, Device::cpu),
                       want, kTol32);
  }
}

TEST(LinearScanHost, GlaMatchesTheCpuEntry) {
  Rng rng(8);
  for (const MixerCase& c : kGlaCases) {
    SCOPED_TRACE(c.str());
    MixerData d = random_mixer_data(c, MixerKind::gla, rng);
    MixerResult want = run_mixer(cpu::entry::gla_forward, cpu::entry::gla_backward, MixerKind::gla, c, d, DType::f64,
                                 Device::cpu);
    EXPECT_MIXER_CLOSE(run_mixer(gla_forward, gla_backward, MixerKind::gla, c, d, DType::f64, Device::cpu), want,
                       kTol64);
    EXPECT_MIXER_CLOSE(run_mixer(gla_forward, gla_backward, MixerKind::gla, c, d, DType::f32, Device::cpu), want,
                       kTol32);
  }
}

}  // namespace
}  // namespace linattn
