// Activation recomputation (train.recompute, docs/recompute.md): a region of ops (a decoder block)
// whose backward replays its forward instead of keeping what the forward made.
//
// checkpoint(mode, f, x, params) returns y = f(x). It runs f with recording off, then records one
// node on the thread's tape in place of f's nodes. That node's backward replays f(x) with recording
// on into a tape of its own (TapeScope), runs that tape with y's gradient and drops it: what the
// replay made is released as soon as the region's backward is done. The replay's nodes accumulate
// into the gradients of x and of the parameters, in the order f's own nodes would have.
//
//   full:      the node keeps x only (the block's input); the replay recomputes everything.
//              In a SaveInBf16 scope (train.precision: bf16, autograd/saved.h) x is kept in bf16, as
//              every activation a node keeps is, and both modes replay from it.
//   selective: the first run keeps the outputs of the expensive ops: the matrix products (linear) and
//              softmax attention (its output and row log-sum-exp). The replay takes those instead of
//              computing them again, and recomputes the cheap, memory-heavy rest: norms, SwiGLU,
//              activations and gates, short convolutions, RoPE, L2 norms, residual sums, and the
//              linear mixers' chunk cores (their output and per-chunk states). The nodes the replay
//              records save the recomputed tensors themselves (a product's node saves the recomputed
//              norm output it multiplies), so those exist only while one region's backward runs.
//
// Gradients are bit for bit those of f run directly (recompute: none): the replay runs the same
// kernels on the same values and records the same nodes in the same order. Under bf16 saving the
// replay starts from x, and takes the kept products, rounded to bf16, so gradients differ from
// none's by bf16 roundings.
#pragma once

#include <functional>
#include <vector>

#include "autograd/variable.h"

namespace linattn::ops {

enum class Recompute { none, selective, full };
const char* recompute_name(Recompute mode);  // "none", "selective", "full"

// y = f(x) as above; none (or recording off, or nothing that needs a gradient): f(x) itself.
// params: every parameter f reads that needs a gradient. The node declares it writes their
// gradients, so BackwardHooks (the data-parallel gradient buckets) take them as final after it:
// a parameter left out would be summed before its gradient is. f must make the same ops on every
// call, and must not hold references that outlive the call (it is called again in backward).
Variable checkpoint(Recompute mode, std::function<Variable(const Variable&)> f, const Variable& x,
                    const std::vector<Variable>& params);

namespace detail {

// The ops whose outputs selective recomputation keeps (the others it recomputes).
enum class Kept { product, attention };

// For an op of kind `kind`, before it computes: in the replay of a region that kept its outputs,
// sets `out` to what the same call made in the region's first run and returns true (the op skips
// its computation and records its node as usual); else returns false. An output kept in bf16 comes
// widened back into float32, and `copy` (where given) is set to the bf16 copy as kept, for the op to
// hand its Variable (Variable::set_bf16): the replay's readers then take it, as they took it in the
// first run, and convert nothing. widen false: the output comes as it was kept, for an op whose
// kernels read bf16 (ops::swiglu_mlp).
bool take_kept(Kept kind, Tensor& out, Tensor* copy = nullptr, bool widen = true);
// After it computed: in the first run of a region that keeps `kind`, keeps `out` for the replay. In a
// SaveInBf16 scope (autograd/saved.h) it keeps out's bf16 copy: `*copy` where the op wrote one (the
// split of ops::linears), else out rounded here, which is then set in
// `*copy` (where given) for the op's Variable. take_kept widens it back.
void keep(Kept kind, const Tensor& out, Tensor* copy = nullptr);
// keep, for an output kept exactly as it is in any scope (attention's float32 log-sum-exp, the MLP's
// gate and up as their product wrote them).
void keep_exact(Kept kind, const Tensor& out);
// Whether keep keeps outputs of `kind` here (the first run of a region that keeps them): an op can
// then make an output it would not keep otherwise in the kept part of the arena (ops::swiglu_mlp).
bool keeping(Kept kind);

}  // namespace detail

}  // namespace linattn::ops
