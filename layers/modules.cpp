#include "layers/modules.h"

namespace linattn {

Linear::Linear(Parameters& p, const std::string& name, int64_t in_, int64_t out_, double std, bool with_bias)
    : in(in_), out(out_) {
  weight = p.add(name + ".weight", {out, in}, Init::Normal(std), true);
  if (with_bias) bias = p.add(name + ".bias", {out}, Init::Constant(0), false);
}

Variable Linear::operator()(const Parameters& p, const Variable& x) const {
  return ops::linear(x, p[weight], bias >= 0 ? p[bias] : Variable());
}


std::vector<Variable> project(const Parameters& p, const Variable& x, const std::vector<const Linear*>& layers) {
  bool joinable = layers.size() > 1 && layers.size() <= 8;
  for (size_t i = 0; i < layers.size(); ++i)
    joinable = joinable && layers[i]->bias < 0 && layers[i]->weight == layers[0]->weight + int(i);
  const Variable joined = joinable ? p.joined(layers[0]->weight, int(layers.size())) : Variable();
  std::vector<Variable> weights;
  for (const Linear* l : layers) weights.push_back(p[l->weight]);
  if (joined.defined()) return ops::linears(x, weights, joined);
  std::vector<Variable> outs;
  for (const Linear* l : layers) outs.push_back((*l)(p, x));
  return outs;
}

RMSNorm::RMSNorm(Parameters& p, const std::string& name, int64_t dim, double eps_, int64_t groups_)
    : eps(eps_), groups(groups_) {
  weight = p.add(name + ".weight", {dim}, Init::Constant(1), false);
}

Variable RMSNorm::operator()(const Parameters& p, const Variable& x) const {
  return ops::rmsnorm(x, p[weight], eps, groups);
}

Variable gated_norm_output(const Parameters& p, const Linear& out, const Variable& gate, const RMSNorm& norm,
                           const Variable& x) {
  LINATTN_CHECK(out.bias < 0 && norm.groups == 1, "gated_norm_output: an output layer with a bias or a group norm");
  return ops::rmsnorm_gate_linear(gate, x, p[norm.weight], norm.eps, p[out.weight]);
}

std::pair<Variable, Variable> RMSNorm::after_add(const Parameters& p, const Variable& a, const Variable& b) const {
  LINATTN_CHECK(groups == 1, "RMSNorm::after_add: a group norm (", groups, " groups) after a residual add");
  return ops::add_rmsnorm(a, b, p[weight], eps);
}

MLP::MLP(Parameters& p, const std::string& prefix, int64_t hidden, int64_t intermediate, double std, double out_std)
    : gate_proj(p, prefix + ".gate_proj", hidden, intermediate, std),
      up_proj(p, prefix + ".up_proj", hidden, intermediate, std),
      down_proj(p, prefix + ".down_proj", intermediate, hidden, out_std) {}

Variable MLP::operator()(const Parameters& p, const Variable& x) const {
  // the constructor declares gate's and up's weights one after the other: they lie back to back
  return ops::swiglu_mlp(x, p[gate_proj.weight], p[up_proj.weight], p.joined(gate_proj.weight, 2), p[down_proj.weight]);
}

}  // namespace linattn
