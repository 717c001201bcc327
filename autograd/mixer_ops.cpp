// The table of token-mixer ops (autograd/mixer_ops.h).
#include "autograd/mixer_ops.h"

#include <cmath>

#include "core/error.h"

namespace linattn::ops {

// Every op, one line each, in the table's order. OP(name) names the descriptor `name_op`, defined
// beside its op (autograd/mixers.cpp, autograd/mamba2.cpp); a name without one fails to link.
#define LINATTN_MIXER_OPS(OP) \
  OP(linear_attn)             \
  OP(gla)                     \
  OP(deltanet)                \
  OP(gated_deltanet)          \
  OP(attention)               \
  OP(mamba2)

#define DECLARE(name) extern const MixerOpDescriptor name##_op;
LINATTN_MIXER_OPS(DECLARE)
#undef DECLARE

const std::vector<const MixerOpDescriptor*>& all_mixer_ops() {
#define ADDRESS(name) &name##_op,
  static const std::vector<const MixerOpDescriptor*> all = {LINATTN_MIXER_OPS(ADDRESS)};
#undef ADDRESS
  return all;
}

const MixerOpDescriptor* find_mixer_op(const std::string& name) {
  for (const MixerOpDescriptor* op : all_mixer_ops())
    if (op->name == name) return op;
  return nullptr;
}

const MixerOpDescriptor& mixer_op_named(const std::string& name) {
  if (const MixerOpDescriptor* op = find_mixer_op(name)) return *op;
  std::string known;
  for (const MixerOpDescriptor* op : all_mixer_ops()) known += (known.empty() ? "" : ", ") + op->name;
  LINATTN_FAIL("unknown mixer op '", name, "' (known: ", known, ")");
}

std::string missing_kernels(const std::string& op, Device device) { return mixer_op_named(op).missing_kernels(device); }

std::string MixerOpDescriptor::missing_kernels(Device device) const {
  std::string missing;
  for (const EntryCheck& check : entries)
    if (std::string name = check(device); !name.empty()) missing += (missing.empty() ? "" : ", ") + name;
  return missing;
}

std::string MixerOpDescriptor::needs() const {
  std::string list;
  for (const OpInput& in : inputs)
    if (in.required) list += (list.empty() ? "" : ", ") + in.name;
  return name + " needs " + list;
}

OpCall default_call(const MixerOpDescriptor& op) {
  OpCall call;
  for (const OpAttribute& a : op.attributes) {
    if (a.choices.empty()) call.number[a.name] = 0;
    else call.text[a.name] = a.choices[0];
  }
  return call;
}

std::map<std::string, Tensor> random_inputs(const MixerOpDescriptor& op, const OpSizes& sizes, Rng& rng,
                                            bool with_optional) {
  std::map<std::string, Tensor> out;
  for (const OpInput& in : op.inputs) {
    if (!in.required && !with_optional) continue;
    Shape shape;
    for (const std::string& symbol : in.shape) {
      auto size = sizes.find(symbol);
      LINATTN_CHECK(size != sizes.end(), "random_inputs: ", op.name, "'s input ", in.name, " needs the size ", symbol);
      shape = shape.appended(size->second);
    }
    Tensor t = Tensor::empty(shape, DType::f64);
    rng.fill_uniform(t, in.lo, in.hi);
    if (in.unit_rows) {
      double* p = t.data<double>();
      const int64_t D = t.shape().last();
      for (int64_t r = 0; r < t.shape().rows(); ++r) {
        double n = 0;
        for (int64_t c = 0; c < D; ++c) n += p[r * D + c] * p[r * D + c];
        for (int64_t c = 0; c < D; ++c) p[r * D + c] /= std::sqrt(n);
      }
    }
    out[in.name] = t;
  }
  return out;
}

}  // namespace linattn::ops
