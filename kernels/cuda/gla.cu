#include "kernels/cuda/gla.h"

#include "kernels/cuda/linear_scan.cuh"

namespace linattn::cuda {

void gla_forward(const scan::Mixer<float>& m) {
  LINATTN_CHECK(m.g, "gla: the log-gate g is required");
  scan::DeviceRun run("gla");
  scan::gla_forward(run, m);
}

void gla_backward(const scan::Mixer<float>& m) {
  LINATTN_CHECK(m.g, "gla: the log-gate g is required");
  scan::DeviceRun run("gla");
  scan::gla_backward(run, m);
}

}  // namespace linattn::cuda
