// The backend table: for every kernel the autograd ops and the optimizer call, its CPU and its CUDA
// implementation, as ggml's backends do. An op calls an entry with the device of its inputs,
// `backend::rmsnorm_forward(x.device(), y, rstd, x, w, eps)`, and never branches on the device
// itself; a missing entry throws, naming the op. Entries take tensors (sizes come from their
// shapes; an undefined tensor is an absent optional input or a gradient nobody needs) and do the
// dtype dispatch; they run on the device's stream and do not synchronize.
//
// With kernels/op_types.h this header is the op vocabulary both columns implement and autograd
// calls: the entries and their signatures (kernels/backend.def, each written once), the argument
// structs. The table itself is kernels/backend.cpp, made from the same lines; the CPU
// implementations are kernels/cpu/entries.cpp, the CUDA ones kernels/cuda/entries.cpp. How to add a
// CUDA kernel is written at the top of kernels/backend.cpp. This header includes no CUDA header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_types.h"

namespace linattn::backend {

// Throws "OP: no CUDA kernel yet ..." (or the same for another device).
[[noreturn]] void no_kernel(const char* op, Device device);

// The names of the entries of the table that have a kernel on `device`, in the table's order
// (kernels/backend.cpp), so that a test can require a case for each (tests/cuda/backend_ops_test.cpp).
std::vector<const char*> entry_names(Device device);

template <class Sig>
struct Kernel;

template <class R, class... Args>
struct Kernel<R(Args...)> {
  const char* op;      // the name errors use
  R (*cpu)(Args...);   // never null
  R (*cuda)(Args...);  // null until a CUDA kernel exists

  bool has(Device d) const { return (d == Device::cpu ? cpu : cuda) != nullptr; }
  R operator()(Device d, Args... args) const {
    R (*f)(Args...) = d == Device::cpu ? cpu : cuda;
    if (!f) no_kernel(op, d);
    return f(args...);
  }
};

using In = const Tensor&;  // every tensor argument; outputs too (the handle is const, the data is not)
using Ins = const std::vector<Tensor>&;  // a list of them

// What a token mixer's forward and backward read and write. Shapes as in autograd/mixers.h:
// q, k [B, T, H, Dk]; v, o [B, T, H, Dv]; states [B, H, Dk, Dv]; z [B, H, Dk]; gate: g [B, T, H, Dk]
// (GLA) or beta [B, T, H] (delta rule); decay: a [B, T, H] (Gated DeltaNet). Undefined = absent.
// Mamba2 (SSD, kernels/cpu/mamba2.h) in these terms: q = C and k = B [B, T, G, Dk = N] shared by
// groups of H / G heads, v = x [B, T, H, Dv = P], gate = the time step before its softplus
// [B, T, H], rate = A_log [H] (A = -exp(A_log)), skip = D [H] (o += D x); no scale.
struct MixerArgs {
  int64_t B = 0, T = 0, H = 0, Dk = 0, Dv = 0;
  int64_t G = 0;  // q and k heads when groups of heads share them (Mamba2); 0 = H
  double scale = 0;
  bool chunk = true;  // the chunk form, else the recurrent one
  int64_t chunk_size = 64;
  FeatureMap phi = FeatureMap::identity;       // linear attention only
  bool normalize = false;                      // linear attention only
  Tensor o, ht, zt, saved;                     // forward outputs; saved: chunk form only (*_saved_size)
  Tensor q, k, v, gate, decay, rate, skip, h0, z0;           // inputs
  Tensor dq, dk, dv, dgate, ddecay, drate, dskip, dh0, dz0;  // backward outputs (+=)
  // The backward writes dq, dk, dv and dgate (=, each the first writer of its gradient) instead of
  // adding into them; their contents are then undefined until it has run.
  bool write = false;
  Tensor dO, dht, dzt;                         // upstream gradients
  // The forward writes ht and zt; false: their contents are undefined (nothing reads them, and an
  // entry may skip them).
  bool final_state = true;
  // The documents of the batch (kernels/op_types.h; {} = its rows): no state crosses a document
  // start, and h0, ht (dh0, dht) belong to the documents that start and end each row
  // (kernels/sequences.h's initial_state_row, final_state_row).
  Sequences seqs;
};

// AdamW's constants for adamw_step over a flat buffer (m, v moments); the step's own numbers (step
// size, bias correction, decay for the elements decay_ranges name) are control's step_control slots.
struct AdamWStep {
  double beta1, beta2, eps;
};

// The inputs of the matrix products, process-wide (train.precision, train.tf32); f32 by default.
// gemm on CUDA reads tf32 from it (float32 operands rounded to TF32 by cuBLAS); bf16 products take
// bf16 operands instead (the gemm entry). Attention and the linear mixers on CUDA read it (bf16: the
// tensor-core tile kernels).
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

// While one lives on a thread, the token ids and targets on a GPU that this thread's calls pass were
// checked on the host before their upload (the trainer's staged batches): every id and target in
// the vocabulary, no target the ignore index. The CUDA entries then neither read them back nor
// wait (the embedding checks no ids, the cross-entropy counts every row), so the step's work can
// be queued and replayed as a CUDA graph. Without one, device ids are read back and checked.
class CheckedDeviceTokens {
 public:
  CheckedDeviceTokens();
  ~CheckedDeviceTokens();
  CheckedDeviceTokens(const CheckedDeviceTokens&) = delete;
  CheckedDeviceTokens& operator=(const CheckedDeviceTokens&) = delete;
  static bool active();

 private:
  bool previous_;
};

// The gemm entry's operands, checked by both columns: A and B of one dtype, and C's dtype the one
// that goes with it (f32 for f32 and bf16 operands, f64 for f64, or bf16 for bf16 operands with
// beta = 0: a sum added into bf16 would be rounded twice); an error names the three.
void check_gemm_dtypes(In A, In B, double beta, In C);
// split_columns / join_columns: `whole` [N, C] and the parts [N, c_i] with the sum of c_i = C, at
// most 8, in whole's dtype (join: or float32 parts into a bf16 whole); copies empty or one per
// part, each undefined or a bf16 [N, c_i]. Returns the widths c_i.
std::vector<int64_t> check_columns(Ins parts, Ins copies, In whole);

// The convert entry's tensors, checked by both columns (same shape, f32 -> bf16 or bf16 -> f32),
// and recorded in the ConversionLogs alive.
void check_convert(In y, In x);

// t, or when t is a bf16 copy a tape node keeps, t widened into float32 scratch on its device (one
// conversion): for the entries whose kernels read float32 only (kernels/backend.def).
Tensor float32_of(In t);
// A mixer backward's r for the entries whose kernels read float32 and add into the gradients: q, k,
// v and the gate float32_of, and with r.write the gradients dq, dk, dv and dgate zeroed first.
MixerArgs for_float32_adding_kernels(const MixerArgs& r);

// While one is alive, every convert call (on any device, any thread) is recorded: which memory it
// read, how many elements, the dtypes. Tests count conversions with it (a weight is converted once
// per step, an activation once however many products read it).
class ConversionLog {
 public:
  struct Entry {
    const void* from;
    int64_t n;
    DType from_dtype, to_dtype;
    Device device;
  };
  ConversionLog();
  ~ConversionLog();
  ConversionLog(const ConversionLog&) = delete;
  ConversionLog& operator=(const ConversionLog&) = delete;
  std::vector<Entry> entries() const;
  void clear();

 private:
  std::vector<Entry> entries_;
  friend void check_convert(In y, In x);
};

// "" when the CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX, as oneDNN reports), else
// why not, naming the instruction set found: without it the CPU's bf16 products widen their operands
// to float32 (the same sums, slower).
std::string cpu_bf16_unavailable();

// The entries: `extern const Kernel<void(In y, In a, In b)> add;` and so on (kernels/backend.def).
#define LINATTN_ENTRY(name, ...) extern const Kernel<__VA_ARGS__> name;
#define LINATTN_ENTRY_CPU_ONLY(name, ...) extern const Kernel<__VA_ARGS__> name;
#include "kernels/backend.def"
#undef LINATTN_ENTRY
#undef LINATTN_ENTRY_CPU_ONLY

}  // namespace linattn::backend
