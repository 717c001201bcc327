// The backend table (declared in kernels/backend.h): each entry of kernels/backend.def with its CPU
// implementation (cpu::entry::NAME) and its CUDA one (cuda::entry::NAME, or nullptr for the entries
// the .def writes LINATTN_ENTRY_CPU_ONLY, and in a build without CUDA).
//
// Adding a CUDA kernel for an entry:
//   1. the kernel: kernels/cuda/FAMILY.{h,cu}, a plain function on raw device pointers and sizes,
//      launched on linattn::cuda::compute_stream();
//   2. the entry: its function in kernels/cuda/entries.cpp that checks the dtype (require_f32), takes
//      the pointers and sizes from the tensors (undefined tensor = nullptr) and calls the kernel;
//   3. in kernels/backend.def: write the entry LINATTN_ENTRY instead of LINATTN_ENTRY_CPU_ONLY (for
//      a mixer: LINATTN_MIXER_ENTRIES(LINATTN_ENTRY, name)), which declares the function of step 2.
// Nothing changes in autograd/: the ops already call the table. Then add a test in tests/cuda/
// against the CPU entry.
#include "kernels/backend.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "kernels/cpu/entries.h"
#include "kernels/cpu/matmul.h"

#ifdef LINATTN_CUDA
#include "kernels/cuda/entries.h"
#define CUDA(name) &cuda::entry::name
#else
#define CUDA(name) nullptr
#endif

namespace linattn::backend {

void no_kernel(const char* op, Device device) {
  std::string dev = device == Device::cuda ? "CUDA" : device_name(device);
  LINATTN_FAIL(op, ": no ", dev, " kernel yet for this op; train on the CPU (train.device: cpu)");
}

namespace {
MatmulPrecision g_matmul_precision = MatmulPrecision::f32;
}
void set_matmul_precision(MatmulPrecision p) { g_matmul_precision = p; }
MatmulPrecision matmul_precision() { return g_matmul_precision; }

namespace {
thread_local bool t_checked_device_tokens = false;
}
CheckedDeviceTokens::CheckedDeviceTokens() : previous_(t_checked_device_tokens) { t_checked_device_tokens = true; }
CheckedDeviceTokens::~CheckedDeviceTokens() { t_checked_device_tokens = previous_; }
bool CheckedDeviceTokens::active() { return t_checked_device_tokens; }
std::string cpu_bf16_unavailable() { return cpu::bf16_products_unavailable(); }

void check_gemm_dtypes(In A, In B, double beta, In C) {
  const DType out = A.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const bool bf16_out = A.dtype() == DType::bf16 && C.dtype() == DType::bf16;
  LINATTN_CHECK(A.dtype() == B.dtype() && A.dtype() != DType::i32 && (C.dtype() == out || bf16_out),
                "gemm: operands ", A.str(), " and ", B.str(), " into ", C.str(),
                ": A and B must share a floating dtype (f32, f64 or bf16), and C be f64 for f64 operands, f32 "
                "otherwise (or bf16 for bf16 operands); convert an operand first (backend::convert)");
  LINATTN_CHECK(!bf16_out || beta == 0.0, "gemm: a bf16 result ", C.str(), " with beta = ", beta,
                ": a bf16 C is written, never added into (beta = 0); add into a float32 C instead");
}

namespace {
std::mutex g_log_mutex;
std::vector<ConversionLog*> g_logs;  // the logs alive
}  // namespace

ConversionLog::ConversionLog() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_logs.push_back(this);
}

ConversionLog::~ConversionLog() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  g_logs.erase(std::find(g_logs.begin(), g_logs.end(), this));
}

std::vector<ConversionLog::Entry> ConversionLog::entries() const {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return entries_;
}

void ConversionLog::clear() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  entries_.clear();
}

std::vector<int64_t> check_columns(Ins parts, Ins copies, In whole) {
  const int64_t N = whole.shape().rows(), C = whole.shape().last();
  LINATTN_CHECK(!parts.empty() && parts.size() <= 8, "columns: ", parts.size(), " blocks (1 to 8)");
  LINATTN_CHECK(copies.empty() || copies.size() == parts.size(), "columns: ", copies.size(), " copies for ",
                parts.size(), " blocks");
  const DType part_dtype = whole.dtype() == DType::bf16 ? DType::f32 : whole.dtype();
  std::vector<int64_t> widths;
  int64_t sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    LINATTN_CHECK(p.defined() && p.shape().rows() == N && p.dtype() == part_dtype && p.device() == whole.device(),
                  "columns: block ", i, " ", p.str(), " does not match ", whole.str());
    if (!copies.empty() && copies[i].defined())
      LINATTN_CHECK(copies[i].dtype() == DType::bf16 && copies[i].shape() == p.shape() &&
                        copies[i].device() == whole.device(),
                    "columns: copy ", copies[i].str(), " of block ", p.str());
    widths.push_back(p.shape().last());
    sum += widths.back();
  }
  LINATTN_CHECK(sum == C, "columns: blocks of ", sum, " columns for ", whole.str());
  return widths;
}

void check_convert(In y, In x) {
  LINATTN_CHECK(y.shape() == x.shape() && ((x.dtype() == DType::f32 && y.dtype() == DType::bf16) ||
                                           (x.dtype() == DType::bf16 && y.dtype() == DType::f32)),
                "convert: ", x.str(), " into ", y.str(), ": the shapes must match, and the conversion be f32 -> bf16 "
                "or bf16 -> f32");
  std::lock_guard<std::mutex> lock(g_log_mutex);
  for (ConversionLog* log : g_logs) log->entries_.push_back({x.raw(), x.numel(), x.dtype(), y.dtype(), x.device()});
}

Tensor float32_of(In t) {
  if (!t.defined() || t.dtype() != DType::bf16) return t;
  Tensor wide = Tensor::scratch(t.shape(), DType::f32, t.device());
  convert(wide.device(), wide, t);
  return wide;
}

MixerArgs for_float32_adding_kernels(const MixerArgs& r) {
  MixerArgs w = r;
  for (Tensor* t : {&w.q, &w.k, &w.v, &w.gate}) *t = float32_of(*t);
  if (w.write)
    for (const Tensor* g : {&w.dq, &w.dk, &w.dv, &w.dgate})
      if (g->defined()) g->zero_();
  w.write = false;
  return w;
}

namespace {
// Every entry's name and whether the .def gives it a CUDA kernel (read from the .def, so that a build
// without CUDA lists the same entries).
struct Listed {
  const char* name;
  bool cuda;
};
constexpr Listed kListed[] = {
#define LINATTN_ENTRY(name, ...) {#name, true},
#define LINATTN_ENTRY_CPU_ONLY(name, ...) {#name, false},
#include "kernels/backend.def"
#undef LINATTN_ENTRY
#undef LINATTN_ENTRY_CPU_ONLY
};
}  // namespace

std::vector<const char*> entry_names(Device device) {
  std::vector<const char*> names;
  for (const Listed& e : kListed)
    if (device == Device::cpu || e.cuda) names.push_back(e.name);
  return names;
}

// The table: `const Kernel<void(In y, In a, In b)> add{"add", &cpu::entry::add, CUDA(add)};` and so on.
#define LINATTN_ENTRY(name, ...) decltype(name) name{#name, &cpu::entry::name, CUDA(name)};
#define LINATTN_ENTRY_CPU_ONLY(name, ...) decltype(name) name{#name, &cpu::entry::name, nullptr};
#include "kernels/backend.def"
#undef LINATTN_ENTRY
#undef LINATTN_ENTRY_CPU_ONLY

}  // namespace linattn::backend
