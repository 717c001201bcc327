#ifdef LINATTN_CUDA
#include "kernels/cuda/entries.h"

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/matmul.h"

namespace linattn::cuda::entry {

namespace {

// Our CUDA kernels are float32 (bf16 comes with mixed precision); float64 is the CPU's check type.
void require_f32(const char* op, In t) {
  LINATTN_CHECK(t.dtype() == DType::f32, op, ": the CUDA kernels take float32 tensors, got ", t.str(),
                " (train.dtype f64 runs on the CPU only)");
}

}  // namespace

void add(In y, In a, In b) {
  require_f32("add", y);
  add_forward(y.data<float>(), a.data<float>(), b.data<float>(), y.numel());
}

void add_inplace(In y, In x) {
  require_f32("add_inplace", y);
  cuda::add_inplace(y.data<float>(), x.data<float>(), y.numel());
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B, double beta, In C) {
  require_f32("gemm", C);
  cuda::gemm(trans_a, trans_b, M, N, K, float(alpha), A.data<float>(), trans_a ? M : K, B.data<float>(),
             trans_b ? K : N, float(beta), C.data<float>(), N, backend::tf32());
}

}  // namespace linattn::cuda::entry
#endif  // LINATTN_CUDA
