// CUDA causal softmax attention against the CPU kernel in float64, forward (o, lse) and backward
// (dq, dk, dv), float32 and bf16, on random inputs over odd shapes: T not a multiple of any tile,
// one token, window 1, window >= T, GQA ratios 1, 2, 4, head sizes 24..128 with dk != dv.
// Runs only where a GPU exists; elsewhere every test skips with the reason.
#include "kernels/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention.h"
#include "testing.h"

#ifdef LINATTN_CUDA
#include <cuda_runtime.h>

#include "core/cuda/runtime.h"
#endif

namespace linattn {
namespace {

#ifdef LINATTN_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

#define SKIP_WITHOUT_GPU()                                                                              \
  do {                                                                                                  \
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device here (built with CUDA: " << kBuiltWithCuda << ")"; \
  } while (0)

#ifdef LINATTN_CUDA

using testing::compare;
using testing::random_tensor;

struct Case {
  int64_t B, T, H, Hkv, dk, dv, window;
  double scale() const { return 1.0 / std::sqrt(double(dk)); }
  // Each query sees only itself: dq = dk = 0 exactly in the math, rounding noise on the device.
  bool one_key() const { return T == 1 || window == 1; }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
           " Hkv=" + std::to_string(Hkv) + " dk=" + std::to_string(dk) + " dv=" + std::to_string(dv) +
           " window=" + std::to_string(window);
  }
};

// T off every tile (64 keys, 64 and 32 queries), one token, window 1, window > T, GQA ratios 1, 2, 4,
// head sizes 32, 64, 128 and unequal or odd ones (the kernels take any size up to 128).
const std::vector<Case> kCases = {
    {2, 200, 4, 4, 64, 64, cpu::kGlobalWindow}, {2, 200, 4, 2, 64, 64, 48}, {1, 200, 4, 1, 32, 32, cpu::kGlobalWindow},
    {2, 100, 2, 1, 128, 128, 5},                {2, 1, 4, 2, 64, 64, cpu::kGlobalWindow}, {2, 13, 4, 4, 64, 64, 1},
    {2, 77, 4, 1, 128, 128, 300},               {1, 150, 4, 2, 40, 24, 33},  {1, 130, 2, 2, 24, 96, cpu::kGlobalWindow},
    {1, 64, 4, 4, 64, 64, 64},                  {1, 65, 1, 1, 32, 32, 64},   {1, 97, 4, 2, 64, 64, 1},
};

struct Inputs {
  Tensor q, k, v, dout;  // float64 on the CPU
};

Inputs random_inputs(const Case& c, Rng& rng) {
  return {random_tensor({c.B, c.T, c.H, c.dk}, rng), random_tensor({c.B, c.T, c.Hkv, c.dk}, rng),
          random_tensor({c.B, c.T, c.Hkv, c.dv}, rng), random_tensor({c.B, c.T, c.H, c.dv}, rng)};
}

struct Result {
  Tensor o, lse, dq, dk, dv;  // float64 on the CPU
};

// The CPU kernels in float64: the reference.
Result cpu_reference(const Inputs& in, const Case& c) {
  Result r{Tensor::empty({c.B, c.T, c.H, c.dv}, DType::f64), Tensor::empty({c.B, c.H, c.T}, DType::f64),
           Tensor::zeros(in.q.shape(), DType::f64), Tensor::zeros(in.k.shape(), DType::f64),
           Tensor::zeros(in.v.shape(), DType::f64)};
  cpu::attention_forward<double>(r.o.data<double>(), r.lse.data<double>(), in.q.data<double>(), in.k.data<double>(),
                                 in.v.data<double>(), c.B, c.T, c.H, c.Hkv, c.dk, c.dv, c.window, c.scale(), Sequences{});
  cpu::attention_backward<double>(r.dq.data<double>(), r.dk.data<double>(), r.dv.data<double>(), in.q.data<double>(),
                                  in.k.data<double>(), in.v.data<double>(), r.o.data<double>(), r.lse.data<double>(),
                                  in.dout.data<double>(), c.B, c.T, c.H, c.Hkv, c.dk, c.dv, c.window, c.scale(), Sequences{});
  return r;
}

// A device array of n elements of E (float, or uint16_t holding bf16 bits), copied from and to the host.
template <class E>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<E>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n_, 1) * sizeof(E)), cudaSuccess);
    // On the compute stream, the kernels' own: cudaMemcpy runs on the legacy default stream, which the
    // non-blocking compute stream does not wait for.
    cuda::copy(ptr_, host.data(), n_ * sizeof(E));
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  E* get() const { return ptr_; }
  std::vector<E> host() const {
    std::vector<E> h(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr_, n_ * sizeof(E), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  E* ptr_ = nullptr;
  size_t n_;
};

// bf16 <-> float on the host: the top 16 bits of a float32, rounded to nearest even (no NaNs here).
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

template <class E>
std::vector<E> to_host_elems(const Tensor& t) {  // float64 tensor -> float or bf16 elements
  std::vector<E> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = float(t.data<double>()[i]);
    if constexpr (std::is_same_v<E, float>) out[i] = x;
    else out[i] = to_bf16(x);
  }
  return out;
}

template <class E>
Tensor to_tensor(const std::vector<E>& h, const Shape& shape) {  // float or bf16 elements -> float64 tensor
  Tensor t = Tensor::empty(shape, DType::f64);
  for (size_t i = 0; i < h.size(); ++i) {
    if constexpr (std::is_same_v<E, float>) t.data<double>()[i] = h[i];
    else t.data<double>()[i] = from_bf16(h[i]);
  }
  return t;
}

// Rounds every input to bf16 in place, so that the float64 reference sees what the bf16 kernel sees.
void round_to_bf16(Inputs& in) {
  for (Tensor* t : {&in.q, &in.k, &in.v, &in.dout})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<double>()[i] = from_bf16(to_bf16(float(t->data<double>()[i])));
}

// The CUDA kernels: forward, then backward into gradients that start at g0 (zero when g0 is empty).
template <class E>
Result cuda_run(const Inputs& in, const Case& c, const Result* g0 = nullptr) {
  DeviceArray<E> q(to_host_elems<E>(in.q)), k(to_host_elems<E>(in.k)), v(to_host_elems<E>(in.v)),
      dout(to_host_elems<E>(in.dout));
  DeviceArray<E> o(std::vector<E>(size_t(c.B * c.T * c.H * c.dv)));
  DeviceArray<float> lse(std::vector<float>(size_t(c.B * c.H * c.T)));
  auto start = [&](const Tensor& shape_of, const Tensor* init) {
    return init ? to_host_elems<E>(*init) : std::vector<E>(size_t(shape_of.numel()));
  };
  DeviceArray<E> dq(start(in.q, g0 ? &g0->dq : nullptr)), dk(start(in.k, g0 ? &g0->dk : nullptr)),
      dv(start(in.v, g0 ? &g0->dv : nullptr));
  const float scale = float(c.scale());
  if constexpr (std::is_same_v<E, float>) {
    cuda::attention_forward(o.get(), lse.get(), q.get(), k.get(), v.get(), c.B, c.T, c.H, c.Hkv, c.dk, c.dv,
                            c.window, scale);
    cuda::attention_backward(dq.get(), dk.get(), dv.get(), q.get(), k.get(), v.get(), o.get(), lse.get(), dout.get(),
                             c.B, c.T, c.H, c.Hkv, c.dk, c.dv, c.window, scale);
  } else {
    cuda::attention_forward_bf16(o.get(), lse.get(), q.get(), k.get(), v.get(), c.B, c.T, c.H, c.Hkv, c.dk, c.dv,
                                 c.window, scale);
    cuda::attention_backward_bf16(dq.get(), dk.get(), dv.get(), q.get(), k.get(), v.get(), o.get(), lse.get(),
                                  dout.get(), c.B, c.T, c.H, c.Hkv, c.dk, c.dv, c.window, scale);
  }
  return {to_tensor(o.host(), {c.B, c.T, c.H, c.dv}), to_tensor(lse.host(), {c.B, c.H, c.T}),
          to_tensor(dq.host(), in.q.shape()), to_tensor(dk.host(), in.k.shape()), to_tensor(dv.host(), in.v.shape())};
}

void expect_match(const Result& got, const Result& want, const Case& c, double tol, double lse_tol, double zero_tol) {
  SCOPED_TRACE(c.str());
  EXPECT_CLOSE(got.o, want.o, tol);
  EXPECT_CLOSE(got.lse, want.lse, lse_tol);
  EXPECT_CLOSE(got.dv, want.dv, tol);
  if (!c.one_key()) {
    EXPECT_CLOSE(got.dq, want.dq, tol);
    EXPECT_CLOSE(got.dk, want.dk, tol);
  } else {  // dS = P (dP - D) with P = 1 and dP = D: zero up to the rounding of two dot products
    EXPECT_LE(testing::max_abs(got.dq), zero_tol);
    EXPECT_LE(testing::max_abs(got.dk), zero_tol);
  }
}

// float32: unit roundoff 6e-8; dot products of up to 128 terms, softmax sums over up to 200 keys
// and the cancellation in dP - D grow that to ~1e-6 (the CPU float32 kernel sees ~5e-7 on these
// sizes); 1e-5 leaves a margin, while one wrong mask entry moves a row by ~1/W >= 3e-3.
TEST(CudaAttention, Float32MatchesTheCpuInFloat64) {
  SKIP_WITHOUT_GPU();
  Rng rng(31);
  for (const Case& c : kCases) {
    const Inputs in = random_inputs(c, rng);
    expect_match(cuda_run<float>(in, c), cpu_reference(in, c), c, 1e-5, 1e-5, 1e-6);
  }
}

// bf16 in and out, float32 accumulation and statistics: the reference gets the same bf16-rounded
// inputs, so the error is the rounding of each output to bf16 (8 significant bits, unit roundoff
// 2^-9 = 2e-3 of the entry), of the probabilities and dS that enter the tensor-core products (2e-3
// each, averaging out over the keys) and, in the backward, of o in D = dO . o; together up to
// 3e-3 for o and 4.3e-3 for dq and dk in a host emulation of the kernels: 1e-2 is the bar.
// lse is float32 from exact bf16 inputs: 1e-5. Head sizes 32/64/128 run the tensor-core kernels,
// the others (dk != dv, 24, 40) the CUDA-core ones.
TEST(CudaAttention, Bf16MatchesTheCpuInFloat64) {
  SKIP_WITHOUT_GPU();
  Rng rng(32);
  for (const Case& c : kCases) {
    Inputs in = random_inputs(c, rng);
    round_to_bf16(in);
    expect_match(cuda_run<uint16_t>(in, c), cpu_reference(in, c), c, 1e-2, 1e-5, 1e-5);
  }
}

// The backward adds to the gradients it is given (+=): starting from random g0 gives g0 + the
// fresh gradients, up to one float32 rounding of entries ~1.
TEST(CudaAttention, BackwardAccumulatesIntoTheGradients) {
  SKIP_WITHOUT_GPU();
  Rng rng(33);
  const Case c{2, 90, 4, 2, 64, 32, 40};
  const Inputs in = random_inputs(c, rng);
  Result g0{Tensor(), Tensor(), random_tensor(in.q.shape(), rng), random_tensor(in.k.shape(), rng),
            random_tensor(in.v.shape(), rng)};
  Result want = cpu_reference(in, c);
  for (auto [w, g] : {std::pair{&want.dq, &g0.dq}, {&want.dk, &g0.dk}, {&want.dv, &g0.dv}})
    for (int64_t i = 0; i < w->numel(); ++i) w->data<double>()[i] += float(g->data<double>()[i]);
  const Result got = cuda_run<float>(in, c, &g0);
  EXPECT_CLOSE(got.dq, want.dq, 1e-5);
  EXPECT_CLOSE(got.dk, want.dk, 1e-5);
  EXPECT_CLOSE(got.dv, want.dv, 1e-5);
}

// train.precision: bf16 through the backend's float32 entries: bf16 copies of q, k, v (o, dO) go to
// the tensor-core kernels, o comes back widened to float32 and the gradients are added (+=) to the
// float32 ones given. Against the float64 CPU reference on the bf16-rounded inputs, plus g0: the
// bf16 bar above (g0 ~1 adds float32 roundings only). And not float32 in disguise: the float32
// entries' o differs from the bf16 one by far more than float32's roundings.
TEST(CudaAttention, Bf16PrecisionRunsTheEntriesOnBf16Copies) {
  SKIP_WITHOUT_GPU();
  Rng rng(35);
  const Case c{2, 90, 4, 2, 64, 64, 40};
  Inputs in = random_inputs(c, rng);
  round_to_bf16(in);
  const Result g0{Tensor(), Tensor(), random_tensor(in.q.shape(), rng), random_tensor(in.k.shape(), rng),
                  random_tensor(in.v.shape(), rng)};
  Result want = cpu_reference(in, c);
  for (auto [w, g] : {std::pair{&want.dq, &g0.dq}, {&want.dk, &g0.dk}, {&want.dv, &g0.dv}})
    for (int64_t i = 0; i < w->numel(); ++i) w->data<double>()[i] += float(g->data<double>()[i]);

  auto on_gpu = [](const Tensor& t) { return t.to(DType::f32).to(Device::cuda); };
  auto on_cpu = [](const Tensor& t) { return t.to(Device::cpu).to(DType::f64); };
  const Tensor q = on_gpu(in.q), k = on_gpu(in.k), v = on_gpu(in.v), dO = on_gpu(in.dout);
  Tensor o = Tensor::empty({c.B, c.T, c.H, c.dv}, DType::f32, Device::cuda);
  Tensor lse = Tensor::empty({c.B, c.H, c.T}, DType::f32, Device::cuda);
  Tensor dq = on_gpu(g0.dq), dk = on_gpu(g0.dk), dv = on_gpu(g0.dv);
  backend::set_matmul_precision(MatmulPrecision::bf16);
  backend::attention_forward(Device::cuda, o, lse, q, k, v, c.window, c.scale(), Sequences{});
  backend::attention_backward(Device::cuda, dq, dk, dv, q, k, v, o, lse, dO, c.window, c.scale(), Sequences{}, false);
  backend::set_matmul_precision(MatmulPrecision::f32);
  const Result got{on_cpu(o), on_cpu(lse), on_cpu(dq), on_cpu(dk), on_cpu(dv)};
  expect_match(got, want, c, 1e-2, 1e-5, 1e-5);

  Tensor o32 = Tensor::empty(o.shape(), DType::f32, Device::cuda), lse32 = Tensor::empty(lse.shape(), DType::f32, Device::cuda);
  backend::attention_forward(Device::cuda, o32, lse32, q, k, v, c.window, c.scale(), Sequences{});
  EXPECT_GT(testing::compare(got.o, on_cpu(o32)).relative, 1e-4) << "the bf16 precision ran the float32 kernels";
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// No atomics: two runs give the same bits; and a window >= T runs the global code (same bits).
TEST(CudaAttention, DeterministicAndAWindowOfAtLeastTIsGlobal) {
  SKIP_WITHOUT_GPU();
  Rng rng(34);
  const Case global{2, 150, 4, 1, 64, 64, cpu::kGlobalWindow};
  const Inputs in = random_inputs(global, rng);
  const Result a = cuda_run<float>(in, global), b = cuda_run<float>(in, global);
  Case wide = global;
  wide.window = global.T + 7;
  const Result w = cuda_run<float>(in, wide);
  for (const Result* r : {&b, &w}) {
    EXPECT_TRUE(same_bits(r->o, a.o));
    EXPECT_TRUE(same_bits(r->lse, a.lse));
    EXPECT_TRUE(same_bits(r->dq, a.dq));
    EXPECT_TRUE(same_bits(r->dk, a.dk));
    EXPECT_TRUE(same_bits(r->dv, a.dv));
  }
}

// Head sizes beyond the kernels' tiles are refused with the sizes named, before any launch.
TEST(CudaAttention, TooLargeHeadsAreAClearError) {
  SKIP_WITHOUT_GPU();
  try {
    cuda::attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 8, 1, 1, 256, 64, 0, 1.0f);
    FAIL() << "dk=256 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dk=256"), std::string::npos) << e.what();
  }
}

#else

TEST(CudaAttention, WithoutTheBackendTheKernelsSaySo) {
  EXPECT_THROW(cuda::attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, 1, 1, 1, 1, 0, 1.0f), Error);
}

#endif

}  // namespace
}  // namespace linattn
