#include "core/cuda/stream.h"

namespace linattn::cuda {

// The legacy default stream until the device runtime owns a stream of its own.
void* compute_stream() { return nullptr; }

}  // namespace linattn::cuda
