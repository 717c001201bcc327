// The device side of the CUDA emulation: what a kernel sees (threadIdx, __syncthreads, the warp
// operations, atomics, the device math functions) and the launch behind LINATTN_LAUNCH
// (kernels/cuda/launch.cuh). Included by the emulation's cuda_runtime.h.
//
// Each thread of a block is a fiber (emulation/device.cpp). Threads run one after another, each up
// to its next barrier or warp operation, and a warp runs as far as it can before another warp does;
// a barrier opens when every live thread of the block (or every lane of the mask) has reached it,
// and a barrier that some live thread never reaches is an error naming the kernel and the source
// lines. A launch runs twice, blocks, warps and threads in order (warp 0 first) and then in reverse
// (the last warp first, or a seeded random order: LINATTN_EMULATION_SCHEDULE), and the two results
// must be bitwise equal (LINATTN_EMULATION_CHECK in emulation/device.cpp: every launch, the first
// ones of each configuration, or none).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// ---- where the running thread is ----
// Set by the emulation before a fiber runs. One block runs at a time in the whole process
// (emulation/device.cpp), so these are plain globals.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
constexpr int warpSize = 32;

namespace cuda_emu {

using Site = std::source_location;

// The barrier of the whole block.
void syncthreads(Site site);

// A warp operation: every lane of `mask` must call one with the same kind and mask; the calling
// lane must be in the mask. `value` is this lane's operand (at most 8 bytes); the result is what
// this lane receives.
enum class WarpOpKind { sync, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all, exchange };
uint64_t warp_op(WarpOpKind kind, unsigned mask, uint64_t value, int param, int width, Site site);

// A warp-collective exchange for the emulated tensor-core fragments (mma.h): every one of the 32
// lanes gives `bytes` bytes; `all` receives the 32 contributions, lane 0's first.
void warp_exchange(const void* mine, size_t bytes, void* all, Site site);

// The launch's dynamic shared memory (its byte count), filled with 0xFF bytes at each block's start.
void* dynamic_shared();

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp shuffles move at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

}  // namespace cuda_emu

inline void __syncthreads(cuda_emu::Site site = cuda_emu::Site::current()) { cuda_emu::syncthreads(site); }
inline void __syncwarp(unsigned mask = 0xffffffffu, cuda_emu::Site site = cuda_emu::Site::current()) {
  cuda_emu::warp_op(cuda_emu::WarpOpKind::sync, mask, 0, 0, 32, site);
}
inline void __threadfence() {}
inline void __threadfence_block() {}

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32, cuda_emu::Site site = cuda_emu::Site::current()) {
  return cuda_emu::from_bits<T>(
      cuda_emu::warp_op(cuda_emu::WarpOpKind::shfl, mask, cuda_emu::to_bits(var), src_lane, width, site));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32, cuda_emu::Site site = cuda_emu::Site::current()) {
  return cuda_emu::from_bits<T>(
      cuda_emu::warp_op(cuda_emu::WarpOpKind::shfl_up, mask, cuda_emu::to_bits(var), int(delta), width, site));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   cuda_emu::Site site = cuda_emu::Site::current()) {
  return cuda_emu::from_bits<T>(
      cuda_emu::warp_op(cuda_emu::WarpOpKind::shfl_down, mask, cuda_emu::to_bits(var), int(delta), width, site));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32, cuda_emu::Site site = cuda_emu::Site::current()) {
  return cuda_emu::from_bits<T>(
      cuda_emu::warp_op(cuda_emu::WarpOpKind::shfl_xor, mask, cuda_emu::to_bits(var), lane_mask, width, site));
}
inline unsigned __ballot_sync(unsigned mask, int predicate, cuda_emu::Site site = cuda_emu::Site::current()) {
  return unsigned(cuda_emu::warp_op(cuda_emu::WarpOpKind::ballot, mask, predicate != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int predicate, cuda_emu::Site site = cuda_emu::Site::current()) {
  return int(cuda_emu::warp_op(cuda_emu::WarpOpKind::any, mask, predicate != 0, 0, 32, site));
}
inline int __all_sync(unsigned mask, int predicate, cuda_emu::Site site = cuda_emu::Site::current()) {
  return int(cuda_emu::warp_op(cuda_emu::WarpOpKind::all, mask, predicate != 0, 0, 32, site));
}
inline unsigned __activemask() { return 0xffffffffu; }

// ---- atomics: threads switch only at barriers and one block runs at a time, so a plain
// read-modify-write is atomic here; the __atomic builtins keep it so for ThreadSanitizer too ----
template <class T>
T atomicAdd(T* address, T val) {
  T old = *address;
  *address = old + val;
  return old;
}
template <class T>
T atomicSub(T* address, T val) {
  T old = *address;
  *address = old - val;
  return old;
}
template <class T>
T atomicMax(T* address, T val) {
  T old = *address;
  if (val > old) *address = val;
  return old;
}
template <class T>
T atomicMin(T* address, T val) {
  T old = *address;
  if (val < old) *address = val;
  return old;
}
template <class T>
T atomicExch(T* address, T val) {
  T old = *address;
  *address = val;
  return old;
}
template <class T>
T atomicCAS(T* address, T compare, T val) {
  T old = *address;
  if (old == compare) *address = val;
  return old;
}

// ---- device math that is not in <cmath> ----
// CUDA's min and max of two numbers, in the global namespace, in the arguments' common type.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(b) < T(a) ? T(b) : T(a);
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return T(a) < T(b) ? T(b) : T(a);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
// The _rn operations are never contracted into a fused multiply-add by nvcc; g++ contracts nothing
// across these calls either.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }

// ---- the launch ----
namespace cuda_emu {

// One pointer-sized view of a kernel argument's bytes, for the pointer checks.
struct ArgBytes {
  const void* data;
  size_t size;
};

struct LaunchConfig {
  const char* name;    // the kernel as the launch wrote it
  const void* kernel;  // its address: the key of cudaFuncSetAttribute
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
};

// Checks the configuration (an error sets the thread's last error and queues nothing), checks
// every pointer-sized word of the arguments (a host pointer is an error naming the kernel and the
// argument), and queues the launch on the stream. `keep` owns the arguments; `thread` runs the
// kernel for the current thread.
void submit(const LaunchConfig& config, std::vector<ArgBytes> args, std::shared_ptr<void> keep,
            void (*thread)(const void* launch_data), const void* launch_data);

// While a LaunchRecorder lives, every launch that passes submit's configuration checks is appended to
// its list (name as the launch wrote it, grid, block, dynamic shared bytes), in submission order:
// tests check the launchers' geometry against kernels/cuda/launch_plan.h with it. One at a time.
class LaunchRecorder;
void record_launch(const LaunchConfig& config);
struct RecordedLaunch {
  std::string name;
  dim3 grid, block;
  size_t shared_bytes;
};
class LaunchRecorder {
 public:
  LaunchRecorder();
  ~LaunchRecorder();
  LaunchRecorder(const LaunchRecorder&) = delete;
  LaunchRecorder& operator=(const LaunchRecorder&) = delete;
  const std::vector<RecordedLaunch>& launches() const { return launches_; }
  void clear() { launches_.clear(); }

 private:
  friend void record_launch(const LaunchConfig&);
  std::vector<RecordedLaunch> launches_;
};

template <class... P>
class Launcher {
 public:
  Launcher(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes = 0,
           cudaStream_t stream = nullptr)
      : config_{name, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream}, kernel_(kernel) {}

  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "a kernel launch needs one argument per parameter");
    auto data = std::make_shared<Data>(Data{kernel_, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)});
    std::vector<ArgBytes> views;
    // Padding bytes are zeroed so that the pointer check never reads leftovers as an address.
    std::apply([&](auto&... a) { (__builtin_clear_padding(&a), ...); }, data->args);
    std::apply([&](const auto&... a) { (views.push_back(ArgBytes{&a, sizeof(a)}), ...); }, data->args);
    const void* raw = data.get();
    submit(config_, std::move(views), std::move(data), &run, raw);
  }

 private:
  struct Data {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> args;
  };
  static void run(const void* raw) {
    const Data& d = *static_cast<const Data*>(raw);
    std::apply(d.kernel, d.args);  // each thread gets its own copies of the parameters
  }

  LaunchConfig config_;
  void (*kernel_)(P...);
};

template <class... P>
Launcher(const char*, void (*)(P...), dim3, dim3, size_t, cudaStream_t) -> Launcher<P...>;

}  // namespace cuda_emu
