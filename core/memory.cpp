#include "core/memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/cuda/runtime.h"

namespace linattn {

namespace {
thread_local Arena* t_current_arena = nullptr;
}

// An arena's blocks and their free lists, shared by the Arena and by every slice it handed out, so
// that a slice may outlive its Arena (the blocks go when the last slice does).
class ArenaPool : public std::enable_shared_from_this<ArenaPool> {
 public:
  explicit ArenaPool(Device device) : device_(device) {}

  std::shared_ptr<Storage> allocate(size_t bytes, bool kept) {
    const size_t need = align_up(bytes == 0 ? 1 : bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto [block, offset] = find(need, kept);
    Block& b = blocks_[block];
    auto it = b.free.find(offset);
    const size_t length = it->second;
    b.free.erase(it);
    if (length > need) b.free.emplace(offset + need, length - need);
    used_ += need;
    allocated_ += need;
    peak_live_ = std::max(peak_live_, used_);
    phase_peak_ = std::max(phase_peak_, used_);
    b.peak_extent = std::max(b.peak_extent, extent(b));
    high_water_ = std::max(high_water_, footprint());
    std::shared_ptr<Storage> s(new Storage());
    s->ptr = static_cast<char*>(b.storage->ptr) + offset;
    s->bytes = bytes;
    s->device = device_;
    s->pool_ = shared_from_this();
    s->block_ = block, s->offset_ = offset, s->span_ = need;
    return s;
  }

  void release(const Storage& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (poison_) poison(s.ptr, s.span_);
    Block& b = blocks_[s.block_];
    size_t offset = s.offset_, length = s.span_;
    auto next = b.free.lower_bound(offset);
    if (next != b.free.end() && next->first == offset + length) {  // merge with the gap after
      length += next->second;
      next = b.free.erase(next);
    }
    if (next != b.free.begin()) {  // and with the gap before
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        length += prev->second;
        b.free.erase(prev);
      }
    }
    b.free.emplace(offset, length);
    used_ -= s.span_;
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t count[2] = {0, 0}, bytes[2] = {0, 0};
    for (const Block& b : blocks_) count[b.kept] += 1, bytes[b.kept] += b.peak_extent;
    if ((count[0] > 1 || count[1] > 1) && used_ == 0) {
      // Per part, one block as large as the parts of its blocks the step used: a request went to a
      // new block only when it did not fit at the end of the others, so this is more than the first
      // block held.
      blocks_.clear();
      // On a GPU the old blocks would otherwise stay in the allocator's cache beside the new one.
      if (device_ == Device::cuda) cuda::empty_cache();
      for (bool kept : {false, true})
        if (count[kept]) add_block(std::max<size_t>(bytes[kept], kAlignment), kept);
    }
    for (Block& b : blocks_) b.peak_extent = extent(b);
    allocated_ = 0;
    peak_live_ = phase_peak_ = used_;
    high_water_ = footprint();
  }

  size_t take_phase_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t peak = phase_peak_;
    phase_peak_ = used_;
    return peak;
  }

  void add_block(size_t bytes, bool kept = false) {
    Block b;
    b.kept = kept;
    b.storage = std::make_unique<Storage>(bytes, device_);
    b.free.emplace(0, bytes);
    if (poison_) poison(b.storage->ptr, bytes);
    blocks_.push_back(std::move(b));
  }

  size_t used() const { return locked(used_); }
  size_t high_water() const { return locked(high_water_); }
  size_t peak_live() const { return locked(peak_live_); }
  size_t allocated() const { return locked(allocated_); }
  size_t blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return blocks_.size();
  }
  size_t capacity() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t total = 0;
    for (const Block& b : blocks_) total += b.storage->bytes;
    return total;
  }
  void set_poison(bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    poison_ = on;
  }

 private:
  struct Block {
    std::unique_ptr<Storage> storage;
    std::map<size_t, size_t> free;  // offset -> length of each gap, merged; the block's free end too
    size_t peak_extent = 0;         // the most extent() has been since reset()
    bool kept = false;              // holds the slices allocated as kept (Arena::allocate)
  };

  // NaN bytes in every float type; on a GPU queued on the compute stream, after the slice's last use.
  void poison(void* ptr, size_t bytes) const {
    if (device_ == Device::cpu) return (void)std::memset(ptr, 0xFF, bytes);
    const std::vector<unsigned char> nan(bytes, 0xFF);
    cuda::upload_pageable(ptr, nan.data(), bytes);
  }

  size_t locked(const size_t& value) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value;
  }

  static bool is_end(const Block& b, const std::pair<const size_t, size_t>& gap) {
    return gap.first + gap.second == b.storage->bytes;
  }

  // Bytes from the start of b to the end of its highest live slice.
  static size_t extent(const Block& b) {
    if (b.free.empty()) return b.storage->bytes;
    const auto& last = *b.free.rbegin();
    return is_end(b, last) ? last.first : b.storage->bytes;
  }

  size_t footprint() const {
    size_t total = 0;
    for (const Block& b : blocks_) total += extent(b);
    return total;
  }

  // Where a slice of `need` bytes goes, among the blocks of its part (kept or not): the smallest gap
  // that holds it; else the free end of the first block with room there; else the start of a new
  // block (at least as large as the part's others together, and 64 MiB). Gaps before ends keep the
  // blocks' used parts, and so the peak, low.
  std::pair<size_t, size_t> find(size_t need, bool kept) {
    size_t best_block = 0, best_offset = 0, best_length = SIZE_MAX;
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].kept == kept)
        for (const auto& gap : blocks_[i].free)
          if (!is_end(blocks_[i], gap) && gap.second >= need && gap.second < best_length)
            best_block = i, best_offset = gap.first, best_length = gap.second;
    if (best_length != SIZE_MAX) return {best_block, best_offset};
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].kept == kept && !blocks_[i].free.empty()) {
        const auto& last = *blocks_[i].free.rbegin();
        if (is_end(blocks_[i], last) && last.second >= need) return {i, last.first};
      }
    size_t held = 0;
    for (const Block& b : blocks_)
      if (b.kept == kept) held += b.storage->bytes;
    add_block(std::max(need, std::max(held, size_t{64} << 20)), kept);
    return {blocks_.size() - 1, 0};
  }

  mutable std::mutex mutex_;
  Device device_;
  std::vector<Block> blocks_;
  size_t used_ = 0, high_water_ = 0, peak_live_ = 0, phase_peak_ = 0, allocated_ = 0;
  bool poison_ = false;
};

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
  if (pool_) pool_->release(*this);
  else if (device == Device::cpu) std::free(ptr);
  else cuda::release(ptr);
}

Arena::Arena(Device device, size_t initial_bytes) : device_(device), pool_(std::make_shared<ArenaPool>(device)) {
  if (initial_bytes) pool_->add_block(initial_bytes);
}

std::shared_ptr<Storage> Arena::allocate(size_t bytes, bool kept) { return pool_->allocate(bytes, kept); }
void Arena::reset() { pool_->reset(); }
size_t Arena::used() const { return pool_->used(); }
size_t Arena::high_water() const { return pool_->high_water(); }
size_t Arena::peak_live() const { return pool_->peak_live(); }
size_t Arena::take_phase_peak() { return pool_->take_phase_peak(); }
size_t Arena::allocated() const { return pool_->allocated(); }
size_t Arena::capacity() const { return pool_->capacity(); }
size_t Arena::blocks() const { return pool_->blocks(); }
void Arena::poison_freed(bool on) { pool_->set_poison(on); }

ArenaScope::ArenaScope(Arena& arena) : previous_(t_current_arena) { t_current_arena = &arena; }
ArenaScope::~ArenaScope() { t_current_arena = previous_; }
Arena* current_arena() { return t_current_arena; }

int cuda_device_count() { return cuda::device_count(); }

bool cuda_available() { return cuda_device_count() > 0; }

}  // namespace linattn
