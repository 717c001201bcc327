// LINATTN_INJECT_FAULT's values: the two kinds, and malformed values refused with the form shown.
// What a run does with a fault is tested under a real mpirun in mpi_test.cpp.
#include "train/fault_injection.h"

#include "testing.h"

namespace linattn {
namespace {

TEST(InjectedFault, ParsesKindRankAndStep) {
  InjectedFault f = parse_injected_fault("error:1:15");
  EXPECT_EQ(f.kind, InjectedFault::Kind::error);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.step, 15);
  f = parse_injected_fault("nan:0:3");
  EXPECT_EQ(f.kind, InjectedFault::Kind::nan);
  EXPECT_EQ(describe(f), "NaN gradients on rank 0 at step 3");
}

TEST(InjectedFault, MalformedValuesAreRefusedShowingTheForm) {
  for (const char* spec : {"error", "error:1", "boom:1:5", "error:-1:5", "error:1:0", "error:1:5:extra", "nan:x:5"}) {
    SCOPED_TRACE(spec);
    try {
      parse_injected_fault(spec);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LINATTN_INJECT_FAULT='" + std::string(spec) +
                                           "': expected KIND:RANK:STEP with KIND error or nan"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace linattn
