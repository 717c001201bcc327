// Data-parallel communication. One Communicator per process: MPI across processes launched by
// mpirun (host buffers, CPU training), NCCL across GPUs (device buffers; its unique id travels over
// MPI), or a single process that talks to nobody. The trainer sums the flat gradient buffer through
// it, bucket by bucket while backward runs (train/grad_buckets.h), and reduces losses and
// validation sums.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace linattn {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual int local_rank() const = 0;   // rank among the processes on this machine
  virtual int local_size() const = 0;
  virtual const char* backend() const = 0;
  // Whether start_allreduce_sum takes tensors on `device` (MPI's, and by default: host memory only).
  virtual bool sums_on(Device device) const { return device == Device::cpu; }

  // Starts an in-place sum across ranks of a contiguous tensor (f32, f64 or i32) without waiting
  // for it: `t` must not be read or written until wait_all() returns. Every rank must start the
  // same sums in the same order.
  virtual void start_allreduce_sum(const Tensor& t) = 0;
  // Lets the started sums progress (MPI moves non-blocking collectives only inside MPI calls): call
  // it often while computing something else.
  virtual void poll() = 0;
  // Waits until every started sum is complete: on the host for host tensors; for device tensors
  // (NCCL) the compute stream waits, so that the kernels and copies queued after it see the sums,
  // and the host goes on.
  virtual void wait_all() = 0;
  // In-place sum of doubles across ranks.
  virtual void allreduce_sum(double* values, int count) = 0;
  // Throws on every rank when the ranks' strings differ (the message names the rank that differs).
  virtual void check_same(const std::string& value, const char* what) = 0;
  virtual void barrier() = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // The host each rank runs on, by rank (a collective: every rank calls it); empty where unknown.
  virtual std::vector<std::string> host_names() { return {}; }
  // Ends every rank's process (after a fatal error on this one), so that no rank waits forever.
  [[noreturn]] virtual void abort(int code) = 0;

  bool is_root() const { return rank() == 0; }
};

// The single-process communicator.
std::unique_ptr<Communicator> make_single_communicator();
// MPI when the process was started by mpirun (or MPI is otherwise initialized with more than one
// rank), else the single-process one. MPI errors abort every rank with a message instead of hanging.
std::unique_ptr<Communicator> make_communicator(int* argc, char*** argv);
// NCCL over the ranks of `host` (which carries the unique id), one GPU per local rank. Throws when
// linattn was built without CUDA/NCCL or no GPU is visible.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host);

}  // namespace linattn
