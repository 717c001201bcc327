#include "core/memory.h"

#include <cstdlib>
#include <cstring>

#include "core/cuda/runtime.h"

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
  ptr = cuda::allocate(padded);  // cudaMalloc alignment (256 B) covers kAlignment
}

Storage::~Storage() {
  if (device == Device::cpu) std::free(ptr);
  else cuda::release(ptr);
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
    // On a GPU the old blocks would otherwise stay in the allocator's cache beside the new one.
    if (device_ == Device::cuda) cuda::empty_cache();
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

int cuda_device_count() { return cuda::device_count(); }

bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace linattn
