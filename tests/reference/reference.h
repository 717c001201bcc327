// Naive references for the token mixers, written from ../shared/design/ops.md alone: the linear
// mixers token by token, softmax attention as its O(T^2) definition. They share no code with
// kernels/ or autograd/ (only core/'s Shape for array shapes), so a convention that a chunk kernel
// and its own recurrent form get wrong together (a gate applied after the update, a missing scale)
// shows up as a disagreement with these.
//
// The gradients are a plain reverse pass through the same token-by-token loop, differentiating each
// forward line in turn; reference_test.cpp checks them against central finite differences of
// forward(), so they do not rest on the kernels' hand-derived backward either.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/shape.h"

namespace linattn::reference {

// A float64 array, row-major: activations [B, T, H, D], per-head scalars [B, T, H], states [B, H, dk, dv].
struct Array {
  Shape shape;
  std::vector<double> data;
};
using Arrays = std::map<std::string, Array>;

// One mixer call, as linattn-ops takes it (see its usage text and the README).
struct Problem {
  std::string op;  // linear_attn | gla | deltanet | gated_deltanet | attention | mamba2
  // q, k, v; g (gla), beta (deltanets), a (gated_deltanet); optional h0 (linear mixers) and z0
  // (normalized linear attention); do, dht and dzt: the upstream gradients of o, ht and zt.
  // mamba2 instead of q, k, v: x [B, T, H, P], dt [B, T, H], A [H], B and C [B, T, G, N] (its output
  // y is called o here, its state is [B, H, N, P]).
  Arrays in;
  double scale = 0;                      // 0 = dk^-1/2
  std::string feature_map = "identity";  // linear_attn: identity | elu1 | relu
  bool normalize = false;                // linear_attn
  int64_t window = 0;                    // attention: 0 = global
};

// The inputs that have gradients (all of p.in but do and dht), in a fixed order.
std::vector<std::string> differentiable_inputs(const Problem& p);

// o [B, T, H, dv]; ht [B, H, dk, dv] for the linear mixers (mamba2: [B, H, N, P]); zt [B, H, dk] for
// the normalized form.
Arrays forward(const Problem& p);

// d<name> for every differentiable input: the gradient of sum(o * do) + sum(ht * dht) + sum(zt * dzt).
Arrays backward(const Problem& p);

}  // namespace linattn::reference
