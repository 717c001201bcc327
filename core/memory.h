// Device memory: 64-byte aligned storage, and the arena that activations and gradients come from.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace linattn {

constexpr size_t kAlignment = 64;

inline size_t align_up(size_t n, size_t a = kAlignment) { return (n + a - 1) / a * a; }

class ArenaPool;  // core/memory.cpp

// A block of device memory; frees itself when the last tensor viewing it is gone. A slice of an
// Arena is a Storage too: it goes back to its arena instead of being freed.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::cpu;

  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

 private:
  friend class ArenaPool;
  Storage() = default;
  std::shared_ptr<ArenaPool> pool_;  // set on an arena's slices
  size_t block_ = 0, offset_ = 0, span_ = 0;  // where in the pool (span_: the aligned size)
};

// The allocator of activations and gradients. allocate() hands out aligned slices of one or a few
// large blocks; a slice goes back to a free list when the last tensor viewing it is gone, and the
// next requests reuse it (best fit among the gaps; the untouched end of a block only when no gap
// fits; neighbouring gaps are merged), so the memory a step needs is its peak of live bytes, not
// the sum of its allocations. The bookkeeping is on the host; on a GPU every kernel that touches a
// slice runs on the one compute stream, in order, so a slice reused after a free is safe there too.
// A block is taken from the system only when no gap and no block end fits; reset() (once per step)
// merges the blocks of a step that needed several into one (one per part: the kept slices' and the
// others'), so a steady-state step takes nothing.
class Arena {
 public:
  explicit Arena(Device device = Device::cpu, size_t initial_bytes = 0);

  // A fresh slice of at least `bytes` bytes, 64-byte aligned; its contents are undefined. `kept`:
  // for what a tape node keeps until its backward runs (Tensor::scratch_kept): such slices come from
  // blocks of their own, apart from the step's short-lived ones, so that they are not scattered
  // among the gaps the short-lived ones leave (the high-water mark counts both parts).
  std::shared_ptr<Storage> allocate(size_t bytes, bool kept = false);
  // Starts a new step: the peak and the sum count from here; when the step took more than one block
  // and no slice is live, the blocks become one that holds the step.
  void reset();

  size_t used() const;        // bytes of the live slices (each rounded up to 64)
  size_t high_water() const;  // the peak since reset() of the bytes the live slices span in their
                              // blocks (live bytes plus the gaps below them): what the step needs
  size_t peak_live() const;   // the peak since reset() of used()
  // The peak of used() since the last call (or reset()); the next call counts from what is live
  // now. Splits a step's peak into the parts of the step (the memory plan's phases).
  size_t take_phase_peak();
  size_t allocated() const;   // the bytes handed out since reset(), freed or not (a bump allocator's need)
  size_t capacity() const;    // bytes of the blocks held
  size_t blocks() const;
  Device device() const { return device_; }
  // For tests: fill each slice with NaN bytes when it is freed, so that a read after the free (or
  // of a fresh slice before it was written) shows in the results.
  void poison_freed(bool on);

 private:
  Device device_;
  std::shared_ptr<ArenaPool> pool_;
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
