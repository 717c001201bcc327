// The CUDA streams of the current device: every kernel of ours, every copy and every memset runs on
// the compute stream, in order; the communicator's sums run on the communication stream, after an
// event recorded on the compute stream. Both are created on first use, one pair per device, and are
// non-blocking (nothing of ours uses the legacy default stream).
// Declared without CUDA types so any layer may include it; CUDA code casts:
// static_cast<cudaStream_t>(linattn::cuda::compute_stream()). Without the CUDA backend they throw.
#pragma once

namespace linattn::cuda {

void* compute_stream();
void* comm_stream();

}  // namespace linattn::cuda
