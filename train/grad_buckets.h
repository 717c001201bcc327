// Data-parallel gradient summing that overlaps with backward. The flat gradient buffer is cut into
// buckets: contiguous runs of whole parameters of at least `bucket_bytes` (the last bucket may be
// smaller), taken from the end of the buffer to its start, which is about the order backward
// finishes the parameters in (they are declared in forward order). During the last micro-batch's
// backward a bucket's sum starts as soon as every parameter in it has its final gradient, and
// the sums progress between tape nodes; finish() waits for them all.
//
// Buckets start strictly in index order, on every rank: MPI needs every rank to start the same
// collectives in the same order, also when backward failed on one rank and not on another.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/variable.h"
#include "layers/parameters.h"
#include "train/communicator.h"

namespace linattn {

class GradientBuckets {
 public:
  struct Bucket {
    int64_t begin = 0, end = 0;  // elements [begin, end) of the flat gradient buffer
    std::vector<int> params;     // the parameters in it, last first
  };

  GradientBuckets(const Parameters& params, int64_t bucket_bytes, Communicator& comm);
  GradientBuckets(const GradientBuckets&) = delete;  // the hooks point at this object
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // For the backward of the last micro-batch of a step: they start the buckets whose gradients are
  // final and let the started sums progress.
  const BackwardHooks& hooks() const { return hooks_; }
  // Starts the buckets backward did not start (all of them when it did not run or threw), waits for
  // every sum, and makes ready for the next step.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void on_final(size_t param);
  void start_next();

  const Parameters& params_;
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;   // by parameter
  std::vector<size_t> unfinished_;  // by bucket: parameters whose gradient is not final yet
  size_t next_ = 0;                 // the next bucket to start
  BackwardHooks hooks_;
};

}  // namespace linattn
