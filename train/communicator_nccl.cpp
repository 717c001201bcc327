// The NCCL communicator: gradients stay on the GPU; one GPU per local rank; the unique id is
// broadcast over the host (MPI) communicator. Compiled only with the CUDA backend and NCCL.
#include "train/communicator.h"

#include <cstdlib>

#ifdef LINATTN_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#endif

namespace linattn {

#ifdef LINATTN_NCCL
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  LINATTN_CHECK(r == ncclSuccess, what, " failed: ", ncclGetErrorString(r));
}
void check_cuda(cudaError_t e, const char* what) {
  LINATTN_CHECK(e == cudaSuccess, what, " failed: ", cudaGetErrorString(e));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;
  }
  return ncclFloat32;
}

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(Communicator& host) : host_(host) {
    int devices = 0;
    LINATTN_REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0,
                    "NCCL data parallelism needs a GPU, and none is visible");
    LINATTN_REQUIRE(host.local_rank() < devices, "local rank ", host.local_rank(), " has no GPU of its own (", devices,
                    " visible): start at most one rank per GPU");
    cuda::set_device(host.local_rank());
    ncclUniqueId id;
    if (host.is_root()) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    host.broadcast(&id, sizeof id, 0);
    check_nccl(ncclCommInitRank(&comm_, host.world_size(), id, host.rank()), "ncclCommInitRank");
    stream_ = static_cast<cudaStream_t>(cuda::comm_stream());  // the device's, created after cudaSetDevice
    check_cuda(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cuda(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  ~NcclCommunicator() override {
    ncclCommDestroy(comm_);
    cudaEventDestroy(computed_);
    cudaEventDestroy(summed_);
  }
  int rank() const override { return host_.rank(); }
  int world_size() const override { return host_.world_size(); }
  int local_rank() const override { return host_.local_rank(); }
  int local_size() const override { return host_.local_size(); }
  const char* backend() const override { return "NCCL"; }
  bool sums_on(Device device) const override { return device == Device::cuda || host_.sums_on(device); }
  void start_allreduce_sum(const Tensor& t) override {
    if (t.device() == Device::cpu) return host_.start_allreduce_sum(t);
    // The gradients come from kernels on the compute stream: the sum starts after them.
    check_cuda(cudaEventRecord(computed_, static_cast<cudaStream_t>(cuda::compute_stream())), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, computed_, 0), "cudaStreamWaitEvent");
    check_nccl(ncclAllReduce(t.raw(), t.raw(), size_t(t.numel()), nccl_type(t.dtype()), ncclSum, comm_, stream_),
               "ncclAllReduce");
  }
  // NCCL progresses on the GPU by itself; host tensors go through the host communicator.
  void poll() override { host_.poll(); }
  // The compute stream waits for the device sums (the host does not: what reads them later, a kernel
  // or a copy, runs on the compute stream after them).
  void wait_all() override {
    check_cuda(cudaEventRecord(summed_, stream_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(cuda::compute_stream()), summed_, 0),
               "cudaStreamWaitEvent");
    host_.wait_all();
  }
  void allreduce_sum(double* values, int count) override { host_.allreduce_sum(values, count); }
  void check_same(const std::string& value, const char* what) override { host_.check_same(value, what); }
  void barrier() override { host_.barrier(); }
  void broadcast(void* data, size_t bytes, int root) override { host_.broadcast(data, bytes, root); }
  std::vector<std::string> host_names() override { return host_.host_names(); }
  [[noreturn]] void abort(int code) override {
    host_.abort(code);
    std::exit(code);
  }

 private:
  Communicator& host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;   // the communication stream: the sums run here, beside the compute stream
  cudaEvent_t computed_ = nullptr;  // recorded on the compute stream when a sum starts
  cudaEvent_t summed_ = nullptr;    // recorded on the communication stream by wait_all
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host) {
  return std::make_unique<NcclCommunicator>(host);
}
#else
std::unique_ptr<Communicator> make_nccl_communicator(Communicator&) {
  LINATTN_REQUIRE(false, "linattn was built without CUDA and NCCL: configure with -DLINATTN_CUDA=ON where nvcc and "
                         "NCCL are installed");
}
#endif

}  // namespace linattn
