#include "kernels/cuda/linear_attn.h"

#include "kernels/cuda/linear_scan.cuh"

namespace linattn::cuda {

void linear_attention_forward(const scan::Mixer<float>& m) {
  scan::DeviceRun run("linear_attention");
  scan::linear_attention_forward(run, m);
}

void linear_attention_backward(const scan::Mixer<float>& m) {
  LINATTN_CHECK(!m.normalize || m.o, "linear_attention: the normalized backward on CUDA needs the forward's output o");
  scan::DeviceRun run("linear_attention");
  scan::linear_attention_backward(run, m);
}

}  // namespace linattn::cuda
