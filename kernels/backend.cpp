// The backend table (declared in kernels/backend.h): one line per entry, its CPU implementation and
// its CUDA one (nullptr while none exists).
//
// Adding a CUDA kernel for an entry:
//   1. the kernel: kernels/cuda/FAMILY.{h,cu}, a plain function on raw device pointers and sizes,
//      launched on linattn::cuda::compute_stream();
//   2. the entry: its function in kernels/cuda/entries.cpp (declared from kernels/backend.def) that checks
//      the dtype (require_f32), takes the pointers and sizes from the tensors (undefined tensor =
//      nullptr) and calls the kernel;
//   3. here: replace the entry's nullptr with CUDA(name).
// Nothing changes in autograd/: the ops already call the table. Then add a test in tests/cuda/
// against the CPU entry.
#include "kernels/backend.h"

#include <string>
#include <string_view>

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
std::string cpu_bf16_unavailable() { return cpu::bf16_products_unavailable(); }

namespace {
struct Listed {
  const char* name;
  bool cuda;
};
std::vector<Listed>& listed() {
  static std::vector<Listed> entries;
  return entries;
}
bool list(const char* name, bool cuda) {
  listed().push_back({name, cuda});
  return true;
}
}  // namespace

std::vector<const char*> entry_names(Device device) {
  std::vector<const char*> names;
  for (const Listed& e : listed())
    if (device == Device::cpu || e.cuda) names.push_back(e.name);
  return names;
}

// Defines the entry (declared by kernels/backend.def) and lists its name (entry_names), so that no
// entry can be left out of the list; whether the table names a CUDA kernel for it is read from the
// line as written, so that a build without CUDA lists the same entries.
#define ENTRY(name, cpu_fn, cuda_fn)          \
  decltype(name) name{#name, cpu_fn, cuda_fn}; \
  [[maybe_unused]] static const bool name##_listed = list(#name, std::string_view(#cuda_fn) != "nullptr")
#define CPU(name) &cpu::entry::name

// name                              CPU                          CUDA
ENTRY(add,                           CPU(add),                    CUDA(add));
ENTRY(add_inplace,                   CPU(add_inplace),            CUDA(add_inplace));
ENTRY(mul_forward,                   CPU(mul_forward),            CUDA(mul_forward));
ENTRY(mul_backward,                  CPU(mul_backward),           CUDA(mul_backward));
ENTRY(scale_forward,                 CPU(scale_forward),          CUDA(scale_forward));
ENTRY(axpy,                          CPU(axpy),                   CUDA(axpy));
ENTRY(activation_forward,            CPU(activation_forward),     CUDA(activation_forward));
ENTRY(activation_backward,           CPU(activation_backward),    CUDA(activation_backward));
ENTRY(swiglu_forward,                CPU(swiglu_forward),         CUDA(swiglu_forward));
ENTRY(swiglu_backward,               CPU(swiglu_backward),        CUDA(swiglu_backward));
ENTRY(gdn_decay_forward,             CPU(gdn_decay_forward),      CUDA(gdn_decay_forward));
ENTRY(gdn_decay_backward,            CPU(gdn_decay_backward),     CUDA(gdn_decay_backward));
ENTRY(gemm,                          CPU(gemm),                   CUDA(gemm));
ENTRY(bias_forward,                  CPU(bias_forward),           CUDA(bias_forward));
ENTRY(bias_backward,                 CPU(bias_backward),          CUDA(bias_backward));
ENTRY(rmsnorm_forward,               CPU(rmsnorm_forward),        CUDA(rmsnorm_forward));
ENTRY(rmsnorm_backward,              CPU(rmsnorm_backward),       CUDA(rmsnorm_backward));
ENTRY(l2norm_forward,                CPU(l2norm_forward),         CUDA(l2norm_forward));
ENTRY(l2norm_backward,               CPU(l2norm_backward),        CUDA(l2norm_backward));
ENTRY(embedding_forward,             CPU(embedding_forward),      CUDA(embedding_forward));
ENTRY(embedding_backward,            CPU(embedding_backward),     CUDA(embedding_backward));
ENTRY(short_conv_forward,            CPU(short_conv_forward),     CUDA(short_conv_forward));
ENTRY(short_conv_backward,           CPU(short_conv_backward),    CUDA(short_conv_backward));
ENTRY(cross_entropy_forward,         CPU(cross_entropy_forward),  CUDA(cross_entropy_forward));
ENTRY(cross_entropy_backward,        CPU(cross_entropy_backward), CUDA(cross_entropy_backward));
ENTRY(attention_forward,             CPU(attention_forward),      CUDA(attention_forward));
ENTRY(attention_backward,            CPU(attention_backward),     CUDA(attention_backward));
ENTRY(attention_scratch_bytes,       CPU(attention_scratch_bytes), nullptr);
ENTRY(kv_cache_write,                CPU(kv_cache_write),         nullptr);
ENTRY(attention_decode,              CPU(attention_decode),       nullptr);
ENTRY(rope_forward,                  CPU(rope_forward),           CUDA(rope_forward));
ENTRY(rope_backward,                 CPU(rope_backward),          CUDA(rope_backward));
ENTRY(linear_attention_forward,      CPU(linear_attention_forward),  CUDA(linear_attention_forward));
ENTRY(linear_attention_backward,     CPU(linear_attention_backward), CUDA(linear_attention_backward));
ENTRY(linear_attention_saved_size,   CPU(linear_attention_saved_size), CUDA(linear_attention_saved_size));
ENTRY(gla_forward,                   CPU(gla_forward),            CUDA(gla_forward));
ENTRY(gla_backward,                  CPU(gla_backward),           CUDA(gla_backward));
ENTRY(gla_saved_size,                CPU(gla_saved_size),         CUDA(gla_saved_size));
ENTRY(delta_rule_forward,            CPU(delta_rule_forward),     CUDA(delta_rule_forward));
ENTRY(delta_rule_backward,           CPU(delta_rule_backward),    CUDA(delta_rule_backward));
ENTRY(delta_rule_saved_size,         CPU(delta_rule_saved_size),  CUDA(delta_rule_saved_size));
ENTRY(mamba2_forward,                CPU(mamba2_forward),         nullptr);
ENTRY(mamba2_backward,               CPU(mamba2_backward),        nullptr);
ENTRY(mamba2_saved_size,             CPU(mamba2_saved_size),      nullptr);
ENTRY(adamw_step,                    CPU(adamw_step),             CUDA(adamw_step));
ENTRY(sum_squares,                   CPU(sum_squares),            CUDA(sum_squares));
ENTRY(scale_inplace,                 CPU(scale_inplace),          CUDA(scale_inplace));

}  // namespace linattn::backend
