// Differentiable ops: each records one tape node whose backward calls a hand-derived kernel.
// Inputs of one op share dtype and device; shape errors name the op and both shapes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/segments.h"
#include "autograd/variable.h"
#include "kernels/op_types.h"

namespace linattn::ops {

Variable add(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable scale(const Variable& x, double c);  // c * x
// y = scale * f(x): one node (a constant scale costs no pass of its own: GLA's gate normalizer).
Variable activation(Activation f, const Variable& x, double scale = 1.0);
inline Variable silu(const Variable& x) { return activation(Activation::silu, x); }
inline Variable sigmoid(const Variable& x) { return activation(Activation::sigmoid, x); }
inline Variable logsigmoid(const Variable& x) { return activation(Activation::logsigmoid, x); }
inline Variable elu1(const Variable& x) { return activation(Activation::elu1, x); }
// silu(gate) * up, one node.
Variable swiglu(const Variable& gate, const Variable& up);
// Gated DeltaNet's log-decay as fla computes it: -exp(A_log) * softplus(x + dt_bias), per head.
// x [..., H], A_log [H], dt_bias [H]; output like x.
Variable gdn_decay(const Variable& x, const Variable& A_log, const Variable& dt_bias);
// Same storage, another shape (same element count).
Variable view(const Variable& x, const Shape& shape);
// Rows [begin, begin + count) of x along its first dim, a view (no copy): e.g. one part of a
// fused projection's weight [out, in].
Variable rows(const Variable& x, int64_t begin, int64_t count);

// y = x W^T (+ b): x [..., in], weight [out, in], bias [out] (optional); y [..., out]. When the
// weight carries a bf16 copy (train.precision: bf16, Variable::bf16), its products take bf16
// operands with float32 accumulation (x, dy converted once each) and y, dx, dW stay float32.
Variable linear(const Variable& x, const Variable& weight, const Variable& bias = {});

// y = c f(x W^T + b), the bias and the activation after the product in one pass each way (GLA's
// gate: logsigmoid(gk_proj(x)) / 16), one node that keeps the activation's input (in bf16 in a
// SaveInBf16 scope, written in the same pass) for its backward, which writes the products' operand
// dz and the bias gradient in one pass. Results are those of activation(f, linear(x, weight, bias),
// c) bit for bit, on either device and with bf16 products.
Variable linear_activation(const Variable& x, const Variable& weight, const Variable& bias, Activation f, double c);

// ys[i] = x W_i^T for weights W_i [out_i, in] without biases that lie back to back, values,
// gradients and bf16 copies alike, so that `joined` [sum of out_i, in] views all of them
// (Parameters::joined): one node, as one product forward and one each for dx and dW, the outputs
// split off by one kernel and their gradients joined by one (which writes the bf16 copy the
// products read; under a SaveInBf16 scope the split writes each output's bf16 copy too). The tape
// sees the weights themselves, so each one's gradient is final when the node has run. Results are
// those of linear(x, W_i) up to the products' order of summation (bit for bit where it is the same);
// with bf16 products the one product is written in bf16, so the outputs are linear's rounded to
// bf16 (as fla's bf16 projections are; their gradients are linear's).
std::vector<Variable> linears(const Variable& x, const std::vector<Variable>& weights, const Variable& joined);

// y = (silu(gate) * up) W^T: swiglu followed by linear (no bias), one node. It keeps gate and up but
// not their product, which its backward recomputes (one elementwise pass) for dW: the SwiGLU MLP's
// widest activation, and a mixer's gated output, are never kept. Results are those of
// linear(swiglu(gate, up), weight) bit for bit (in bf16 too, when gate and up are kept as they are).
// With bf16 products the swiglu kernel writes the product's bf16 operand itself, and its backward
// reads gate and up kept in bf16 (autograd/saved.h) as they are: no float32 copy of either exists.
Variable swiglu_linear(const Variable& gate, const Variable& up, const Variable& weight);

// The gated output projection of GLA and Gated DeltaNet, y = (silu(gate) * rmsnorm(x)) W^T (fla's
// FusedRMSNormSwishGate, then o_proj), as one node: x [..., D] the heads' outputs, each row of D
// normalized with norm_weight [D]; gate [..., in] with as many elements as x (in = heads x D, the
// heads merged); weight [out, in]; y [..., out]. One pass writes the product's operand h (in bf16
// with bf16 products) and the norm's rstd; the node keeps x and gate (in bf16 in a SaveInBf16
// scope), rstd and the weights, never h or the normed x, which one pass makes again in backward.
// Results are those of swiglu_linear(gate, rmsnorm(x) with the heads merged, weight) bit for bit; in
// a SaveInBf16 scope the gradients of gate and weight read the normed x made again from x's bf16 copy
// (the unfused node keeps the normed x's copy), a few bf16 roundings apart.
Variable rmsnorm_gate_linear(const Variable& gate, const Variable& x, const Variable& norm_weight, double eps,
                             const Variable& weight);

// The SwiGLU MLP, y = (silu(x gate^T) * (x up^T)) down^T, as one node. gate and up [I, in] are the
// two blocks of `gate_up` [2 I, in] (Parameters::joined), so one product makes both outputs side by
// side [..., 2 I], which SwiGLU reads as they are (no split); the backward writes their gradient
// [..., 2 I] as it is the operand of the two products that follow (no join; in bf16 with bf16
// products: no conversion). It keeps x's product operand, the joined output (in bf16 in a SaveInBf16
// scope, written by the SwiGLU pass) and the weights, and recomputes silu(gate) * up. The tape sees
// gate and up themselves, as linears'. Results are those of swiglu_linear(linears(x, {gate, up}),
// down) up to the products' order of summation.
Variable swiglu_mlp(const Variable& x, const Variable& gate, const Variable& up, const Variable& gate_up,
                    const Variable& down);

// RMSNorm over the last dim: x [..., D], weight [D]. With groups G > 1, each of the G runs of D/G
// consecutive values is normalized on its own (a group norm: Mamba2's gated norm, fla's and
// mamba_ssm's RMSNormGated with group_size D/G); the weight still spans all D.
Variable rmsnorm(const Variable& x, const Variable& weight, double eps, int64_t groups = 1);
// The residual sum and its norm, one node and one pass: {s, y} with s = a + b and y = rmsnorm(s,
// weight) (one group per row). It keeps s (its bf16 copy, written by the same pass, in a SaveInBf16
// scope); the backward writes ds = (the gradient s's other readers gave) + the norm's part in one
// pass, out of place when that gradient is still shared, and passes ds on to a and b without a copy.
// Results are those of add then rmsnorm, bit for bit.
std::pair<Variable, Variable> add_rmsnorm(const Variable& a, const Variable& b, const Variable& weight, double eps);
// x / sqrt(sum(x^2) + eps) over the last dim.
Variable l2norm(const Variable& x, double eps = 1e-6);

// Rows of table [V, D] for ids (i32, any shape [...], on the table's device or the host): output
// [..., D]. Ids outside [0, V) throw.
Variable embedding(const Tensor& ids, const Variable& table);

// Causal depthwise convolution along time: x [B, T, C], weight [C, W], bias [C] (optional); with
// segments (segments.h), nothing is mixed across a sequence start.
Variable short_conv(const Variable& x, const Variable& weight, const Variable& bias = {},
                    const Segments& segments = {});

// Mean cross-entropy of logits [..., V] against targets (i32, [...], on the logits' device or the
// host) over the targets that are not ignore_index; a one-element result. Non-finite losses and
// out-of-range targets throw.
Variable cross_entropy(const Variable& logits, const Tensor& targets, int32_t ignore_index = -100);

// cross_entropy(linear(x, weight), targets): the mean cross-entropy of the logits x W^T without
// keeping them. It makes them a chunk of rows at a time (at most chunk_bytes of logits, one row at least), in the
// forward and again in backward, so the loss of a large vocabulary takes the memory of a chunk's
// logits and their gradient, not the whole batch's. The weight's bf16 copy is used as linear uses it.
// With one chunk (rows x vocabulary within the bound) its results are those of
// cross_entropy(linear(x, weight)) bit for bit.
// `seed`, when given, is the gradient backward will seed the loss with (backward({loss}, {seed}), as
// the trainer does): where the rows that take a loss are known on the host (host targets, or device
// targets under backend::CheckedDeviceTokens), the backward then runs in the forward pass, on each
// chunk's logits as they are made (no second product of the logits, no second read of them): the
// weight's gradient is added to there and x's is held until the node passes it on. The results are
// those without a seed, bit for bit; a backward given another gradient than the seed is an error.
constexpr size_t kLossChunkBytes = size_t(256) << 20;
Variable linear_cross_entropy(const Variable& x, const Variable& weight, const Tensor& targets,
                              int32_t ignore_index = -100, size_t chunk_bytes = kLossChunkBytes,
                              const Tensor& seed = {});

}  // namespace linattn::ops
