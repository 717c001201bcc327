// The emulated NCCL (include/nccl.h). Every rank, thread or process, maps one POSIX shared-memory
// segment named from the unique id; a collective runs in rounds, one chunk of its buffers a round:
// each rank copies its part into its own slot of the segment, waits for every rank's, and computes
// its result from the slots in rank order. Waiting is spinning with sleeps on atomics in the segment
// (no locks there, so a peer that dies mid-collective leaves nothing locked behind), with a timeout
// that names the rank that did not come.
#include <nccl.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cuda_emulation/counters.h"
#include "internal.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// ---- errors: the calling thread's last one, for ncclGetErrorString and ncclGetLastError ----
thread_local ncclResult_t last_result = ncclSuccess;
thread_local std::string last_message;

ncclResult_t refuse(ncclResult_t result, std::string message) {
  last_result = result;
  last_message = std::move(message);
  return result;
}

const char* const kDataTypeNames[] = {"ncclInt8",   "ncclUint8",   "ncclInt32",   "ncclUint32",  "ncclInt64",
                                      "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};
const size_t kDataTypeBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
const char* const kRedOpNames[] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
constexpr int kDataTypes = 10, kRedOps = 5;

// ---- the unique id: a magic string (so that an id nobody made is refused) and a random token ----
constexpr char kIdMagic[] = "linattn emulated NCCL unique id";
struct IdContents {
  char magic[sizeof kIdMagic];
  uint64_t token[2];
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

// ---- the shared segment ----
// Each rank's slot holds its contribution to one round. 1 MiB a rank keeps /dev/shm use small; a
// gradient bucket of 40 MB is then 40 rounds, each a memcpy and a handshake.
constexpr size_t kSlotBytes = size_t(1) << 20;
static_assert(std::atomic<int32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the segment's atomics are shared between processes: they must be lock-free");

enum class Kind : int32_t { all_reduce, broadcast, reduce, all_gather, reduce_scatter };
const char* const kKindNames[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter"};

// A rank's collective as every rank must have called it, compared before anything is combined.
struct Call {
  uint64_t seq = 0;  // 1 for the communicator's first collective, 2 for its second, ...
  uint64_t count = 0;
  Kind kind = Kind::all_reduce;
  int32_t datatype = 0, op = 0, root = 0;
  bool operator==(const Call&) const = default;
};

std::string describe(const Call& c) {
  std::string s = cat(kKindNames[int(c.kind)], " #", c.seq, " of ", c.count, " x ", kDataTypeNames[c.datatype]);
  if (c.kind == Kind::all_reduce || c.kind == Kind::reduce || c.kind == Kind::reduce_scatter)
    s += cat(" (", kRedOpNames[c.op], ")");
  if (c.kind == Kind::broadcast || c.kind == Kind::reduce) s += cat(" with root ", c.root);
  return s;
}

// claimed: the rank's number is taken, its pid and device not yet written.
enum Presence : int32_t { absent = 0, claimed, joined, gave_up, left };

struct alignas(64) RankState {
  std::atomic<int32_t> presence;
  int32_t pid, device;
  std::atomic<uint64_t> arrived;   // the last round whose contribution is in this rank's slot
  std::atomic<uint64_t> finished;  // the last round in which this rank has read every slot
  Call call;                       // this rank's collective in round `arrived`
  char reason[512];                // why it gave up
};
struct alignas(64) Header {
  std::atomic<int32_t> nranks;  // set by the first rank to join
};

size_t segment_bytes(int nranks) { return sizeof(Header) + nranks * (sizeof(RankState) + kSlotBytes); }

// One rank's communicator. The segment is mapped once per rank (ranks that are threads too), and
// unlinked once every rank has joined: it disappears with the last mapping, whatever ends the
// processes.
struct CommState {
  std::string name;  // the segment's
  int nranks = 0, rank = 0, device = 0;
  double timeout_s = 60;
  void* base = nullptr;
  bool owns_rank = false;  // this rank's number was free and is now taken by this communicator

  std::mutex running;  // one collective at a time
  uint64_t round = 0;  // the rounds this rank has run

  std::mutex broken_mutex;
  ncclResult_t broken = ncclSuccess;  // set by a failed collective: the communicator is unusable after it
  std::string broken_reason;

  Header& header() const { return *static_cast<Header*>(base); }
  RankState& state(int r) const { return reinterpret_cast<RankState*>(static_cast<char*>(base) + sizeof(Header))[r]; }
  char* slot(int r) const {
    return static_cast<char*>(base) + sizeof(Header) + nranks * sizeof(RankState) + r * kSlotBytes;
  }
  void break_with(ncclResult_t result, const std::string& reason) {
    std::lock_guard lock(broken_mutex);
    if (broken != ncclSuccess) return;
    broken = result;
    broken_reason = reason;
  }
  // Tells the peers that wait for this rank why it will not come.
  void give_up(const std::string& reason) {
    RankState& me = state(rank);
    std::snprintf(me.reason, sizeof me.reason, "%s", reason.c_str());
    me.presence.store(gave_up, std::memory_order_release);
  }
  ~CommState() {
    if (!base) return;
    int32_t was_joined = joined;
    if (owns_rank) state(rank).presence.compare_exchange_strong(was_joined, left, std::memory_order_acq_rel);
    munmap(base, segment_bytes(nranks));
  }
};

}  // namespace

// What ncclComm_t points to. Queued work holds the state, so that ncclCommDestroy with collectives
// still queued leaves them able to run.
struct ncclComm {
  std::shared_ptr<CommState> state;
  uint64_t issued = 0;  // collectives queued so far
};

namespace {

bool process_alive(int pid) { return pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH; }

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += cat(i ? ", " : "", ranks[i]);
  return s;
}

// Waits until ready(r) holds for every rank r. Returns "" or why it cannot: a rank that gave up,
// left, died, or did not come within the timeout. `doing` says what the ranks are waited for
// ("join", "arrive at ncclAllReduce #3").
std::string wait_for_ranks(const CommState& s, const std::string& doing, const std::function<bool(int)>& ready) {
  const Clock::time_point start = Clock::now();
  Clock::time_point next_check = start;
  for (int spin = 0;; ++spin) {
    std::vector<int> missing;
    for (int r = 0; r < s.nranks; ++r)
      if (!ready(r)) missing.push_back(r);
    if (missing.empty()) return {};
    const Clock::time_point now = Clock::now();
    if (now >= next_check) {
      for (int r : missing) {
        const RankState& peer = s.state(r);
        const int presence = peer.presence.load(std::memory_order_acquire);
        if (presence == gave_up) return cat("rank ", r, " gave up: ", peer.reason);
        if (presence == left) return cat("rank ", r, " destroyed its communicator before it would ", doing);
        if (presence == joined && !process_alive(peer.pid))
          return cat("rank ", r, " (process ", peer.pid, ") exited before it would ", doing);
      }
      const double waited = std::chrono::duration<double>(now - start).count();
      if (waited > s.timeout_s)
        return cat(rank_list(missing), " did not ", doing, " within ", s.timeout_s, " s (NCCL_EMULATION_TIMEOUT)");
      next_check = now + std::chrono::milliseconds(20);
    }
    // Peers usually come within microseconds (every rank runs the same code): yield first, then
    // sleep longer and longer so that a slow peer does not cost a core.
    if (spin < 100)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 << std::min(spin - 100, 7))));
  }
}

// ---- arithmetic: each step rounded to the data type, integers wrapping as on the GPU ----
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) {
    uint32_t bits = 0x7f800000u | (mantissa << 13);
    std::memcpy(&magnitude, &bits, 4);
  } else if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -24);
  } else {
    uint32_t bits = ((exponent + 112) << 23) | (mantissa << 13);
    std::memcpy(&magnitude, &bits, 4);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t float_to_half(float f) {  // round to nearest, ties to even
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // halfway above 65504, the largest half, rounds to inf
  if (magnitude < 0x1p-14f) return sign | uint16_t(std::nearbyint(magnitude * 0x1p24f));  // subnormal
  std::memcpy(&bits, &magnitude, 4);
  uint32_t half = (((bits >> 23) - 112) << 10) | ((bits >> 13) & 0x3ff);
  const uint32_t rest = bits & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // a carry into the exponent is right
  return sign | uint16_t(half);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {  // round to nearest, ties to even
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

// How a stored element is computed with: integers and floats as themselves, the 16-bit floats in
// float and rounded back after every step.
template <class T>
struct Arith {
  using Value = T;
  static Value load(T v) { return v; }
  static T store(Value v) { return v; }
};
template <>
struct Arith<Half> {
  using Value = float;
  static Value load(Half v) { return half_to_float(v.bits); }
  static Half store(Value v) { return {float_to_half(v)}; }
};
template <>
struct Arith<Bf16> {
  using Value = float;
  static Value load(Bf16 v) { return bf16_to_float(v.bits); }
  static Bf16 store(Value v) { return {float_to_bf16(v)}; }
};

template <class V>
V apply(ncclRedOp_t op, V a, V b) {
  if constexpr (std::is_integral_v<V>) {
    using U = std::make_unsigned_t<V>;  // wraps instead of signed overflow
    if (op == ncclSum || op == ncclAvg) return V(U(U(a) + U(b)));
    if (op == ncclProd) return V(U(U(a) * U(b)));
  } else {
    if (op == ncclSum || op == ncclAvg) return a + b;
    if (op == ncclProd) return a * b;
  }
  if (op == ncclMax) return b > a ? b : a;
  return b < a ? b : a;
}

// out[i] = op over ranks of in[r][i], in rank order.
template <class T>
void reduce_typed(ncclRedOp_t op, void* out, const char* const* in, int nranks, size_t count) {
  using A = Arith<T>;
  using V = typename A::Value;
  T* o = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, in[0] + i * sizeof(T), sizeof(T));
    V acc = A::load(x);
    for (int r = 1; r < nranks; ++r) {
      std::memcpy(&x, in[r] + i * sizeof(T), sizeof(T));
      acc = A::load(A::store(apply(op, acc, A::load(x))));
    }
    if (op == ncclAvg) acc = A::load(A::store(V(acc / V(nranks))));
    const T stored = A::store(acc);
    std::memcpy(o + i, &stored, sizeof(T));
  }
}

void reduce(ncclDataType_t type, ncclRedOp_t op, void* out, const char* const* in, int nranks, size_t count) {
  switch (type) {
    case ncclInt8: return reduce_typed<int8_t>(op, out, in, nranks, count);
    case ncclUint8: return reduce_typed<uint8_t>(op, out, in, nranks, count);
    case ncclInt32: return reduce_typed<int32_t>(op, out, in, nranks, count);
    case ncclUint32: return reduce_typed<uint32_t>(op, out, in, nranks, count);
    case ncclInt64: return reduce_typed<int64_t>(op, out, in, nranks, count);
    case ncclUint64: return reduce_typed<uint64_t>(op, out, in, nranks, count);
    case ncclFloat16: return reduce_typed<Half>(op, out, in, nranks, count);
    case ncclFloat32: return reduce_typed<float>(op, out, in, nranks, count);
    case ncclFloat64: return reduce_typed<double>(op, out, in, nranks, count);
    case ncclBfloat16: return reduce_typed<Bf16>(op, out, in, nranks, count);
  }
}

}  // namespace

// ---- communicators ----
namespace {

// NCCL_EMULATION_TIMEOUT: how long a rank waits for its peers, in seconds.
bool read_timeout(double* seconds, std::string* error) {
  const char* value = std::getenv("NCCL_EMULATION_TIMEOUT");
  *seconds = 60;
  if (!value || !*value) return true;
  char* end = nullptr;
  *seconds = std::strtod(value, &end);
  if (*end == '\0' && *seconds > 0) return true;
  *error = cat("NCCL_EMULATION_TIMEOUT='", value, "' is not a positive number of seconds");
  return false;
}

// Takes rank `rank` in the segment of `id` without waiting for the others (await_peers does).
ncclResult_t join(const ncclUniqueId& id, int nranks, int rank, int device, const char* what, ncclComm_t* out) {
  IdContents contents;
  std::memcpy(&contents, id.internal, sizeof contents);
  if (std::memcmp(contents.magic, kIdMagic, sizeof kIdMagic) != 0)
    return refuse(ncclInvalidArgument, cat(what,
                                           ": the unique id was not made by ncclGetUniqueId: rank 0 makes it and "
                                           "sends it to every rank (MPI_Bcast) before they call ",
                                           what));
  auto s = std::make_shared<CommState>();
  std::string error;
  if (!read_timeout(&s->timeout_s, &error)) return refuse(ncclInvalidArgument, cat(what, ": ", error));
  char name[64];
  std::snprintf(name, sizeof name, "/linattn-nccl-%016llx%016llx", static_cast<unsigned long long>(contents.token[0]),
                static_cast<unsigned long long>(contents.token[1]));
  s->name = name;
  s->nranks = nranks;
  s->rank = rank;
  s->device = device;

  const int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0)
    return refuse(ncclSystemError, cat(what, ": shm_open(", name, ") failed: ", std::strerror(errno),
                                       " (the emulated NCCL meets its peers in /dev/shm)"));
  const size_t bytes = segment_bytes(nranks);
  const int grown = posix_fallocate(fd, 0, off_t(bytes));  // grows the segment, never shrinks what a peer mapped
  void* base = grown == 0 ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int map_errno = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name);
    return refuse(ncclSystemError, cat(what, ": cannot map ", bytes >> 20, " MiB of /dev/shm for ", nranks,
                                       " ranks: ", std::strerror(grown ? grown : map_errno)));
  }
  s->base = base;  // from here ~CommState unmaps it

  int32_t agreed = 0;
  if (!s->header().nranks.compare_exchange_strong(agreed, nranks) && agreed != nranks)
    return refuse(ncclInvalidArgument, cat(what, ": rank ", rank, " was given nranks ", nranks, ", another rank ",
                                           agreed, ": every rank must pass the same nranks"));
  RankState& me = s->state(rank);
  int32_t free_number = absent;
  if (!me.presence.compare_exchange_strong(free_number, claimed))
    return refuse(ncclInvalidArgument, cat(what, ": rank ", rank, " of ", nranks,
                                           " has joined already: each thread or process must pass its own rank"));
  s->owns_rank = true;
  me.pid = getpid();
  me.device = device;
  me.presence.store(joined, std::memory_order_release);
  *out = new ncclComm{std::move(s)};
  return ncclSuccess;
}

// Waits until every rank has joined, then checks that no two share a device.
ncclResult_t await_peers(ncclComm_t comm, const char* what) {
  CommState& s = *comm->state;
  const std::string where = cat(what, ": rank ", s.rank, " of ", s.nranks, ": ");
  // A peer that joined may have left already, or given up after seeing what this rank will see.
  const std::string why =
      wait_for_ranks(s, "join", [&](int r) { return s.state(r).presence.load(std::memory_order_acquire) >= joined; });
  if (!why.empty()) {
    s.give_up(why);
    shm_unlink(s.name.c_str());  // no rank will come: the segment must not outlive the processes
    return refuse(ncclRemoteError,
                  cat(where, why, "; every rank must call ncclCommInitRank with the same unique id and nranks"));
  }
  shm_unlink(s.name.c_str());  // all have mapped it: it now lives exactly as long as their mappings
  for (int r = 0; r < s.nranks; ++r)
    for (int q = r + 1; q < s.nranks; ++q)
      if (s.state(r).device == s.state(q).device) {
        const std::string duplicate =
            cat("ranks ", r, " and ", q, " are both on device ", s.state(r).device,
                ": each rank needs its own GPU (call cudaSetDevice(local rank) before ncclCommInitRank)");
        s.give_up(duplicate);
        return refuse(ncclInvalidUsage, where + duplicate);
      }
  for (int r = 0; r < s.nranks; ++r)
    if (s.state(r).presence.load(std::memory_order_acquire) == gave_up) {
      const std::string peer = cat("rank ", r, " gave up: ", s.state(r).reason);
      s.give_up(peer);
      return refuse(ncclRemoteError, where + peer);
    }
  return ncclSuccess;
}

}  // namespace

// ---- collectives ----
namespace {

struct Collective {
  Kind kind;
  const char* send;
  char* recv;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  int root;
};

struct Failure {
  ncclResult_t result = ncclSuccess;
  std::string why;
  explicit operator bool() const { return result != ncclSuccess; }
};

// One round: every rank puts its contribution in its slot, waits for every rank's, then reads them.
Failure run_round(CommState& s, const Call& call, const std::function<void(char*)>& contribute,
                  const std::function<void(const char* const*)>& combine) {
  const uint64_t round = ++s.round;
  RankState& me = s.state(s.rank);
  // This rank's slot holds the previous round until every rank has read it.
  std::string why = wait_for_ranks(s, "finish the previous round", [&](int r) {
    return s.state(r).finished.load(std::memory_order_acquire) >= round - 1;
  });
  if (!why.empty()) return {ncclRemoteError, why};
  contribute(s.slot(s.rank));
  me.call = call;
  me.arrived.store(round, std::memory_order_release);
  why = wait_for_ranks(s, cat("arrive at ", kKindNames[int(call.kind)], " #", call.seq),
                       [&](int r) { return s.state(r).arrived.load(std::memory_order_acquire) >= round; });
  if (!why.empty())
    return {ncclRemoteError, why + "; each rank's stream must be synchronised by that rank's own thread or process"};
  std::vector<const char*> slots(s.nranks);
  bool same = true;
  for (int r = 0; r < s.nranks; ++r) {
    slots[r] = s.slot(r);
    same = same && s.state(r).call == call;
  }
  if (!same) {
    why = "the ranks called different collectives:";
    for (int r = 0; r < s.nranks; ++r) why += cat(r ? ";" : "", " rank ", r, ": ", describe(s.state(r).call));
    return {ncclInvalidUsage, why + "; every rank must call the same collectives in the same order"};
  }
  combine(slots.data());
  me.finished.store(round, std::memory_order_release);
  return {};
}

// A collective, chunk by chunk: as many elements a round as fit one rank's slot.
Failure run_rounds(CommState& s, const Collective& c, const Call& call) {
  const size_t element = kDataTypeBytes[c.datatype], n = size_t(s.nranks);
  const size_t per_round = c.kind == Kind::reduce_scatter ? kSlotBytes / (element * n) : kSlotBytes / element;
  for (size_t start = 0; start < c.count; start += per_round) {
    const size_t len = std::min(per_round, c.count - start), bytes = len * element, offset = start * element;
    const size_t stride = c.count * element;  // one rank's part of the gathered or scattered buffer
    auto contribute = [&](char* slot) {
      switch (c.kind) {
        case Kind::broadcast:
          if (s.rank == c.root) std::memcpy(slot, c.send + offset, bytes);
          break;
        case Kind::reduce_scatter:  // every rank's part of this chunk
          for (size_t r = 0; r < n; ++r) std::memcpy(slot + r * bytes, c.send + r * stride + offset, bytes);
          break;
        default: std::memcpy(slot, c.send + offset, bytes);
      }
    };
    auto combine = [&](const char* const* slots) {
      switch (c.kind) {
        case Kind::all_reduce: reduce(c.datatype, c.op, c.recv + offset, slots, s.nranks, len); break;
        case Kind::reduce:
          if (s.rank == c.root) reduce(c.datatype, c.op, c.recv + offset, slots, s.nranks, len);
          break;
        case Kind::broadcast: std::memcpy(c.recv + offset, slots[c.root], bytes); break;
        case Kind::all_gather:
          for (size_t r = 0; r < n; ++r) std::memcpy(c.recv + r * stride + offset, slots[r], bytes);
          break;
        case Kind::reduce_scatter: {
          std::vector<const char*> mine(n);
          for (size_t r = 0; r < n; ++r) mine[r] = slots[r] + s.rank * bytes;
          reduce(c.datatype, c.op, c.recv + offset, mine.data(), s.nranks, len);
          break;
        }
      }
    };
    if (Failure f = run_round(s, call, contribute, combine)) return f;
  }
  return {};
}

// The queued work: a failure breaks the communicator and fails the stream.
void run(CommState& s, const Collective& c, const Call& call) {
  std::lock_guard lock(s.running);
  Failure f;
  {
    std::lock_guard broken_lock(s.broken_mutex);
    if (s.broken != ncclSuccess) f = {s.broken, "the communicator failed earlier: " + s.broken_reason};
  }
  if (!f) f = run_rounds(s, c, call);
  if (!f) return;
  const std::string detail =
      cat(kKindNames[int(c.kind)], " #", call.seq, " on rank ", s.rank, " of ", s.nranks, ": ", f.why);
  s.break_with(f.result, detail);
  s.give_up(detail);
  cuda_emu::fail(cudaErrorLaunchFailure, detail);
}

// The rank each thread has issued collectives for, per communicator (segment name).
thread_local std::unordered_map<std::string, int> rank_driven_by_this_thread;

// Checks a collective's arguments and queues it on the stream.
ncclResult_t issue(const Collective& c, ncclComm_t comm, cudaStream_t stream) {
  const char* what = kKindNames[int(c.kind)];
  if (!comm) return refuse(ncclInvalidArgument, cat(what, ": comm is null"));
  const std::shared_ptr<CommState>& state = comm->state;
  CommState& s = *state;
  {
    std::lock_guard lock(s.broken_mutex);
    if (s.broken != ncclSuccess)
      return refuse(s.broken, cat(what, ": the communicator failed earlier and cannot be used: ", s.broken_reason));
  }
  const std::string where = cat(what, " on rank ", s.rank, " of ", s.nranks, ": ");
  if (unsigned(c.datatype) >= unsigned(kDataTypes))
    return refuse(ncclInvalidArgument, cat(where, "datatype ", int(c.datatype), " is not an ncclDataType_t"));
  const bool reduces = c.kind == Kind::all_reduce || c.kind == Kind::reduce || c.kind == Kind::reduce_scatter;
  if (reduces && unsigned(c.op) >= unsigned(kRedOps))
    return refuse(ncclInvalidArgument, cat(where, "op ", int(c.op), " is not an ncclRedOp_t"));
  const bool rooted = c.kind == Kind::broadcast || c.kind == Kind::reduce;
  if (rooted && (c.root < 0 || c.root >= s.nranks))
    return refuse(ncclInvalidArgument, cat(where, "root ", c.root, " is not a rank of the ", s.nranks, " ranks"));

  const size_t element = kDataTypeBytes[c.datatype];
  const size_t send_parts = c.kind == Kind::reduce_scatter ? size_t(s.nranks) : 1;
  const size_t recv_parts = c.kind == Kind::all_gather ? size_t(s.nranks) : 1;
  size_t send_bytes = 0, recv_bytes = 0;
  if (__builtin_mul_overflow(c.count, send_parts * element, &send_bytes) ||
      __builtin_mul_overflow(c.count, recv_parts * element, &recv_bytes))
    return refuse(ncclInvalidArgument, cat(where, "count ", c.count, " of ", kDataTypeNames[c.datatype],
                                           " overflows the size of a buffer in bytes"));

  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != s.device)
    return refuse(ncclInvalidUsage,
                  cat(where, "the communicator is on device ", s.device, " but the calling thread's current device is ",
                      current, ": call cudaSetDevice(", s.device, ") first"));
  const auto driven = rank_driven_by_this_thread.try_emplace(s.name, s.rank).first;
  if (driven->second != s.rank)
    return refuse(ncclInvalidUsage,
                  cat(where, "this thread already issues collectives for rank ", driven->second,
                      " of this communicator: the emulation runs a rank's collectives on the thread that waits on "
                      "its stream, so each rank needs its own thread (or process)"));
  if (c.count == 0) return ncclSuccess;

  const bool reads_send = c.kind != Kind::broadcast || s.rank == c.root;  // NCCL ignores the others'
  const bool writes_recv = c.kind != Kind::reduce || s.rank == c.root;
  auto refuse_pointer = [&](const char* name, const void* p, size_t bytes) {
    return refuse(ncclInvalidArgument,
                  cat(where, name, " ", p, " with ", bytes, " bytes is not inside one cudaMalloc allocation (a host ",
                      "pointer, a freed buffer, or a count larger than the buffer)"));
  };
  if (reads_send && !cuda_emu::in_device_memory(c.send, send_bytes))
    return refuse_pointer("sendbuff", c.send, send_bytes);
  if (writes_recv && !cuda_emu::in_device_memory(c.recv, recv_bytes))
    return refuse_pointer("recvbuff", c.recv, recv_bytes);
  if (reads_send && writes_recv && c.send < c.recv + recv_bytes && c.recv < c.send + send_bytes) {
    const bool in_place = c.kind == Kind::all_gather       ? c.send == c.recv + s.rank * send_bytes
                          : c.kind == Kind::reduce_scatter ? c.recv == c.send + s.rank * recv_bytes
                                                           : c.send == c.recv;
    if (!in_place)
      return refuse(ncclInvalidArgument,
                    cat(where, "sendbuff and recvbuff overlap but are not in place (in place is ",
                        c.kind == Kind::all_gather       ? "sendbuff == recvbuff + rank * sendcount"
                        : c.kind == Kind::reduce_scatter ? "recvbuff == sendbuff + rank * recvcount"
                                                         : "sendbuff == recvbuff",
                        ")"));
  }
  const Call call{++comm->issued, c.count, c.kind, int32_t(c.datatype), int32_t(c.op), int32_t(c.root)};
  cuda_emu::count(cuda_emu::Count::library_call);
  cuda_emu::enqueue(stream, what, [state, c, call] { run(*state, c, call); });
  return ncclSuccess;
}

thread_local int group_depth = 0;

}  // namespace

// ---- the API ----
const char* ncclGetErrorString(ncclResult_t result) {
  if (result != ncclSuccess && result == last_result && !last_message.empty()) return last_message.c_str();
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "a CUDA call failed";
    case ncclSystemError: return "a system call failed";
    case ncclInternalError: return "an internal check of the emulated NCCL failed";
    case ncclInvalidArgument: return "an argument has an invalid value";
    case ncclInvalidUsage: return "NCCL was called incorrectly";
    case ncclRemoteError: return "a peer rank exited, hangs, or cannot be reached";
  }
  return "not an ncclResult_t";
}

const char* ncclGetLastError(ncclComm_t) { return last_message.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return refuse(ncclInvalidArgument, "ncclGetUniqueId: id is null");
  IdContents contents{};
  std::memcpy(contents.magic, kIdMagic, sizeof kIdMagic);
  std::random_device entropy;
  for (uint64_t& word : contents.token) word = (uint64_t(entropy()) << 32) ^ entropy();
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, &contents, sizeof contents);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm) return refuse(ncclInvalidArgument, "ncclCommInitRank: comm is null");
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return refuse(ncclInvalidArgument, cat("ncclCommInitRank: rank ", rank, " of ", nranks,
                                           " ranks: need nranks >= 1 and 0 <= rank < nranks"));
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess)
    return refuse(ncclUnhandledCudaError, "ncclCommInitRank: cudaGetDevice failed");
  ncclComm_t joined_comm = nullptr;
  if (ncclResult_t r = join(id, nranks, rank, device, "ncclCommInitRank", &joined_comm)) return r;
  if (ncclResult_t r = await_peers(joined_comm, "ncclCommInitRank")) {
    delete joined_comm;
    return r;
  }
  *comm = joined_comm;
  return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms || ndev < 1) return refuse(ncclInvalidArgument, "ncclCommInitAll: need comms and ndev >= 1");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess)
    return refuse(ncclUnhandledCudaError, "ncclCommInitAll: cudaGetDeviceCount failed");
  for (int i = 0; i < ndev; ++i) {
    const int device = devlist ? devlist[i] : i;
    if (device < 0 || device >= devices)
      return refuse(ncclInvalidArgument,
                    cat("ncclCommInitAll: rank ", i, "'s device ", device, " is not one of the ", devices, " devices"));
  }
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  std::vector<ncclComm_t> made(ndev, nullptr);
  ncclResult_t result = ncclSuccess;
  for (int i = 0; i < ndev && result == ncclSuccess; ++i)
    result = join(id, ndev, i, devlist ? devlist[i] : i, "ncclCommInitAll", &made[i]);
  for (int i = 0; i < ndev && result == ncclSuccess; ++i) result = await_peers(made[i], "ncclCommInitAll");
  for (int i = 0; i < ndev; ++i) {
    if (result != ncclSuccess) delete made[i];
    comms[i] = result == ncclSuccess ? made[i] : nullptr;
  }
  return result;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;  // queued collectives keep the state; the rank leaves when the last of them has run
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (!comm || !count) return refuse(ncclInvalidArgument, "ncclCommCount: comm or count is null");
  *count = comm->state->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (!comm || !device) return refuse(ncclInvalidArgument, "ncclCommCuDevice: comm or device is null");
  *device = comm->state->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (!comm || !rank) return refuse(ncclInvalidArgument, "ncclCommUserRank: comm or rank is null");
  *rank = comm->state->rank;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return refuse(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  --group_depth;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue(
      {Kind::all_reduce, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), count, datatype, op, 0},
      comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue({Kind::broadcast, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), count, datatype,
                ncclSum, root},
               comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return issue(
      {Kind::reduce, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), count, datatype, op, root}, comm,
      stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return issue({Kind::all_gather, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), sendcount, datatype,
                ncclSum, 0},
               comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return issue({Kind::reduce_scatter, static_cast<const char*>(sendbuff), static_cast<char*>(recvbuff), recvcount,
                datatype, op, 0},
               comm, stream);
}
