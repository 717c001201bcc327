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

Variable Linear::of_swiglu(const Parameters& p, const Variable& gate, const Variable& up) const {
  LINATTN_CHECK(bias < 0, "Linear::of_swiglu: a layer with a bias takes linear(swiglu(gate, up))");
  return ops::swiglu_linear(gate, up, p[weight]);
}

RMSNorm::RMSNorm(Parameters& p, const std::string& name, int64_t dim, double eps_, int64_t groups_)
    : eps(eps_), groups(groups_) {
  weight = p.add(name + ".weight", {dim}, Init::Constant(1), false);
}

Variable RMSNorm::operator()(const Parameters& p, const Variable& x) const {
  return ops::rmsnorm(x, p[weight], eps, groups);
}

MLP::MLP(Parameters& p, const std::string& prefix, int64_t hidden, int64_t intermediate, double std, double out_std)
    : gate_proj(p, prefix + ".gate_proj", hidden, intermediate, std),
      up_proj(p, prefix + ".up_proj", hidden, intermediate, std),
      down_proj(p, prefix + ".down_proj", intermediate, hidden, out_std) {}

Variable MLP::operator()(const Parameters& p, const Variable& x) const {
  return down_proj.of_swiglu(p, gate_proj(p, x), up_proj(p, x));
}

}  // namespace linattn
