// The CUDA stream every kernel of ours launches on. Declared without CUDA types so any layer may
// include it; the CUDA code casts it: static_cast<cudaStream_t>(linattn::cuda::compute_stream()).
// Without the CUDA backend it returns nullptr and nothing launches.
#pragma once

namespace linattn::cuda {

void* compute_stream();

}  // namespace linattn::cuda
