// Mamba2's token mixer as an autograd op: one tape node whose backward is the hand-derived chunkwise
// (or recurrent) backward of the SSD scan (kernels/cpu/mamba2.h) and of the elementwise steps around it.
#pragma once

#include "autograd/mixers.h"

namespace linattn::ops {

// x [B, T, H, P]; dt [B, T, H]: the time step before its softplus (dt_bias included); A_log [H]
// (A = -exp(A_log)); B, C [B, T, G, N], head h reading group h / (H / G); D [H]; h0 [B, H, N, P]
// optional. o = SSD(x, softplus(dt), A, B, C, h0) + D x [B, T, H, P]; ht [B, H, N, P].
// options.scale is unused: Mamba2 has none.
MixerOutput mamba2(const Variable& x, const Variable& dt, const Variable& A_log, const Variable& B, const Variable& C,
                   const Variable& D, const Variable& h0, const MixerOptions& options = {});

// The op as an entry of the table of mixer ops (autograd/mixer_ops.h). Its inputs are those of
// fla's mamba_chunk_scan_combined and of the reference (tests/reference/): x, the time step dt after
// its softplus (> 0), A (< 0), B, C, D (optional: absent = no skip), h0; the call maps dt and A to
// the op's inputs by a differentiable step of its own, so the gradients are with respect to them.
struct MixerOpDescriptor;
extern const MixerOpDescriptor mamba2_op;

}  // namespace linattn::ops
