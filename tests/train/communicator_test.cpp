// The NCCL communicator on one process: a clear error without a GPU, an in-place sum of device
// buffers with one. (MPI with two ranks: mpi_test.cpp.)
#include "train/communicator.h"

#include "core/memory.h"
#include "testing.h"

namespace linattn {
namespace {

using testing::error_of;

TEST(Communicator, NcclWithoutAGpuIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is here: NcclOneRankSumsADeviceBufferInPlace covers NCCL";
  std::unique_ptr<Communicator> single = make_single_communicator();
  std::string msg = error_of([&] { make_nccl_communicator(*single); });
#ifdef LINATTN_NCCL
  EXPECT_NE(msg.find("NCCL data parallelism needs a GPU, and none is visible"), std::string::npos) << msg;
#else
  EXPECT_NE(msg.find("built without CUDA and NCCL"), std::string::npos) << msg;
#endif
}

TEST(Communicator, NcclOneRankSumsADeviceBufferInPlace) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  std::unique_ptr<Communicator> single = make_single_communicator();
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(*single);
  Rng rng(2);
  Tensor host = testing::random_tensor({1000}, rng, -1, 1, DType::f32);
  Tensor device = host.to(Device::cuda);
  // Two buckets in flight at once, like the trainer's; one rank's sum is the data itself.
  nccl->start_allreduce_sum(device.narrow(0, 400));
  nccl->start_allreduce_sum(device.narrow(400, 1000));
  nccl->poll();
  nccl->wait_all();
  EXPECT_CLOSE(device.to(Device::cpu), host, 0.0);
}

}  // namespace
}  // namespace linattn
