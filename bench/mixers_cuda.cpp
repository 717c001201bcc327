// linattn-bench mixers --device cuda: forward+backward of each linear mixer's autograd op (the
// backend table's CUDA entries, as training runs them) on the GPU, float32, at the shapes of issue
// 14: B=4 H=4 D=64 for T from 1K to 64K (fla's reference shape at T=2048), and B=8 T=2048 H=16 D=128.
// A mixer whose CUDA entries are missing (autograd/mixer_ops.h) is skipped with a message, so this
// runs before its kernels land.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "autograd/mixer_ops.h"
#include "bench/bench.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "train/device.h"

namespace linattn::bench {

namespace {

// One forward+backward of op on fresh device inputs (the op's random problem, autograd/mixer_ops.h:
// every size D, G = 1 group, chunk 64, no initial state, the gradient seeded on o). The gradients
// accumulate from run to run: harmless for timing.
std::function<void()> prepare(const ops::MixerOpDescriptor& op, int64_t B, int64_t T, int64_t H, int64_t D) {
  Rng rng(3);
  ops::OpCall call = ops::default_call(op);
  const ops::OpSizes sizes{{"B", B}, {"T", T}, {"H", H}, {"Hkv", H}, {"G", 1}, {"dk", D}, {"dv", D}};
  for (auto& [name, t] : ops::random_inputs(op, sizes, rng, /*with_optional=*/false))
    call.in[name] = Variable(t.to(DType::f32).to(Device::cuda), true);
  Tensor dO = Tensor::empty({B, T, H, D}, DType::f32);
  rng.fill_uniform(dO, -1, 1);
  auto up = std::make_shared<Tensor>(dO.to(Device::cuda));
  return [&op, call, up] { backward({op.run(call).at("o")}, {*up}); };
}

const MixerBench* cpu_bench(const std::string& name) {
  for (const MixerBench& b : mixer_benches())
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace

int run_mixers_cuda(const std::string& only, int64_t max_t, MatmulPrecision precision) {
  if (std::string why = no_gpu_reason(); !why.empty())
    throw Error("--device cuda: " + why + "; run it on a machine with an NVIDIA GPU, or leave out --device cuda "
                "for the CPU kernels");
  // The linear mixers of the table of ops (autograd/mixer_ops.h); attention has its own benchmark.
  std::vector<const ops::MixerOpDescriptor*> mixers;
  std::string names;
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops())
    if (op->recurrent) mixers.push_back(op), names += (names.empty() ? "" : ", ") + op->name;
  if (!only.empty() && std::none_of(mixers.begin(), mixers.end(), [&](auto* op) { return op->name == only; }))
    throw Error("--only " + only + ": no such linear mixer (" + names + ")");

  struct Shape4 {
    int64_t B, T, H, D;
  };
  std::vector<Shape4> shapes;
  const std::string note = emulation_note();
  if (kEmulatedCuda && max_t < 0) max_t = 256;
  for (int64_t T = kEmulatedCuda ? 128 : 1024; T <= 65536 && (max_t < 0 || T <= max_t); T *= 2)
    shapes.push_back({4, T, 4, 64});
  if (!kEmulatedCuda) shapes.push_back({8, 2048, 16, 128});
  std::printf("linear mixers on %s, float32 tensors, intra-chunk products of the linear mixers in %s "
              "(DeltaNet's backward for D <= 64), forward+backward (autograd op, chunk 64, gradient seeded on o), "
              "median of 20 after 3 warm-up runs (CUDA events)\n",
              describe_device(Device::cuda).c_str(), matmul_precision_name(precision));
  struct Restore {  // the setting is process-wide
    explicit Restore(MatmulPrecision p) { backend::set_matmul_precision(p); }
    ~Restore() { backend::set_matmul_precision(MatmulPrecision::f32); }
  } restore(precision);
  std::printf("%s", note.c_str());
  std::printf("H100 reference, fla at B=4 T=2048 H=4 D=64 (shared/design/gpu.md): targets linear_attn float32 <= "
              "1.72 ms, gla float32 <= 3.25 ms, deltanet bf16 <= 2.46 ms\n");
  std::printf("TFLOP/s from the chunkwise product count of the CPU benchmark (chunk 64)\n");
  std::printf("%-16s %3s %6s %3s %4s %10s %12s %9s %10s\n", "mixer", "B", "T", "H", "D", "ms", "tokens/s", "TFLOP/s",
              "ns/token");
  for (const ops::MixerOpDescriptor* op : mixers) {
    const char* name = op->name.c_str();
    if (!only.empty() && only != name) continue;
    if (std::string missing = op->missing_kernels(Device::cuda); !missing.empty()) {
      std::printf("%-16s skipped: no CUDA kernel yet (backend entries %s)\n", name, missing.c_str());
      continue;
    }
    const MixerBench* cpu = cpu_bench(name);
    double ns_1k = 0, ns_last = 0;
    int64_t t_last = 0;
    for (const Shape4& s : shapes) {
      try {
        const double ms = cuda_median_ms(prepare(*op, s.B, s.T, s.H, s.D));
        const double tokens = double(s.B * s.T), ns = ms * 1e6 / tokens;
        const double tflops = cpu ? cpu->flops(s.T, s.D, s.D) * double(s.B * s.H) / (ms * 1e9) : 0;
        std::printf("%-16s %3ld %6ld %3ld %4ld %10.3f %12.0f %9.2f %10.2f\n", name, long(s.B), long(s.T), long(s.H),
                    long(s.D), ms, tokens / (ms * 1e-3), tflops, ns);
        if (s.B == 4 && s.H == 4 && s.D == 64) {
          if (s.T == 1024) ns_1k = ns;
          ns_last = ns, t_last = s.T;
        }
      } catch (const Error& e) {  // one shape a kernel refuses (or a GPU too small) does not end the run
        std::printf("%-16s %3ld %6ld %3ld %4ld failed: %s\n", name, long(s.B), long(s.T), long(s.H), long(s.D),
                    e.what());
      }
      std::fflush(stdout);
    }
    if (ns_1k > 0 && t_last > 1024)  // linear cost: time per token flat as T grows (target <= 1.3)
      std::printf("%-16s ns/token at T=%ld / T=1024: %.2f\n", name, long(t_last), ns_last / ns_1k);
  }
  return 0;
}

}  // namespace linattn::bench
