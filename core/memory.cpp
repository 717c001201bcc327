#include "core/memory.h"

#include <cstdlib>
#include <cstring>

#ifdef LINATTN_CUDA
#include <cuda_runtime.h>
#endif

namespace linattn {

namespace {
thread_local Arena* t_current_arena = nullptr;
}

Storage::Storage(size_t n, Device d) : bytes(n), device(d) {
  size_t padded = align_up(n == 0 ? kAlignment : n);
  if (d == Device::cpu) {
    ptr = std::aligned_alloc(kAlignment, padded);
    LINATTN_CHECK(ptr, "out of host memory allocating ", n, " bytes");
    return;
  }
#ifdef LINATTN_CUDA
  cudaError_t err = cudaMalloc(&ptr, padded);
  LINATTN_CHECK(err == cudaSuccess, "cudaMalloc of ", n, " bytes failed: ", cudaGetErrorString(err));
#else
  LINATTN_FAIL("a CUDA tensor was requested but linattn was built without CUDA (configure with -DLINATTN_CUDA=ON)");
#endif
}

Storage::~Storage() {
  if (device == Device::cpu) {
    std::free(ptr);
    return;
  }
#ifdef LINATTN_CUDA
  cudaFree(ptr);
#endif
}

Arena::Arena(Device device, size_t initial_bytes) : device_(device) {
  if (initial_bytes) blocks_.push_back({std::make_shared<Storage>(initial_bytes, device), 0});
}

std::pair<std::shared_ptr<Storage>, size_t> Arena::allocate(size_t bytes) {
  size_t need = align_up(bytes == 0 ? 1 : bytes);
  if (blocks_.empty() || blocks_.back().used + need > blocks_.back().storage->bytes) {
    size_t block = std::max(need, std::max<size_t>(capacity(), size_t{64} << 20));
    blocks_.push_back({std::make_shared<Storage>(block, device_), 0});
  }
  Block& b = blocks_.back();
  size_t offset = b.used;
  b.used += need;
  used_ += need;
  high_water_ = std::max(high_water_, used_);
  return {b.storage, offset};
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    blocks_.clear();
    blocks_.push_back({std::make_shared<Storage>(high_water_, device_), 0});
  }
  for (Block& b : blocks_) b.used = 0;
  used_ = 0;
}

size_t Arena::capacity() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.storage->bytes;
  return total;
}

ArenaScope::ArenaScope(Arena& arena) : previous_(t_current_arena) { t_current_arena = &arena; }
ArenaScope::~ArenaScope() { t_current_arena = previous_; }
Arena* current_arena() { return t_current_arena; }

int cuda_device_count() {
#ifdef LINATTN_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace linattn
