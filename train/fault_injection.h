// A fault on one rank at one step, to test what a data-parallel run does when one of its ranks
// fails: LINATTN_INJECT_FAULT=KIND:RANK:STEP in the environment of every rank (mpirun -x passes it
// to other hosts). KIND is
//   error  the rank throws an error as it starts that step (the others are inside a collective),
//   nan    the rank's gradients of that step are all NaN (as after an overflow in its backward)
// STEP counts from 1, as the log does. Unset or empty: no fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace linattn {

struct InjectedFault {
  enum class Kind { error, nan };
  Kind kind = Kind::error;
  int rank = 0;
  int64_t step = 0;
};

// Parses a LINATTN_INJECT_FAULT value; throws an Error that shows the form when it is malformed.
InjectedFault parse_injected_fault(const std::string& spec);
// The fault that LINATTN_INJECT_FAULT asks for, if any.
std::optional<InjectedFault> injected_fault_from_env();
// "error on rank 1 at step 15"
std::string describe(const InjectedFault& fault);

}  // namespace linattn
