// The token mixers' autograd ops as one table: for each op its inputs (name, shape, the values a
// random problem draws), its attributes, how to call it, and the backend entries it runs (from
// which the devices that can run it follow). linattn-ops, the benchmarks, the layers' descriptors
// (layers/mixer.h) and the tests iterate over this table or look an op up in it; none of them
// switches on an op's name. A new op is its descriptor, defined beside the op, plus one line in
// autograd/mixer_ops.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/mixers.h"
#include "core/rng.h"

namespace linattn::ops {

// The size symbols of the ops' shapes: batch B, length T, heads H, key/value heads Hkv
// (attention), groups G (Mamba2's B and C), key dim dk (Mamba2's N), value dim dv (Mamba2's P).
using OpSizes = std::map<std::string, int64_t>;

// One input of an op. Its shape is written in the size symbols; a random problem draws its values
// uniformly in [lo, hi] (the ranges the layers give it), then L2-normalizes each row when unit_rows.
// Made by op_input and the builders after it: op_input("g", {"B", "T", "H", "dk"}, "log-gate, <= 0").values(-1, -0.01).
struct OpInput {
  std::string name;                // "q": also the name of its dataset in linattn-ops' files
  std::vector<std::string> shape;  // {"B", "T", "H", "dk"}
  std::string doc;                 // what the values are
  bool required = true;
  double lo = -1, hi = 1;
  bool unit_rows = false;

  OpInput& optional() {
    required = false;
    return *this;
  }
  OpInput& values(double low, double high) {
    lo = low, hi = high;
    return *this;
  }
  OpInput& unit_norm_rows() {
    unit_rows = true;
    return *this;
  }
};

inline OpInput op_input(std::string name, std::vector<std::string> shape, std::string doc) {
  OpInput in;
  in.name = std::move(name), in.shape = std::move(shape), in.doc = std::move(doc);
  return in;
}

// One attribute of an op (an HDF5 attribute in linattn-ops' files): a name from `choices` (the
// first is the default), or, with no choices, a whole number >= 0 (default 0).
struct OpAttribute {
  std::string name;
  std::vector<std::string> choices;
  std::string doc;
};

// What a call of an op gets: its inputs by name (the optional ones only when given), the values of
// its attributes (every attribute: the default when not given) and the mixer options.
struct OpCall {
  std::map<std::string, Variable> in;
  std::map<std::string, std::string> text;  // choice attributes
  std::map<std::string, int64_t> number;    // whole-number attributes
  MixerOptions options;

  // The input named `name`, or an undefined Variable when it was not given.
  Variable input(const std::string& name) const {
    auto it = in.find(name);
    return it == in.end() ? Variable() : it->second;
  }
};

// A backend entry an op runs: its name when `device` has no kernel for it, else "".
using EntryCheck = std::function<std::string(Device device)>;
template <class Kernel>
EntryCheck entry(const Kernel& k) {
  return [&k](Device d) { return k.has(d) ? std::string() : std::string(k.op); };
}

struct MixerOpDescriptor {
  std::string name;  // "gla"
  std::string summary;
  std::vector<OpInput> inputs;
  std::vector<OpAttribute> attributes;
  // A linear mixer: a chunk and a recurrent form (MixerOptions::form) and a final state ht. Softmax
  // attention has neither.
  bool recurrent = true;
  // Runs the op; its outputs by name: "o", and "ht", "zt" where the op has them. Throws naming the
  // input or attribute at fault.
  std::function<std::map<std::string, Variable>(const OpCall& call)> run;
  std::vector<EntryCheck> entries;

  // The op's entries that have no kernel on `device`, comma-separated ("gla_forward, gla_backward"); "" when all do.
  std::string missing_kernels(Device device) const;
  // "gla needs q, k, v, g": the required inputs, for messages.
  std::string needs() const;
};

// Every op, in the order of autograd/mixer_ops.cpp.
const std::vector<const MixerOpDescriptor*>& all_mixer_ops();
// The op named `name`, or nullptr.
const MixerOpDescriptor* find_mixer_op(const std::string& name);
// The op named `name`; throws naming the known ones.
const MixerOpDescriptor& mixer_op_named(const std::string& name);
// The entries the op named `name` runs that have no kernel on `device` (MixerOpDescriptor::missing_kernels).
std::string missing_kernels(const std::string& op, Device device);

// A call of op with every attribute at its default (the first choice, or 0) and no inputs yet.
OpCall default_call(const MixerOpDescriptor& op);

// A random problem for op: a float64 host tensor for each input (the optional ones too when
// with_optional), shaped by `sizes` (every symbol the op's shapes use), drawn from rng.
std::map<std::string, Tensor> random_inputs(const MixerOpDescriptor& op, const OpSizes& sizes, Rng& rng,
                                            bool with_optional);

}  // namespace linattn::ops
