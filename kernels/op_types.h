// The op vocabulary that both kernel columns (kernels/cpu/, kernels/cuda/) implement and the layers
// above them name: the choices an op takes and the constants of its math, in one neutral place as
// ggml declares its ops. The tensor-level half (the entries' signatures, MixerArgs, AdamWStep) is
// kernels/backend.h. Plain C++ with no tensor type, so that CUDA device code can include it.
#pragma once

#include <cstdint>

namespace linattn {

// Linear attention's feature map on q and k (shared/design/ops.md).
enum class FeatureMap { identity, elu1, relu };  // elu1(x) = elu(x) + 1

// Pointwise activations: y = f(x), dx += f'(x) dy.
enum class Activation { silu, sigmoid, logsigmoid, elu1, relu };

constexpr const char* activation_name(Activation a) {
  switch (a) {
    case Activation::silu: return "silu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::logsigmoid: return "logsigmoid";
    case Activation::elu1: return "elu1";
    case Activation::relu: return "relu";
  }
  return "?";
}

// The inputs of the matrix products (GEMMs, and attention's tile products on CUDA), always with
// float32 accumulation and float32 results: float32; TF32 (train.tf32: CUDA's tensor cores, ~10-bit
// mantissa); or bfloat16 (train.precision: bf16: 8-bit mantissa, on CUDA's tensor cores, or the
// CPU's AVX512-BF16/AMX through oneDNN).
enum class MatmulPrecision { f32, tf32, bf16 };

constexpr const char* matmul_precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::f32: return "f32";
    case MatmulPrecision::tf32: return "tf32";
    case MatmulPrecision::bf16: return "bf16";
  }
  return "?";
}

// The independent sequences ("documents") of a [B, T] batch, fla's cu_seqlens: sequence s covers
// the flattened positions offsets[s] .. offsets[s + 1] - 1 of the B * T; offsets holds count + 1
// ascending values from 0 to B * T, and every row start b * T is among them (a sequence never
// crosses a row). The offsets live on the device of the tensors they describe. count 0 (offsets
// null): the B rows are the sequences. An op given them mixes nothing across a sequence start, and
// gives every sequence bit for bit what a call on that sequence alone gives (kernels/sequences.h).
struct Sequences {
  const int32_t* offsets = nullptr;  // [count + 1], on the tensors' device
  int64_t count = 0;
};

// Normalized linear attention: o = S^T phi(q) / (phi(q)^T z + eps).
constexpr double kLinearAttnEps = 1e-6;

// RoPE's base: the angle of pair i at position t is t * theta^(-2i/d).
constexpr double kRopeTheta = 10000.0;

// The slots of a training step's control numbers: float64 on the parameters' device, written by the
// step's kernels and read by the host once, after the step's update is queued (train/optimizer.h).
namespace step_control {
enum Slot : int {
  loss,         // the mean of the micro-batches' losses (summed over the ranks, once they are added up)
  bad,          // 1 when that loss is not finite (the ranks' flags added up), else 0
  sum_squares,  // of the gradients, accumulated in float64
  norm,         // sqrt(sum_squares)
  clip,         // what the gradients are multiplied by: max_norm / norm when norm > max_norm > 0, else 1
  skip,         // 1 when the update must be skipped (bad, or a non-finite norm), else 0
  // AdamW's numbers of this step, written by the host before the step's work (AdamW::schedule), so a
  // replayed CUDA graph of the step reads each step's own
  step_size,  // lr / (1 - beta1^t)
  rbc2,       // 1 / (1 - beta2^t)
  decay,      // lr * weight_decay, for the elements of the decayed ranges
  size
};
}  // namespace step_control

// Host ids of an embedding lookup: throws linattn::Error naming `where`, the position and the id when
// an id is outside [0, V). Both columns check before they look up (kernels/op_types.cpp).
void check_token_ids(const int32_t* ids, int64_t N, int64_t V, const char* where);

}  // namespace linattn
