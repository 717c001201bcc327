// The backend table (declared in kernels/backend.h): one line per entry, its CPU implementation and
// its CUDA one (nullptr while none exists).
//
// Adding a CUDA kernel for an entry:
//   1. the kernel: kernels/cuda/FAMILY.{h,cu}, a plain function on raw device pointers and sizes,
//      launched on linattn::cuda::compute_stream();
//   2. the entry: a function with the entry's signature in kernels/cuda/entries.{h,cpp} that checks
//      the dtype (require_f32), takes the pointers and sizes from the tensors (undefined tensor =
//      nullptr) and calls the kernel;
//   3. here: replace the entry's nullptr with CUDA(name).
// Nothing changes in autograd/: the ops already call the table. Then add a test in tests/cuda/
// against the CPU entry.
#include "kernels/backend.h"

#include <string>

#include "kernels/cpu/entries.h"

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
bool g_tf32 = false;
}
void set_tf32(bool on) { g_tf32 = on; }
bool tf32() { return g_tf32; }

#define ENTRY(name, cpu_fn, cuda_fn) decltype(name) name{#name, cpu_fn, cuda_fn}
#define CPU(name) &cpu::entry::name

// name                              CPU                          CUDA
ENTRY(add,                           CPU(add),                    CUDA(add));
ENTRY(add_inplace,                   CPU(add_inplace),            CUDA(add_inplace));
ENTRY(mul_forward,                   CPU(mul_forward),            nullptr);
ENTRY(mul_backward,                  CPU(mul_backward),           nullptr);
ENTRY(scale_forward,                 CPU(scale_forward),          nullptr);
ENTRY(axpy,                          CPU(axpy),                   nullptr);
ENTRY(activation_forward,            CPU(activation_forward),     nullptr);
ENTRY(activation_backward,           CPU(activation_backward),    nullptr);
ENTRY(swiglu_forward,                CPU(swiglu_forward),         nullptr);
ENTRY(swiglu_backward,               CPU(swiglu_backward),        nullptr);
ENTRY(gemm,                          CPU(gemm),                   CUDA(gemm));
ENTRY(bias_forward,                  CPU(bias_forward),           nullptr);
ENTRY(bias_backward,                 CPU(bias_backward),          nullptr);
ENTRY(rmsnorm_forward,               CPU(rmsnorm_forward),        nullptr);
ENTRY(rmsnorm_backward,              CPU(rmsnorm_backward),       nullptr);
ENTRY(l2norm_forward,                CPU(l2norm_forward),         nullptr);
ENTRY(l2norm_backward,               CPU(l2norm_backward),        nullptr);
ENTRY(embedding_forward,             CPU(embedding_forward),      nullptr);
ENTRY(embedding_backward,            CPU(embedding_backward),     nullptr);
ENTRY(short_conv_forward,            CPU(short_conv_forward),     nullptr);
ENTRY(short_conv_backward,           CPU(short_conv_backward),    nullptr);
ENTRY(cross_entropy_forward,         CPU(cross_entropy_forward),  nullptr);
ENTRY(cross_entropy_backward,        CPU(cross_entropy_backward), nullptr);
ENTRY(attention_forward,             CPU(attention_forward),      nullptr);
ENTRY(attention_backward,            CPU(attention_backward),     nullptr);
ENTRY(rope_forward,                  CPU(rope_forward),           nullptr);
ENTRY(rope_backward,                 CPU(rope_backward),          nullptr);
ENTRY(linear_attention_forward,      CPU(linear_attention_forward),  nullptr);
ENTRY(linear_attention_backward,     CPU(linear_attention_backward), nullptr);
ENTRY(gla_forward,                   CPU(gla_forward),            nullptr);
ENTRY(gla_backward,                  CPU(gla_backward),           nullptr);
ENTRY(delta_rule_forward,            CPU(delta_rule_forward),     nullptr);
ENTRY(delta_rule_backward,           CPU(delta_rule_backward),    nullptr);
ENTRY(adamw_step,                    CPU(adamw_step),             nullptr);
ENTRY(sum_squares,                   CPU(sum_squares),            nullptr);
ENTRY(scale_inplace,                 CPU(scale_inplace),          nullptr);

}  // namespace linattn::backend
