#include "train/communicator.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#ifdef LINATTN_MPI
#include <mpi.h>
#endif

namespace linattn {

namespace {

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const char* backend() const override { return "single process"; }
  bool sums_on(Device) const override { return true; }  // one rank's sum is its data, wherever it is
  void start_allreduce_sum(const Tensor&) override {}
  void poll() override {}
  void wait_all() override {}
  void allreduce_sum(double*, int) override {}
  void check_same(const std::string&, const char*) override {}
  void barrier() override {}
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

#ifdef LINATTN_MPI
void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  LINATTN_FAIL(what, " failed: ", std::string(msg, size_t(len)));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16: LINATTN_FAIL("MPI has no bfloat16 type: reduce bf16 tensors with NCCL (train.device: cuda)");
  }
  return MPI_BYTE;
}

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(int* argc, char*** argv) {
    check_mpi(MPI_Init(argc, argv), "MPI_Init");
    // A failing collective (a rank died) aborts the job with MPI's message rather than hanging.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_);
    MPI_Comm_rank(local_, &local_rank_);
    MPI_Comm_size(local_, &local_size_);
  }
  ~MpiCommunicator() override {
    MPI_Comm_free(&local_);
    MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const char* backend() const override { return "MPI"; }

  void start_allreduce_sum(const Tensor& t) override {
    LINATTN_CHECK(t.device() == Device::cpu, "the MPI communicator reduces host tensors; use NCCL for ", t.str());
    char* p = static_cast<char*>(t.raw());
    const int64_t n = t.numel();
    const int64_t step = int64_t(1) << 30;  // MPI counts are int
    for (int64_t i = 0; i < n; i += step) {
      MPI_Request request;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, p + size_t(i) * dtype_size(t.dtype()), int(std::min(step, n - i)),
                               mpi_type(t.dtype()), MPI_SUM, MPI_COMM_WORLD, &request),
                "MPI_Iallreduce");
      requests_.push_back(request);
    }
  }
  void poll() override {
    if (requests_.empty()) return;
    int done = 0;
    check_mpi(MPI_Testall(int(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) requests_.clear();
  }
  void wait_all() override {
    check_mpi(MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    requests_.clear();
  }
  void allreduce_sum(double* values, int count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  }
  void check_same(const std::string& value, const char* what) override {
    uint64_t mine = std::hash<std::string>{}(value);
    std::vector<uint64_t> all(size_t(size_), 0);
    check_mpi(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
    for (int r = 1; r < size_; ++r)
      LINATTN_REQUIRE(all[size_t(r)] == all[0], "rank ", r, " has a different ", what, " than rank 0: every rank ",
                      "must be started with the same config and options");
  }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void broadcast(void* data, size_t bytes, int root) override {
    check_mpi(MPI_Bcast(data, int(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  std::vector<std::string> host_names() override {
    char mine[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    check_mpi(MPI_Get_processor_name(mine, &length), "MPI_Get_processor_name");
    std::vector<char> all(size_t(size_) * MPI_MAX_PROCESSOR_NAME);
    check_mpi(MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD),
              "MPI_Allgather");
    std::vector<std::string> names;
    for (int r = 0; r < size_; ++r) names.emplace_back(all.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME);
    return names;
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);  // this rank's error first
    // Under Open MPI's mpirun (ORTE), which ends the whole job when a rank exits with a non-zero
    // status (unless told otherwise), that exit names the rank without MPI_Abort's banner: the banner
    // is sent from this rank just before it dies, and mpirun sometimes reads it cut short and prints
    // "ORTE_ERROR_LOG: Data unpack would read past end of buffer ... show_help.c" instead.
    const char* keep_going = std::getenv("OMPI_MCA_orte_abort_on_non_zero_status");
    if (std::getenv("OMPI_MCA_orte_hnp_uri") && !(keep_going && std::string(keep_going) == "0")) _exit(code);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_;
  std::vector<MPI_Request> requests_;  // the started sums
};
#endif

// Launchers set these for every rank.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

std::unique_ptr<Communicator> make_communicator(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return make_single_communicator();
#ifdef LINATTN_MPI
  return std::make_unique<MpiCommunicator>(argc, argv);
#else
  LINATTN_REQUIRE(false, "started by mpirun, but linattn was built without MPI: install libopenmpi-dev and rebuild");
#endif
}

}  // namespace linattn
