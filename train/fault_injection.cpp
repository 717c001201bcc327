#include "train/fault_injection.h"

#include <cstdlib>
#include <regex>

#include "core/error.h"

namespace linattn {

InjectedFault parse_injected_fault(const std::string& spec) {
  std::smatch m;
  LINATTN_REQUIRE(std::regex_match(spec, m, std::regex("(error|nan):([0-9]{1,6}):([0-9]{1,12})")) &&
                      std::stoll(m[3]) > 0,
                  "LINATTN_INJECT_FAULT='", spec, "': expected KIND:RANK:STEP with KIND error or nan, a rank from 0 ",
                  "and a step from 1 (e.g. error:1:15), or leave it unset");
  InjectedFault f;
  f.kind = m[1] == "nan" ? InjectedFault::Kind::nan : InjectedFault::Kind::error;
  f.rank = std::stoi(m[2]);
  f.step = std::stoll(m[3]);
  return f;
}

std::optional<InjectedFault> injected_fault_from_env() {
  const char* spec = std::getenv("LINATTN_INJECT_FAULT");
  if (!spec || !*spec) return std::nullopt;
  return parse_injected_fault(spec);
}

std::string describe(const InjectedFault& fault) {
  return std::string(fault.kind == InjectedFault::Kind::nan ? "NaN gradients" : "an error") + " on rank " +
         std::to_string(fault.rank) + " at step " + std::to_string(fault.step);
}

}  // namespace linattn
