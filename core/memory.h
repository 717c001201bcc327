// Device memory: 64-byte aligned storage, and the activation arena that is reset every step.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace linattn {

constexpr size_t kAlignment = 64;

inline size_t align_up(size_t n, size_t a = kAlignment) { return (n + a - 1) / a * a; }

// A block of device memory; frees itself when the last tensor viewing it is gone.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::cpu;

  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// A bump allocator for activations. allocate() hands out aligned slices of large blocks; reset()
// forgets them all at once (call it once per training step, after backward). When a step needed
// more than one block, reset() replaces them with a single block of the high-water size, so a
// steady-state step makes no allocation at all.
class Arena {
 public:
  explicit Arena(Device device = Device::cpu, size_t initial_bytes = 0);

  // Returns the storage and the byte offset of a fresh slice of `bytes` bytes.
  std::pair<std::shared_ptr<Storage>, size_t> allocate(size_t bytes);
  void reset();

  size_t used() const { return used_; }
  size_t high_water() const { return high_water_; }
  size_t capacity() const;
  Device device() const { return device_; }

 private:
  struct Block {
    std::shared_ptr<Storage> storage;
    size_t used = 0;
  };
  Device device_;
  std::vector<Block> blocks_;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

// While an ArenaScope is alive on a thread, Tensor::scratch() allocates from its arena.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena* previous_;
};

Arena* current_arena();

// CUDA runtime queries; without the CUDA backend they report no device.
int cuda_device_count();
bool cuda_available();

}  // namespace linattn
