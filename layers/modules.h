// Basic modules built from autograd ops: Linear, RMSNorm, the SwiGLU MLP.
// A module holds parameter ids; its forward takes the Parameters that own them.
#pragma once

#include "autograd/ops.h"
#include "layers/parameters.h"

namespace linattn {

struct Linear {
  int weight = -1, bias = -1;
  int64_t in = 0, out = 0;
  Linear() = default;
  // weight [out, in] drawn from normal(0, std); bias zero.
  Linear(Parameters& p, const std::string& name, int64_t in, int64_t out, double std, bool with_bias = false);
  Variable operator()(const Parameters& p, const Variable& x) const;
  double flops_per_row() const { return 2.0 * double(in) * double(out); }  // forward
};

// Projections of one input by linear layers without biases declared one after another (q, k, v,
// ...): one node and one product (ops::linears) when their weights lie back to back
// (Parameters::joined), else a linear each. Their outputs, in order.
std::vector<Variable> project(const Parameters& p, const Variable& x, const std::vector<const Linear*>& layers);

struct RMSNorm {
  int weight = -1;
  double eps = 1e-6;
  int64_t groups = 1;  // > 1: each of `groups` equal runs of the dim normalized on its own (ops::rmsnorm)
  RMSNorm() = default;
  RMSNorm(Parameters& p, const std::string& name, int64_t dim, double eps, int64_t groups = 1);
  Variable operator()(const Parameters& p, const Variable& x) const;
  // {a + b, the norm of a + b}: a residual sum and its norm in one node (ops::add_rmsnorm; groups 1).
  std::pair<Variable, Variable> after_add(const Parameters& p, const Variable& a, const Variable& b) const;
};

// out(silu(gate) * norm(x)), the gated output of GLA and Gated DeltaNet, in one node that keeps no
// product (ops::rmsnorm_gate_linear): x [..., heads, D] the heads' outputs, norm over D (one group),
// gate [..., heads x D]; out without a bias.
Variable gated_norm_output(const Parameters& p, const Linear& out, const Variable& gate, const RMSNorm& norm,
                           const Variable& x);

// down(silu(gate(x)) * up(x)) as one node (ops::swiglu_mlp) over gate's and up's weights joined.
struct MLP {
  Linear gate_proj, up_proj, down_proj;
  MLP() = default;
  MLP(Parameters& p, const std::string& prefix, int64_t hidden, int64_t intermediate, double std, double out_std);
  Variable operator()(const Parameters& p, const Variable& x) const;
};

}  // namespace linattn
