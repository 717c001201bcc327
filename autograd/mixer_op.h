// What every token-mixer op (autograd/mixers.h, autograd/mamba2.h) shares after its own shape and
// range checks: the checks of values, and mixer_op, which runs the backend's entries once over the
// batch (its documents as MixerArgs::seqs) and records the tape node. Internal to autograd/.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "autograd/mixers.h"
#include "autograd/op_support.h"
#include "kernels/backend.h"

namespace linattn::ops::detail {

// The sizes of a mixer call (kernels/backend.h's MixerArgs); G: q and k heads when groups of
// heads share them (0 = H).
struct Sizes {
  int64_t B, T, H, Dk, Dv, G = 0;
};

// "q [2, 8, 4, 16], k [...]" for the defined ones: for shape errors.
std::string shape_list(std::initializer_list<std::pair<const char*, const Variable*>> named);

constexpr double kMaxFinite = std::numeric_limits<double>::max();

// Throws naming the op, the input and the first bad entry when a value is NaN or outside [lo, hi].
// Device tensors are not read back here (that would synchronize every op): on a device, a NaN
// shows in the loss and the gradient norm, which the trainer checks every step.
void check_values(const char* op, const char* name, const Variable& x, double lo, double hi, const char* range);
void check_finite(const char* op, const char* name, const Variable& x);

// A mixer op's inputs (undefined when absent): their values go to the kernels (MixerArgs' fields of
// the same names), and their gradients are what the backward writes.
struct MixerVars {
  Variable q, k, v, gate, decay, rate, skip, h0, z0;
};

// A mixer's entries of the backend table: its forward, its backward, and the size of the `saved`
// buffer of its chunk form on the device's column.
struct MixerEntries {
  const backend::Kernel<void(const backend::MixerArgs&)>& forward;
  const backend::Kernel<void(const backend::MixerArgs&)>& backward;
  const backend::Kernel<int64_t(const backend::MixerArgs&)>& saved_size;
};

// Checks the `finite` inputs, allocates the outputs (o [B, T, H, Dv], ht [B, H, Dk, Dv], zt when
// normalized) and (chunk form) the `saved` elements the device's column asks for, runs the `forward`
// entry once over the batch with options.segments as its sequences (MixerArgs::seqs), and records one
// tape node over `inputs` whose backward runs the `backward` entry once. scale: options.scale, or
// Dk^-1/2 when 0.
MixerOutput mixer_op(const char* op, std::initializer_list<const Variable*> inputs,
                     std::initializer_list<std::pair<const char*, const Variable*>> finite, const Sizes& s,
                     const MixerOptions& options, bool normalize, FeatureMap phi, const MixerVars& in,
                     const MixerEntries& entries);

}  // namespace linattn::ops::detail
