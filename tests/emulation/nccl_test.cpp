// The emulated NCCL (emulation/nccl.cpp): every collective between ranks that are threads (2 and 3
// of them) and between processes (fork), against results combined here in rank order and bitwise
// equal on every rank; work that waits for its stream; argument errors refused at the call; a rank
// that never comes, one that dies and ranks that call different collectives named in the error.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

// Crosses the emulation's 1 MiB rounds for 4-byte elements (262,144 a round), so the chunking runs.
constexpr size_t kLong = 300'001;

// Sets NCCL_EMULATION_TIMEOUT for one test: a failing test then fails in seconds, not in a minute.
class ScopedTimeout {
 public:
  explicit ScopedTimeout(const char* seconds) { setenv("NCCL_EMULATION_TIMEOUT", seconds, 1); }
  ~ScopedTimeout() { unsetenv("NCCL_EMULATION_TIMEOUT"); }
};

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p_, n * sizeof(T)), cudaSuccess); }
  explicit DeviceBuffer(const std::vector<T>& values) : DeviceBuffer(values.size()) { upload(values); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return p_; }
  // The collectives run on non-blocking streams, which do not wait for the legacy stream's copies.
  void upload(const std::vector<T>& values) {
    EXPECT_EQ(cudaMemcpy(p_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

 private:
  T* p_ = nullptr;
};

template <class T>
std::vector<T> download(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return uint32_t(x);
}

// Rank r's element i. Floats span 2^-12 .. 2^21 with both signs, so a sum taken in another order
// rounds differently and the bitwise comparisons below see the rank order.
template <class T>
std::vector<T> inputs(int rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t h = mix(uint64_t(rank) * 1'000'003 + i + 1);
    const int integer = int(h % 2001) - 1000;
    if constexpr (std::is_floating_point_v<T>)
      v[i] = std::ldexp(T(integer), int((h >> 16) % 24) - 12);
    else
      v[i] = T(integer);
  }
  return v;
}

template <class T>
T combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
    case ncclMax: return b > a ? b : a;
    case ncclMin: return b < a ? b : a;
    case ncclProd: return a * b;
    default: return a + b;
  }
}

// The reduction NCCL's emulation documents: in rank order, the average the sum divided by the ranks.
template <class T>
std::vector<T> reduce_in_rank_order(const std::vector<std::vector<T>>& per_rank, ncclRedOp_t op) {
  std::vector<T> out = per_rank[0];
  for (size_t r = 1; r < per_rank.size(); ++r)
    for (size_t i = 0; i < out.size(); ++i) out[i] = combine(op, out[i], per_rank[r][i]);
  if (op == ncclAvg)
    for (T& x : out) x = T(x / T(per_rank.size()));
  return out;
}

template <class T>
constexpr ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  return ncclInt32;
}

template <class T>
void expect_bitwise(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i] << " (bitwise)";
      return;
    }
}

std::string error_string(ncclResult_t r) { return ncclGetErrorString(r); }

using RankBody = std::function<void(int rank, ncclComm_t comm, cudaStream_t stream)>;

// Each rank needs a GPU of its own, as on real hardware.
void expect_devices_for(int nranks) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_GE(devices, nranks) << nranks << " ranks need as many emulated GPUs: set LINATTN_EMULATED_GPUS=" << nranks
                             << " or more";
}

// Ranks as threads: each calls cudaSetDevice(rank) and ncclCommInitRank with one id, then runs
// `body` with its own non-blocking stream.
void run_ranks(int nranks, const RankBody& body) {
  ASSERT_NO_FATAL_FAILURE(expect_devices_for(nranks));
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      ncclComm_t comm = nullptr;
      const ncclResult_t init = ncclCommInitRank(&comm, nranks, id, r);
      ASSERT_EQ(init, ncclSuccess) << error_string(init);
      cudaStream_t stream = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
      body(r, comm, stream);
      EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  for (std::thread& t : threads) t.join();
}

void expect_synchronised(cudaStream_t stream) {
  const cudaError_t e = cudaStreamSynchronize(stream);
  EXPECT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
}

template <class T>
void check_all_reduce(int nranks, ncclRedOp_t op, bool in_place, size_t count) {
  SCOPED_TRACE(testing::Message() << nranks << " ranks, op " << op << (in_place ? ", in place" : ", out of place")
                                  << ", " << count << " x " << (std::is_same_v<T, float> ? "float" : "int"));
  std::vector<std::vector<T>> in(nranks), got(nranks);
  for (int r = 0; r < nranks; ++r) in[r] = inputs<T>(r, count);
  const std::vector<T> want = reduce_in_rank_order(in, op);
  run_ranks(nranks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<T> send(in[r]), recv(count);
    T* out = in_place ? send.get() : recv.get();
    const ncclResult_t res = ncclAllReduce(send.get(), out, count, nccl_type<T>(), op, comm, stream);
    ASSERT_EQ(res, ncclSuccess) << error_string(res);
    expect_synchronised(stream);
    got[r] = download(out, count);
  });
  for (int r = 0; r < nranks; ++r) expect_bitwise(got[r], want, "rank " + std::to_string(r));
}

TEST(EmulatedNccl, AllReduceSumMaxAvgOfFloatsAndIntsInRankOrderIdenticalOnEveryRank) {
  ScopedTimeout timeout("20");
  for (int nranks : {2, 3})
    for (ncclRedOp_t op : {ncclSum, ncclMax, ncclAvg})
      for (bool in_place : {false, true}) {
        check_all_reduce<float>(nranks, op, in_place, kLong);
        check_all_reduce<int32_t>(nranks, op, in_place, 1000);
      }
}

TEST(EmulatedNccl, AllReduceProdMinOfDoubles) {
  ScopedTimeout timeout("20");
  for (ncclRedOp_t op : {ncclProd, ncclMin}) check_all_reduce<double>(3, op, false, 100);
}

// 16-bit floats are summed as NCCL's kernels sum them, rounded to the type after every step (ties
// to even), so 2048 + 1 + 1 in half is 2048 where a float accumulator would give 2050.
TEST(EmulatedNccl, SixteenBitFloatSumsRoundAtEveryStep) {
  ScopedTimeout timeout("20");
  struct Case {
    ncclDataType_t type;
    std::vector<uint16_t> per_rank[3], want;
  };
  const Case cases[] = {
      // half: 2048 + 1 + 1; 3 x 2^-24 (subnormal); 65504 + 65504 - 65504 (inf stays); 1.5 + 0.25 - 0.5
      {ncclFloat16,
       {{0x6800, 0x0001, 0x7BFF, 0x3E00}, {0x3C00, 0x0001, 0x7BFF, 0x3400}, {0x3C00, 0x0001, 0xFBFF, 0xB800}},
       {0x6800, 0x0003, 0x7C00, 0x3D00}},
      // bfloat16: 1 + 2^-8 + 2^-8; 1 + 2^-7 + 2^-8 (a tie, to even); 3 + 0.5 - 1
      {ncclBfloat16,
       {{0x3F80, 0x3F80, 0x4040}, {0x3B80, 0x3C00, 0x3F00}, {0x3B80, 0x3B80, 0xBF80}},
       {0x3F80, 0x3F82, 0x4020}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type == ncclFloat16 ? "ncclFloat16" : "ncclBfloat16");
    std::vector<std::vector<uint16_t>> got(3);
    run_ranks(3, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      DeviceBuffer<uint16_t> buffer(c.per_rank[r]);
      ASSERT_EQ(ncclAllReduce(buffer.get(), buffer.get(), c.want.size(), c.type, ncclSum, comm, stream), ncclSuccess);
      expect_synchronised(stream);
      got[r] = download(buffer.get(), c.want.size());
    });
    for (int r = 0; r < 3; ++r) expect_bitwise(got[r], c.want, "rank " + std::to_string(r));
  }
}

TEST(EmulatedNccl, BroadcastAndReduceToTheLastRank) {
  ScopedTimeout timeout("20");
  for (int nranks : {2, 3})
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(testing::Message() << nranks << " ranks" << (in_place ? ", in place" : ", out of place"));
      const int root = nranks - 1;
      std::vector<std::vector<float>> in(nranks), broadcast(nranks), reduced(nranks);
      for (int r = 0; r < nranks; ++r) in[r] = inputs<float>(r, kLong);
      const std::vector<float> untouched(kLong, -7.0f);
      run_ranks(nranks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
        DeviceBuffer<float> send(in[r]), recv(untouched), reduce_send(in[r]), reduce_recv(untouched);
        float* out = in_place ? send.get() : recv.get();
        float* reduce_out = in_place ? reduce_send.get() : reduce_recv.get();
        ASSERT_EQ(ncclBroadcast(send.get(), out, kLong, ncclFloat32, root, comm, stream), ncclSuccess);
        ASSERT_EQ(ncclReduce(reduce_send.get(), reduce_out, kLong, ncclFloat32, ncclSum, root, comm, stream),
                  ncclSuccess);
        expect_synchronised(stream);
        broadcast[r] = download(out, kLong);
        reduced[r] = download(reduce_out, kLong);
      });
      const std::vector<float> sum = reduce_in_rank_order(in, ncclSum);
      for (int r = 0; r < nranks; ++r) {
        expect_bitwise(broadcast[r], in[root], "broadcast to rank " + std::to_string(r));
        // Only the root's recvbuff is written; in place, the others keep their input.
        const std::vector<float>& kept = in_place ? in[r] : untouched;
        expect_bitwise(reduced[r], r == root ? sum : kept, "reduce at rank " + std::to_string(r));
      }
    }
}

TEST(EmulatedNccl, AllGatherInAndOutOfPlace) {
  ScopedTimeout timeout("20");
  for (int nranks : {2, 3})
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(testing::Message() << nranks << " ranks" << (in_place ? ", in place" : ", out of place"));
      const size_t count = kLong;
      std::vector<std::vector<float>> in(nranks), got(nranks);
      std::vector<float> want;
      for (int r = 0; r < nranks; ++r) {
        in[r] = inputs<float>(r, count);
        want.insert(want.end(), in[r].begin(), in[r].end());
      }
      run_ranks(nranks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
        // In place, this rank's part of recvbuff is its sendbuff and the rest holds garbage.
        std::vector<float> initial(nranks * count, -7.0f);
        std::copy(in[r].begin(), in[r].end(), initial.begin() + r * count);
        DeviceBuffer<float> recv(initial), send(in[r]);
        const float* sendbuff = in_place ? recv.get() + r * count : send.get();
        ASSERT_EQ(ncclAllGather(sendbuff, recv.get(), count, ncclFloat32, comm, stream), ncclSuccess);
        expect_synchronised(stream);
        got[r] = download(recv.get(), nranks * count);
      });
      for (int r = 0; r < nranks; ++r) expect_bitwise(got[r], want, "rank " + std::to_string(r));
    }
}

TEST(EmulatedNccl, ReduceScatterInAndOutOfPlace) {
  ScopedTimeout timeout("20");
  for (int nranks : {2, 3})
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(testing::Message() << nranks << " ranks" << (in_place ? ", in place" : ", out of place"));
      const size_t count = 140'000;  // each rank's part; its rounds hold 131,072 (2 ranks) or 87,381 (3)
      std::vector<std::vector<float>> in(nranks), got(nranks);
      for (int r = 0; r < nranks; ++r) in[r] = inputs<float>(r, nranks * count);
      const std::vector<float> sum = reduce_in_rank_order(in, ncclSum);
      run_ranks(nranks, [&](int r, ncclComm_t comm, cudaStream_t stream) {
        DeviceBuffer<float> send(in[r]), recv(count);
        float* out = in_place ? send.get() + r * count : recv.get();
        ASSERT_EQ(ncclReduceScatter(send.get(), out, count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
        expect_synchronised(stream);
        got[r] = download(out, count);
      });
      for (int r = 0; r < nranks; ++r)
        expect_bitwise(got[r], std::vector<float>(sum.begin() + r * count, sum.begin() + (r + 1) * count),
                       "rank " + std::to_string(r));
    }
}

TEST(EmulatedNccl, NothingHappensBeforeTheStreamIsSynchronised) {
  ScopedTimeout timeout("20");
  const size_t count = 1000;
  std::vector<std::vector<float>> in{inputs<float>(0, count), inputs<float>(1, count)};
  const std::vector<float> sum = reduce_in_rank_order(in, ncclSum), sentinel(count, -7.0f);
  run_ranks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<float> send(in[r]), recv(sentinel);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(send.get(), send.get(), count, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    // Device memory is host memory in the emulation: look at it without waiting for anything.
    expect_bitwise(std::vector<float>(recv.get(), recv.get() + count), sentinel, "recvbuff before the sync");
    expect_bitwise(std::vector<float>(send.get(), send.get() + count), in[r], "in-place buffer before the sync");
    expect_synchronised(stream);
    expect_bitwise(download(recv.get(), count), sum, "recvbuff after the sync");
    expect_bitwise(download(send.get(), count), sum, "in-place buffer after the sync");
  });
}

TEST(EmulatedNccl, InitAllMakesOneCommunicatorPerDeviceForThreadsToUse) {
  ScopedTimeout timeout("20");
  ASSERT_NO_FATAL_FAILURE(expect_devices_for(3));
  const int devices[] = {0, 1, 2};
  ncclComm_t comms[3] = {};
  const ncclResult_t init = ncclCommInitAll(comms, 3, devices);
  ASSERT_EQ(init, ncclSuccess) << error_string(init);
  for (int r = 0; r < 3; ++r) {
    int count = 0, rank = -1, device = -1;
    EXPECT_EQ(ncclCommCount(comms[r], &count), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    EXPECT_EQ(ncclCommCuDevice(comms[r], &device), ncclSuccess);
    EXPECT_EQ(count, 3);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(device, devices[r]);
  }
  std::vector<std::vector<int32_t>> in(3), got(3);
  for (int r = 0; r < 3; ++r) in[r] = inputs<int32_t>(r, 500);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(devices[r]), cudaSuccess);
      DeviceBuffer<int32_t> buffer(in[r]);
      ASSERT_EQ(ncclAllReduce(buffer.get(), buffer.get(), 500, ncclInt32, ncclSum, comms[r], nullptr), ncclSuccess);
      expect_synchronised(nullptr);
      got[r] = download(buffer.get(), 500);
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    expect_bitwise(got[r], reduce_in_rank_order(in, ncclSum), "rank " + std::to_string(r));
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

void expect_refused(ncclResult_t got, ncclResult_t want, const std::string& says) {
  EXPECT_EQ(got, want) << error_string(got);
  const std::string message = error_string(got);
  EXPECT_NE(message.find(says), std::string::npos) << "the message: " << message << "\nshould say: " << says;
  EXPECT_EQ(message, ncclGetLastError(nullptr));
}

TEST(EmulatedNccl, ArgumentErrorsAreRefusedAtTheCallWithANamedMessage) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBuffer<float> buffer(inputs<float>(0, 100)), other(100);
  std::vector<float> host(100);

  expect_refused(ncclAllReduce(host.data(), other.get(), 100, ncclFloat32, ncclSum, comm, stream), ncclInvalidArgument,
                 "ncclAllReduce on rank 0 of 1: sendbuff");
  expect_refused(ncclBroadcast(buffer.get(), host.data(), 100, ncclFloat32, 0, comm, stream), ncclInvalidArgument,
                 "recvbuff");
  expect_refused(ncclAllReduce(buffer.get(), other.get(), 101, ncclFloat32, ncclSum, comm, stream), ncclInvalidArgument,
                 "with 404 bytes is not inside one cudaMalloc allocation");
  expect_refused(ncclAllReduce(buffer.get(), other.get(), SIZE_MAX / 2, ncclFloat32, ncclSum, comm, stream),
                 ncclInvalidArgument, "overflows the size of a buffer");
  expect_refused(ncclAllReduce(buffer.get(), other.get(), 100, ncclDataType_t(42), ncclSum, comm, stream),
                 ncclInvalidArgument, "datatype 42 is not an ncclDataType_t");
  expect_refused(ncclAllReduce(buffer.get(), other.get(), 100, ncclFloat32, ncclRedOp_t(9), comm, stream),
                 ncclInvalidArgument, "op 9 is not an ncclRedOp_t");
  expect_refused(ncclBroadcast(buffer.get(), other.get(), 100, ncclFloat32, 1, comm, stream), ncclInvalidArgument,
                 "root 1 is not a rank");
  expect_refused(ncclAllReduce(buffer.get(), buffer.get() + 1, 50, ncclFloat32, ncclSum, comm, stream),
                 ncclInvalidArgument, "overlap but are not in place");
  expect_refused(ncclAllReduce(buffer.get(), other.get(), 100, ncclFloat32, ncclSum, nullptr, stream),
                 ncclInvalidArgument, "comm is null");
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  expect_refused(ncclAllReduce(buffer.get(), other.get(), 100, ncclFloat32, ncclSum, comm, stream), ncclInvalidUsage,
                 "the communicator is on device 0 but the calling thread's current device is 1");
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);

  expect_refused(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);

  ncclUniqueId zeros{};
  ncclComm_t refused = nullptr;
  expect_refused(ncclCommInitRank(&refused, 1, zeros, 0), ncclInvalidArgument, "not made by ncclGetUniqueId");
  expect_refused(ncclCommInitRank(&refused, 2, id, 2), ncclInvalidArgument, "rank 2 of 2 ranks");
  EXPECT_EQ(refused, nullptr);

  // Nothing refused was queued: the stream is clean, and a good call still works.
  expect_synchronised(stream);
  ASSERT_EQ(ncclAllReduce(buffer.get(), other.get(), 100, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  expect_synchronised(stream);
  expect_bitwise(download(other.get(), 100), inputs<float>(0, 100), "one rank's sum");
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(EmulatedNccl, OneThreadDrivingTwoRanksIsRefused) {
  ncclComm_t comms[2] = {};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  DeviceBuffer<float> buffer(10);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Count 0 queues nothing, and rank 0 is then this thread's.
  EXPECT_EQ(ncclAllReduce(buffer.get(), buffer.get(), 0, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  expect_refused(ncclAllReduce(buffer.get(), buffer.get(), 0, ncclFloat32, ncclSum, comms[1], nullptr),
                 ncclInvalidUsage, "this thread already issues collectives for rank 0");
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(EmulatedNccl, TwoRanksOnOneDeviceAreRefused) {
  ScopedTimeout timeout("20");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::string messages[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
      ncclComm_t comm = nullptr;
      const ncclResult_t init = ncclCommInitRank(&comm, 2, id, r);
      EXPECT_EQ(init, ncclInvalidUsage);
      EXPECT_EQ(comm, nullptr);
      messages[r] = error_string(init);
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& m : messages)
    EXPECT_NE(m.find("ranks 0 and 1 are both on device 0: each rank needs its own GPU (call cudaSetDevice"),
              std::string::npos)
        << m;
}

TEST(EmulatedNccl, ARankThatNeverJoinsIsATimeoutNamingIt) {
  ScopedTimeout timeout("0.3");
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  const auto start = std::chrono::steady_clock::now();
  expect_refused(ncclCommInitRank(&comm, 3, id, 0), ncclRemoteError,
                 "ncclCommInitRank: rank 0 of 3: ranks 1, 2 did not join within 0.3 s (NCCL_EMULATION_TIMEOUT)");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(comm, nullptr);
}

// Two ranks joined from two threads; the test then drives them from this one.
void init_two_ranks(ncclComm_t comms[2]) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::thread second([&] {
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    EXPECT_EQ(ncclCommInitRank(&comms[1], 2, id, 1), ncclSuccess);
  });
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(ncclCommInitRank(&comms[0], 2, id, 0), ncclSuccess);
  second.join();
}

// Synchronises `stream` expecting the queued collective to fail with a message that says `says`.
void expect_stream_fails(cudaStream_t stream, const std::string& says) {
  const cudaError_t e = cudaStreamSynchronize(stream);
  EXPECT_NE(e, cudaSuccess);
  const std::string message = cudaGetErrorString(e);
  EXPECT_NE(message.find(says), std::string::npos) << "the message: " << message << "\nshould say: " << says;
  cudaGetLastError();
}

TEST(EmulatedNccl, ARankThatNeverArrivesFailsTheStreamAfterTheTimeout) {
  ScopedTimeout timeout("0.3");
  ncclComm_t comms[2] = {};
  init_two_ranks(comms);
  DeviceBuffer<float> buffer(inputs<float>(0, 100));
  ASSERT_EQ(ncclAllReduce(buffer.get(), buffer.get(), 100, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  expect_stream_fails(nullptr,
                      "ncclAllReduce #1 on rank 0 of 2: rank 1 did not arrive at ncclAllReduce #1 within 0.3 s");
  // The communicator is broken now, and says so at the next call.
  expect_refused(ncclAllReduce(buffer.get(), buffer.get(), 100, ncclFloat32, ncclSum, comms[0], nullptr),
                 ncclRemoteError, "the communicator failed earlier and cannot be used");
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(EmulatedNccl, RanksThatCallDifferentCollectivesFailOnEveryRank) {
  ScopedTimeout timeout("20");
  std::string messages[2];
  run_ranks(2, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<float> buffer(100);
    ASSERT_EQ(ncclAllReduce(buffer.get(), buffer.get(), 99 + r, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
    const cudaError_t e = cudaStreamSynchronize(stream);
    EXPECT_NE(e, cudaSuccess);
    messages[r] = cudaGetErrorString(e);
    cudaGetLastError();
  });
  for (const std::string& m : messages)
    EXPECT_NE(m.find("the ranks called different collectives: rank 0: ncclAllReduce #1 of 99 x ncclFloat32 (ncclSum); "
                     "rank 1: ncclAllReduce #1 of 100 x ncclFloat32 (ncclSum)"),
              std::string::npos)
        << m;
}

// ---- ranks as processes: fork() stands in for mpirun; the id is inherited instead of broadcast ----

void write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n <= 0) _exit(90);
    p += n;
    bytes -= size_t(n);
  }
}

std::string read_all(int fd) {
  std::string out;
  char chunk[65536];
  for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;) out.append(chunk, size_t(n));
  return out;
}

// A forked rank: all-reduces `input` in place and writes the result to `out`, or a message and a
// nonzero exit code. `die_after_init`: exits right after joining, as a crashed peer would.
[[noreturn]] void child_rank(int rank, const ncclUniqueId& id, const std::vector<float>& input, int out,
                             bool die_after_init) {
  auto give_up = [&](int code, const std::string& message) {
    write_all(out, message.data(), message.size());
    _exit(code);
  };
  if (cudaSetDevice(rank) != cudaSuccess) give_up(10, "cudaSetDevice failed");
  float* buffer = nullptr;
  if (cudaMalloc(&buffer, input.size() * sizeof(float)) != cudaSuccess) give_up(11, "cudaMalloc failed");
  cudaMemcpy(buffer, input.data(), input.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank)) give_up(12, ncclGetErrorString(r));
  if (die_after_init) _exit(3);
  if (ncclResult_t r = ncclAllReduce(buffer, buffer, input.size(), ncclFloat32, ncclSum, comm, nullptr))
    give_up(13, ncclGetErrorString(r));
  if (cudaError_t e = cudaStreamSynchronize(nullptr)) give_up(14, cudaGetErrorString(e));
  std::vector<float> result(input.size());
  cudaMemcpy(result.data(), buffer, input.size() * sizeof(float), cudaMemcpyDeviceToHost);
  ncclCommDestroy(comm);
  write_all(out, result.data(), result.size() * sizeof(float));
  _exit(0);
}

struct Child {
  pid_t pid;
  int out;  // the read end of its pipe
};

Child fork_rank(int rank, const ncclUniqueId& id, const std::vector<float>& input, bool die_after_init = false) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_rank(rank, id, input, fds[1], die_after_init);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

int exit_code(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(EmulatedNccl, RanksAsProcessesAllReduceThroughSharedMemory) {
  ScopedTimeout timeout("20");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const std::vector<std::vector<float>> in{inputs<float>(0, kLong), inputs<float>(1, kLong)};
  const std::vector<float> want = reduce_in_rank_order(in, ncclSum);
  Child children[2] = {fork_rank(0, id, in[0]), fork_rank(1, id, in[1])};
  for (int r = 0; r < 2; ++r) {
    const std::string out = read_all(children[r].out);  // before waiting: the result outgrows the pipe
    close(children[r].out);
    const int code = exit_code(children[r].pid);
    ASSERT_EQ(code, 0) << "rank " << r << " says: " << out;
    ASSERT_EQ(out.size(), kLong * sizeof(float));
    std::vector<float> got(kLong);
    std::memcpy(got.data(), out.data(), out.size());
    expect_bitwise(got, want, "rank " + std::to_string(r));
  }
}

TEST(EmulatedNccl, APeerProcessThatDiesIsNamedAtOnce) {
  ScopedTimeout timeout("20");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  const std::vector<float> input = inputs<float>(0, 100);
  const auto start = std::chrono::steady_clock::now();
  Child survivor = fork_rank(0, id, input), dead = fork_rank(1, id, input, true);
  EXPECT_EQ(exit_code(dead.pid), 3);  // reaped, so that its pid is gone
  close(dead.out);
  const std::string message = read_all(survivor.out);
  close(survivor.out);
  EXPECT_EQ(exit_code(survivor.pid), 14);
  const std::string named = "rank 1 (process " + std::to_string(dead.pid) + ") exited before it would arrive at ";
  EXPECT_NE(message.find(named + "ncclAllReduce #1"),
            std::string::npos)
      << message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

}  // namespace
