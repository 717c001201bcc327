// linattn-bench attention: forward+backward time and memory of causal softmax attention, global and
// sliding window, as T grows; also registers "attention" and "attention_w256" for linattn-bench mixers.
// With --device cuda: the CUDA kernels at the shapes of shared/design/gpu.md, float32 and bf16.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/bench.h"
#include "core/memory.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/cuda/attention.h"

#ifdef LINATTN_CUDA
#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#endif

namespace linattn::bench {

namespace {

constexpr int64_t kGlobal = 0;  // the window of global attention (kernels/backend.def)

// Query-key pairs a causal window W (<= 0: global) scores in a sequence of T tokens.
double attention_pairs(int64_t T, int64_t window) {
  const int64_t W = window <= 0 ? T : std::min(window, T);
  return double(W) * double(W + 1) / 2 + double(T - W) * double(W);
}

// FLOPs of the block products per (batch, head): forward S = Q K^T and P V, backward S again,
// dV, dP, dQ, dK; 2 per multiply-add, only the pairs inside the causal window counted.
double attention_flops(int64_t T, int64_t dk, int64_t dv, int64_t window) {
  return 2 * attention_pairs(T, window) * double(4 * dk + 3 * dv);
}

// The tensors of one forward+backward in float32 (q, k, v with H = Hkv heads) and a function running it.
struct Problem {
  Tensor q, k, v, o, lse, dout, dq, dk, dv;
  int64_t B, T, H, dk_, dv_, window;
  Problem(int64_t B_, int64_t T_, int64_t H_, int64_t dk__, int64_t dv__, int64_t window_)
      : B(B_), T(T_), H(H_), dk_(dk__), dv_(dv__), window(window_) {
    Rng rng(0);
    auto make = [&](int64_t d) {
      Tensor t = Tensor::empty({B, T, H, d}, DType::f32);
      rng.fill_uniform(t, -1, 1);
      return t;
    };
    q = make(dk_), k = make(dk_), v = make(dv_), dout = make(dv_);
    o = Tensor::empty({B, T, H, dv_}, DType::f32);
    lse = Tensor::empty({B, H, T}, DType::f32);
    dq = Tensor::zeros(q.shape(), DType::f32), dk = Tensor::zeros(k.shape(), DType::f32);
    dv = Tensor::zeros(v.shape(), DType::f32);
  }
  void run() {
    const float scale = 1.0f / std::sqrt(float(dk_));
    backend::attention_forward(Device::cpu, o, lse, q, k, v, window, scale, Sequences{});
    dq.zero_(), dk.zero_(), dv.zero_();
    backend::attention_backward(Device::cpu, dq, dk, dv, q, k, v, o, lse, dout, window, scale, Sequences{}, false);
  }
  // What the op allocates: forward outputs o and lse, backward outputs dq, dk, dv, and the
  // per-thread block workspace (the table's attention_scratch_bytes). The inputs q, k, v and dout belong to the caller.
  size_t op_bytes() const {
    return o.nbytes() + lse.nbytes() + dq.nbytes() + dk.nbytes() + dv.nbytes() +
           size_t(backend::attention_scratch_bytes(Device::cpu, DType::f32));
  }
};

MixerBench mixer(std::string name, int64_t window) {
  return {std::move(name),
          [window](int64_t B, int64_t T, int64_t H, int64_t dk, int64_t dv) -> std::function<void()> {
            auto p = std::make_shared<Problem>(B, T, H, dk, dv, window);
            return [p] { p->run(); };
          },
          [window](int64_t T, int64_t dk, int64_t dv) { return attention_flops(T, dk, dv, window); }};
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

#ifdef LINATTN_CUDA
// A device buffer of n elements of E with uniform(-1, 1) entries (float, or bf16 bits in uint16_t).
template <class E>
struct DeviceBuffer {
  E* ptr = nullptr;
  size_t n;
  DeviceBuffer(size_t n_, Rng& rng) : n(n_) {
    Tensor t = Tensor::empty({int64_t(n)}, DType::f32);
    rng.fill_uniform(t, -1, 1);
    std::vector<E> host(n);
    for (size_t i = 0; i < n; ++i) {
      const float x = t.data<float>()[i];
      if constexpr (std::is_same_v<E, float>) {
        host[i] = x;
      } else {  // bf16: round to nearest even
        uint32_t u;
        std::memcpy(&u, &x, 4);
        host[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      }
    }
    LINATTN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(E)));
    // On the compute stream, the kernels' own: cudaMemcpy runs on the legacy default stream, which the
    // non-blocking compute stream does not wait for.
    cuda::copy(ptr, host.data(), n * sizeof(E));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void zero(cudaStream_t stream) const { LINATTN_CUDA_CHECK(cudaMemsetAsync(ptr, 0, n * sizeof(E), stream)); }
};

// Median milliseconds of forward+backward (CUDA events on the compute stream) over 20 runs after 3
// warm-up runs, for q, k, v: [B, T, H, d] (H = Hkv) in E (float or bf16 bits).
template <class E>
double cuda_forward_backward_ms(int64_t B, int64_t T, int64_t H, int64_t d, int64_t window) {
  cudaStream_t stream = static_cast<cudaStream_t>(cuda::compute_stream());
  Rng rng(0);
  const size_t n = size_t(B * T * H * d);
  DeviceBuffer<E> q(n, rng), k(n, rng), v(n, rng), o(n, rng), dout(n, rng), dq(n, rng), dk(n, rng), dv(n, rng);
  DeviceBuffer<float> lse(size_t(B * H * T), rng);
  const float scale = 1.0f / std::sqrt(float(d));
  auto run = [&] {
    if constexpr (std::is_same_v<E, float>) {
      cuda::attention_forward(o.ptr, lse.ptr, q.ptr, k.ptr, v.ptr, B, T, H, H, d, d, window, scale);
      cuda::attention_backward(dq.ptr, dk.ptr, dv.ptr, q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, dout.ptr, B, T, H, H, d,
                               d, window, scale);
    } else {
      cuda::attention_forward_bf16(o.ptr, lse.ptr, q.ptr, k.ptr, v.ptr, B, T, H, H, d, d, window, scale);
      cuda::attention_backward_bf16(dq.ptr, dk.ptr, dv.ptr, q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr, dout.ptr, B, T, H,
                                    H, d, d, window, scale);
    }
  };
  // The caller zeroes the gradients: not timed.
  return cuda_median_ms(run, 20, 3, [&] {
    for (const DeviceBuffer<E>* g : {&dq, &dk, &dv}) g->zero(stream);
  });
}
#endif

// linattn-bench attention --device cuda: the gpu.md shapes against the figures measured on the H100.
int run_attention_cuda(int64_t window) {
  if (std::string why = no_gpu_reason(); !why.empty()) {
    std::printf("linattn-bench attention --device cuda: %s; skipping\n", why.c_str());
    return 0;
  }
#ifdef LINATTN_CUDA
  const std::string note = emulation_note();
  const int64_t B = 4, T = kEmulatedCuda ? 256 : 2048, H = 4, d = 64;
  cudaDeviceProp prop{};
  LINATTN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("causal softmax attention on %s, forward+backward, B=%ld T=%ld H=%ld dk=dv=%ld, median of 20 "
              "(CUDA events)\n%s",
              prop.name, long(B), long(T), long(H), long(d), note.c_str());
  std::printf("H100 reference (shared/design/gpu.md): bf16 global 0.45 ms (PyTorch SDPA, flash), bf16 window 256 "
              "1.25 ms (fla); targets 0.6 ms and 1.25 ms\n");
  std::printf("%-8s %-8s %10s %10s\n", "window", "dtype", "ms", "TFLOP/s");
  for (int64_t w : {kGlobal, window})
    for (bool bf16 : {false, true}) {
      const double ms = bf16 ? cuda_forward_backward_ms<uint16_t>(B, T, H, d, w)
                             : cuda_forward_backward_ms<float>(B, T, H, d, w);
      const double flops = attention_flops(T, d, d, w) * double(B * H);
      std::printf("%-8s %-8s %10.3f %10.2f\n", w <= 0 ? "global" : std::to_string(w).c_str(),
                  bf16 ? "bf16" : "float32", ms, flops / (ms * 1e9));
      std::fflush(stdout);
    }
#endif
  return 0;
}

struct AttentionOptions {
  int64_t max_t = 16384, global_max_t = -1, window = 256;
  std::string device = "cpu";
};

int run_attention(const AttentionOptions& o) {
  int64_t B = 4, H = 4, d = 64, max_t = o.max_t, global_max_t = o.global_max_t, window = o.window;
  const std::string& device = o.device;
  if (device == "cuda") return run_attention_cuda(window);
  std::printf("causal softmax attention, float32, forward+backward, B=%ld H=%ld dk=dv=%ld, %d threads\n", long(B),
              long(H), long(d), omp_get_max_threads());
  std::printf("GEMM peak here (1024^3): %.1f GFLOP/s; PyTorch CPU reference at T=2048: global 1007 ms, window 256 "
              "1009 ms\n",
              gemm_peak_gflops());
  std::printf("op MiB = o + lse + dq + dk + dv + per-thread workspace (%zu KiB per thread); a T x T score matrix "
              "would be B*H*T*T*4 bytes\n",
              size_t(backend::attention_scratch_bytes(Device::cpu, DType::f32)) / size_t(omp_get_max_threads()) / 1024);
  std::printf("ms: best of 3-30 runs (~3 s per row); median: their median, from which ns/token\n");
  std::printf("%-8s %6s %10s %10s %10s %10s %10s %12s %12s\n", "window", "T", "ms", "median", "ns/token", "GFLOP/s",
              "op MiB", "TxT MiB", "peak RSS MiB");
  if (global_max_t < 0) global_max_t = max_t;
  for (int64_t w : {kGlobal, window}) {
    std::vector<std::pair<int64_t, size_t>> bytes;  // (T, op bytes)
    std::vector<std::pair<int64_t, double>> ns_per_token;
    for (int64_t T = 512; T <= (w <= 0 ? global_max_t : max_t); T *= 2) {
      Problem p(B, T, H, d, d, w);
      const double flops = attention_flops(T, d, d, w) * double(B * H);
      // As many runs as fit in ~3 s (at least 3; long global runs: 1 after the warm-up).
      const Timing t = time_runs([&] { p.run(); }, 3000, flops > 1e11 ? 1 : 3);
      const double ns = t.median_ms * 1e6 / double(B * T);
      bytes.emplace_back(T, p.op_bytes());
      ns_per_token.emplace_back(T, ns);
      std::printf("%-8s %6ld %10.1f %10.1f %10.1f %10.1f %10.2f %12.0f %12.0f\n",
                  w <= 0 ? "global" : std::to_string(w).c_str(), long(T), t.best_ms, t.median_ms, ns,
                  flops / (t.best_ms * 1e6), double(p.op_bytes()) / (1 << 20),
                  double(B * H) * double(T) * double(T) * 4 / (1 << 20), peak_rss_mib());
      std::fflush(stdout);
    }
    if (bytes.size() >= 3) {  // memory linear in T: 4x the tokens, 4x the bytes
      auto [t1, b1] = bytes[bytes.size() - 3];
      auto [t2, b2] = bytes.back();
      std::printf("op bytes at T=%ld / T=%ld: %.2f (T ratio %.0f)\n", long(t2), long(t1), double(b2) / double(b1),
                  double(t2) / double(t1));
    }
    auto at = [&](int64_t T) {
      for (auto [t, ns] : ns_per_token)
        if (t == T) return ns;
      return 0.0;
    };
    if (w > 0 && at(1024) > 0 && at(max_t) > 0)  // linear cost: time per token flat as T grows
      std::printf("ns/token at T=%ld / T=1024: %.2f\n", long(max_t), at(max_t) / at(1024));
  }
  return 0;
}

std::function<int()> attention_command(CLI::App& c) {
  auto o = std::make_shared<AttentionOptions>();
  c.add_option("--device", o->device, "cpu, or cuda: the CUDA kernels at T=2048, float32 and bf16 (skips without a GPU)")
      ->type_name("cpu|cuda")
      ->check(cli::one_of({"cpu", "cuda"}));
  c.add_option("--max-t", o->max_t, "T = 512, 1024, ... up to T (default 16384)")
      ->type_name("T")
      ->check(cli::whole_number(1, int64_t(1) << 24));
  c.add_option("--global-max-t", o->global_max_t,
               "caps the global runs only (global at T=16384 takes about a minute on 2 cores)")
      ->type_name("T")
      ->check(cli::whole_number(0, int64_t(1) << 24));
  c.add_option("--window", o->window, "the window of the windowed runs (default 256)")
      ->type_name("W")
      ->check(cli::whole_number(1, int64_t(1) << 24));
  c.footer("Forward+backward of causal softmax attention, global and window W, B=4 H=4 d=64.");
  return [o] { return run_attention(*o); };
}

bool registered = add_command({"attention", "softmax attention (global, window) time and memory as T grows",
                               attention_command}) &&
                  add_mixer_bench(mixer("attention", kGlobal)) && add_mixer_bench(mixer("attention_w256", 256));

}  // namespace

}  // namespace linattn::bench
