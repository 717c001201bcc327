// The backend table: for every kernel the autograd ops and the optimizer call, its CPU and its CUDA
// implementation, as ggml's backends do. An op calls an entry with the device of its inputs,
// `backend::rmsnorm_forward(x.device(), y, rstd, x, w, eps)`, and never branches on the device
// itself; a missing entry throws, naming the op. Entries take tensors (sizes come from their
// shapes; an undefined tensor is an absent optional input or a gradient nobody needs) and do the
// dtype dispatch; they run on the device's stream and do not synchronize.
//
// The table itself, one line per entry with both columns, is kernels/backend.cpp; the CPU
// implementations are kernels/cpu/entries.cpp, the CUDA ones kernels/cuda/entries.cpp. How to add a
// CUDA kernel is written at the top of kernels/backend.cpp. This header includes no CUDA header.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/linear_attn.h"

namespace linattn::backend {

// Throws "OP: no CUDA kernel yet ..." (or the same for another device).
[[noreturn]] void no_kernel(const char* op, Device device);

// The name of every entry of the table, in its order (kernels/backend.cpp), so that a test can
// require a case for each (tests/cuda/backend_ops_test.cpp).
const std::vector<const char*>& entry_names();

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

// What a token mixer's forward and backward read and write. Shapes as in autograd/mixers.h:
// q, k [B, T, H, Dk]; v, o [B, T, H, Dv]; states [B, H, Dk, Dv]; z [B, H, Dk]; gate: g [B, T, H, Dk]
// (GLA) or beta [B, T, H] (delta rule); decay: a [B, T, H] (Gated DeltaNet). Undefined = absent.
struct MixerArgs {
  int64_t B = 0, T = 0, H = 0, Dk = 0, Dv = 0;
  double scale = 0;
  bool chunk = true;  // the chunk form, else the recurrent one
  int64_t chunk_size = 64;
  cpu::FeatureMap phi = cpu::FeatureMap::identity;  // linear attention only
  bool normalize = false;                           // linear attention only
  Tensor o, ht, zt, saved;                          // forward outputs; saved: chunk form only
  Tensor q, k, v, gate, decay, h0, z0;              // inputs
  Tensor dq, dk, dv, dgate, ddecay, dh0, dz0;       // backward outputs (+=)
  Tensor dO, dht, dzt;                              // upstream gradients
};

// One AdamW update over a flat buffer: m, v moments; decay = lr * weight_decay (0: no decay).
struct AdamWStep {
  double beta1, beta2, eps, step_size /* lr / (1 - beta1^t) */, rbc2 /* 1 / (1 - beta2^t) */, decay;
};

// --- pointwise (x, y, a, b: same shape) ---
extern const Kernel<void(In y, In a, In b)> add;                 // y = a + b
extern const Kernel<void(In y, In x)> add_inplace;               // y += x
extern const Kernel<void(In y, In a, In b)> mul_forward;         // y = a * b
extern const Kernel<void(In da, In db, In a, In b, In dy)> mul_backward;
extern const Kernel<void(In y, In x, double c)> scale_forward;   // y = c x
extern const Kernel<void(In y, double c, In x)> axpy;            // y += c x
extern const Kernel<void(cpu::Activation f, In y, In x)> activation_forward;
extern const Kernel<void(cpu::Activation f, In dx, In x, In dy)> activation_backward;
extern const Kernel<void(In y, In gate, In up)> swiglu_forward;  // y = silu(gate) * up
extern const Kernel<void(In dgate, In dup, In gate, In up, In dy)> swiglu_backward;
// Gated DeltaNet's log-decay a = -exp(A_log) * softplus(x + dt_bias): x, a [..., H]; A_log, dt_bias [H].
extern const Kernel<void(In a, In x, In A_log, In dt_bias)> gdn_decay_forward;
extern const Kernel<void(In dx, In dA_log, In ddt_bias, In x, In A_log, In dt_bias, In da)> gdn_decay_backward;

// --- matrix products ---
// TF32 tensor cores for the float32 products on CUDA (train.tf32); off by default.
void set_tf32(bool on);
bool tf32();
// C [M, N] = alpha op(A) op(B) + beta C, row-major and contiguous: op(A) [M, K], op(B) [K, N].
extern const Kernel<void(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, In A, In B,
                         double beta, In C)>
    gemm;
extern const Kernel<void(In y, In bias)> bias_forward;    // y [N, out] += bias [out] on every row
extern const Kernel<void(In dbias, In dy)> bias_backward;  // dbias [out] += sum of the rows of dy [N, out]

// --- norms (over the last dim; rows N = everything else) ---
extern const Kernel<void(In y, In rstd, In x, In w, double eps)> rmsnorm_forward;
extern const Kernel<void(In dx, In dw, In x, In w, In rstd, In dy)> rmsnorm_backward;  // dw may be undefined
extern const Kernel<void(In y, In r, In x, double eps)> l2norm_forward;
extern const Kernel<void(In dx, In y, In r, In dy)> l2norm_backward;

// --- embedding, convolution, loss ---
// ids: i32, any shape [...]; table [V, D]; y [..., D]. Ids outside [0, V) throw.
extern const Kernel<void(In y, In ids, In table)> embedding_forward;
extern const Kernel<void(In dtable, In ids, In dy)> embedding_backward;
// x, y [B, T, C]; w [C, W]; bias [C] or undefined.
extern const Kernel<void(In y, In x, In w, In bias)> short_conv_forward;
extern const Kernel<void(In dx, In dw, In dbias, In x, In w, In dy)> short_conv_backward;
// loss [1] = mean over the counted rows of -log softmax(logits)[target]; lse [N] saved; returns
// the number of counted rows (targets that are not ignore_index). Bad targets and non-finite losses throw.
extern const Kernel<int64_t(In loss, In lse, In logits, In targets, int32_t ignore_index)> cross_entropy_forward;
// dlogits += dloss[0] / count * (softmax - onehot) on the counted rows.
extern const Kernel<void(In dlogits, In logits, In lse, In targets, In dloss, int64_t count, int32_t ignore_index)>
    cross_entropy_backward;

// --- attention and positions ---
// q [B, T, H, dk], k [B, T, Hkv, dk], v [B, T, Hkv, dv], o [B, T, H, dv], lse [B, H, T]; window 0 = global.
extern const Kernel<void(In o, In lse, In q, In k, In v, int64_t window, double scale)> attention_forward;
extern const Kernel<void(In dq, In dk, In dv, In q, In k, In v, In o, In lse, In dO, int64_t window, double scale)>
    attention_backward;
// x, y [B, T, H, d]
extern const Kernel<void(In y, In x, int64_t offset, double theta)> rope_forward;
extern const Kernel<void(In dx, In dy, int64_t offset, double theta)> rope_backward;

// --- token mixers ---
extern const Kernel<void(const MixerArgs&)> linear_attention_forward, linear_attention_backward;
extern const Kernel<void(const MixerArgs&)> gla_forward, gla_backward;
extern const Kernel<void(const MixerArgs&)> delta_rule_forward, delta_rule_backward;  // decay defined: gated

// --- optimizer (flat buffers) ---
extern const Kernel<void(In w, In g, In m, In v, const AdamWStep& s)> adamw_step;
extern const Kernel<double(In x)> sum_squares;  // accumulated in float64; the host gets the number
extern const Kernel<void(In x, double c)> scale_inplace;  // x *= c

}  // namespace linattn::backend
