// Kernels on the CPU: a launch is queued on its stream (runtime.cpp); when the stream runs it, every
// block runs in turn on the running OS thread, each of its threads a fiber (Boost.Context's fcontext,
// on a guard-paged stack). A thread runs until it reaches a barrier, a warp operation or its end; a
// warp runs as far as it can (a warp operation completes as soon as its lanes have arrived) before
// another warp runs. The scheduler opens a barrier when every live thread it concerns has arrived,
// and reports a barrier that cannot open (a thread that exited, or waits at another barrier) as an
// error naming the kernel and the source lines. A checked launch runs twice from the same memory,
// under the reference schedule (blocks, warps and threads in order) and a checked one (all three in
// reverse, or a seeded random one), and the results must agree bit for bit.
#include <cuda_runtime.h>

#include <boost/context/detail/fcontext.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuda_emulation/counters.h"
#include "emulation/internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define LINATTN_EMULATION_ASAN 1
#endif

uint3 threadIdx{};
uint3 blockIdx{};
dim3 blockDim{};
dim3 gridDim{};

namespace cuda_emu {
namespace {

namespace fc = boost::context::detail;

// ---- fiber stacks: reused from launch to launch, a PROT_NONE page below each ----

#if LINATTN_EMULATION_ASAN
constexpr size_t kStackBytes = 1024 * 1024;
#else
constexpr size_t kStackBytes = 256 * 1024;
#endif

struct Stack {
  char* low = nullptr;  // the lowest usable byte
  size_t size = 0;
};

Stack new_stack() {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "linattn CUDA emulation: cannot map a fiber stack\n");
    std::abort();
  }
  mprotect(p, page, PROT_NONE);  // an overflowing thread faults here instead of corrupting memory
  return Stack{static_cast<char*>(p) + page, kStackBytes};
}

// The stacks of one OS thread's fibers (one block runs at a time per OS thread).
std::vector<Stack>& stacks(size_t n) {
  thread_local std::vector<Stack> pool;
  while (pool.size() < n) pool.push_back(new_stack());
  return pool;
}

// ---- one block's threads ----

enum class State { ready, at_barrier, at_warp, done, failed };

struct WarpCall {
  WarpOpKind kind;
  unsigned mask;
  uint64_t value;
  int param, width;
  const void* mine = nullptr;  // exchange only
  size_t bytes = 0;
  void* all = nullptr;
};

struct Thread {
  uint3 idx;
  int linear = 0;
  State state = State::ready;
  Site site;  // where it waits
  WarpCall call{};
  uint64_t result = 0;
  fc::fcontext_t fiber = nullptr;  // where to resume it
  fc::fcontext_t back = nullptr;   // the scheduler, while it runs
  Stack stack;
#if LINATTN_EMULATION_ASAN
  void* fake_stack = nullptr;
  const void* back_low = nullptr;
  size_t back_size = 0;
#endif
};

struct Launch {
  LaunchConfig config;
  std::string name;
  std::shared_ptr<void> keep;
  void (*thread)(const void*);
  const void* data;
  std::vector<Span> touched;  // the allocations the arguments point into
};

struct BlockRun {
  const Launch* launch = nullptr;
  std::vector<Thread> threads;
  std::string error;  // set once; the block stops
};

thread_local BlockRun* t_block = nullptr;
thread_local Thread* t_self = nullptr;
thread_local void* t_dynamic_shared = nullptr;

// "kernels/cuda/attention.cu:104": the file's last two path parts and the line.
std::string where(const Site& s) {
  const std::string file = s.file_name();
  size_t cut = file.rfind('/');
  if (cut != std::string::npos && cut > 0) cut = file.rfind('/', cut - 1);
  return (cut == std::string::npos ? file : file.substr(cut + 1)) + ":" + std::to_string(s.line());
}

std::string thread_name(const Thread& t) {
  return "thread (" + std::to_string(t.idx.x) + "," + std::to_string(t.idx.y) + "," + std::to_string(t.idx.z) + ")";
}

std::string block_name() {
  return "block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) + ")";
}

const char* op_name(WarpOpKind k) {
  switch (k) {
    case WarpOpKind::sync: return "__syncwarp";
    case WarpOpKind::shfl: return "__shfl_sync";
    case WarpOpKind::shfl_up: return "__shfl_up_sync";
    case WarpOpKind::shfl_down: return "__shfl_down_sync";
    case WarpOpKind::shfl_xor: return "__shfl_xor_sync";
    case WarpOpKind::ballot: return "__ballot_sync";
    case WarpOpKind::any: return "__any_sync";
    case WarpOpKind::all: return "__all_sync";
    case WarpOpKind::exchange: return "a warp-collective WMMA operation";
  }
  return "a warp operation";
}

std::string mask_hex(unsigned m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", m);
  return buf;
}

// ---- switching between the scheduler and a thread ----

void switch_to_scheduler(Thread* self, bool final) {
#if LINATTN_EMULATION_ASAN
  __sanitizer_start_switch_fiber(final ? nullptr : &self->fake_stack, self->back_low, self->back_size);
#endif
  fc::transfer_t t = fc::jump_fcontext(self->back, nullptr);
  self->back = t.fctx;
#if LINATTN_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(self->fake_stack, &self->back_low, &self->back_size);
#endif
}

void fiber_main(fc::transfer_t t) {
  Thread* self = static_cast<Thread*>(t.data);
  self->back = t.fctx;
#if LINATTN_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &self->back_low, &self->back_size);
#endif
  try {
    t_block->launch->thread(t_block->launch->data);
    self->state = State::done;
  } catch (const std::exception& e) {
    if (t_block->error.empty()) t_block->error = thread_name(*self) + " threw: " + e.what();
    self->state = State::failed;
  }
  switch_to_scheduler(self, true);
  std::abort();  // a finished fiber is never resumed
}

void resume(Thread& th) {
  threadIdx = th.idx;
  t_self = &th;
#if LINATTN_EMULATION_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, th.stack.low, th.stack.size);
#endif
  fc::transfer_t t = fc::jump_fcontext(th.fiber, &th);
#if LINATTN_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  th.fiber = t.fctx;
  t_self = nullptr;
}

// Called on a thread's fiber: stops the block with `message` (the first error wins).
[[noreturn]] void fail_block(const std::string& message) {
  if (t_block->error.empty()) t_block->error = message;
  t_self->state = State::failed;
  switch_to_scheduler(t_self, false);
  std::abort();  // a failed thread is never resumed
}

void require_thread(const char* what) {
  if (!t_self || !t_block) {
    std::fprintf(stderr, "linattn CUDA emulation: %s called outside a kernel\n", what);
    std::abort();
  }
}

// ---- barriers and warp operations, resolved by the scheduler ----

int threads_in_warp(const BlockRun& b, int warp) {
  return std::min(32, int(b.threads.size()) - warp * 32);
}

// Completes warp w's operations every lane of whose mask has arrived; an operation that can never
// complete is an error. Returns whether any completed (its lanes are ready again).
bool resolve_warp(BlockRun& b, int w) {
  bool progress = false;
  const int lanes = threads_in_warp(b, w);
  auto lane_thread = [&](int l) -> Thread& { return b.threads[size_t(w * 32 + l)]; };
  unsigned pending = 0;
  for (int l = 0; l < lanes; ++l)
    if (lane_thread(l).state == State::at_warp) pending |= 1u << l;
  while (pending && b.error.empty()) {
    const int first = __builtin_ctz(pending);
    Thread& lead = lane_thread(first);
    const WarpCall& c = lead.call;
    // The operation, for messages: built only for one.
    const auto op = [&] {
      return std::string(op_name(c.kind)) + " (" + where(lead.site) + ", mask " + mask_hex(c.mask) + ")";
    };
    bool complete = true;
    for (int l = 0; l < 32 && b.error.empty(); ++l) {
      if (!(c.mask >> l & 1)) continue;
      if (l >= lanes) {
        b.error = "warp " + std::to_string(w) + " has only " + std::to_string(lanes) + " threads, but " + op() +
                  " names lane " + std::to_string(l);
        break;
      }
      const Thread& t = lane_thread(l);
      if (t.state == State::ready)  // released by another operation of this pass: not here yet
        complete = false;
      else if (t.state == State::done)
        b.error = thread_name(lead) + " waits at " + op() + " for lane " + std::to_string(l) + ", which has exited";
      else if (t.state == State::at_barrier)
        b.error = thread_name(lead) + " waits at " + op() + " for lane " + std::to_string(l) +
                  ", which waits at __syncthreads (" + where(t.site) + ")";
      else if (t.state == State::at_warp && (t.call.kind != c.kind || t.call.mask != c.mask))
        b.error = thread_name(lead) + " waits at " + op() + " while lane " + std::to_string(l) + " waits at " +
                  op_name(t.call.kind) + " (" + where(t.site) + ", mask " + mask_hex(t.call.mask) + ")";
      else if (t.state == State::at_warp && c.kind == WarpOpKind::exchange && t.call.bytes != c.bytes)
        b.error = "lanes " + std::to_string(first) + " and " + std::to_string(l) + " exchange different sizes at " + op();
    }
    if (!b.error.empty()) break;
    if (!complete) {
      pending &= ~(1u << first);
      continue;
    }
    // Every lane of the mask is here: compute each lane's result.
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
      if ((c.mask >> l & 1) && lane_thread(l).call.value) ballot |= 1u << l;
    thread_local std::vector<char> gathered;  // an exchange's 32 contributions, lane 0's first
    if (c.kind == WarpOpKind::exchange) {
      gathered.resize(32 * c.bytes);
      for (int j = 0; j < 32; ++j) std::memcpy(gathered.data() + size_t(j) * c.bytes, lane_thread(j).call.mine, c.bytes);
    }
    for (int l = 0; l < 32 && b.error.empty(); ++l) {
      if (!(c.mask >> l & 1)) continue;
      Thread& t = lane_thread(l);
      const int width = t.call.width;
      const int seg = width > 0 ? l / width * width : 0;
      int src = l;
      switch (c.kind) {
        case WarpOpKind::shfl: src = seg + ((t.call.param % width) + width) % width; break;
        case WarpOpKind::shfl_up: src = (l - seg) >= t.call.param ? l - t.call.param : l; break;
        case WarpOpKind::shfl_down: src = (l - seg) + t.call.param < width ? l + t.call.param : l; break;
        case WarpOpKind::shfl_xor: src = (l ^ t.call.param); if (src >= seg + width) src = l; break;
        default: break;
      }
      switch (c.kind) {
        case WarpOpKind::shfl:
        case WarpOpKind::shfl_up:
        case WarpOpKind::shfl_down:
        case WarpOpKind::shfl_xor:
          if (src < 0 || src >= 32 || !(c.mask >> src & 1)) {
            b.error = thread_name(t) + " reads lane " + std::to_string(src) + " at " + op() + ", which is not in the mask";
            break;
          }
          t.result = lane_thread(src).call.value;
          break;
        case WarpOpKind::ballot: t.result = ballot; break;
        case WarpOpKind::any: t.result = ballot != 0; break;
        case WarpOpKind::all: t.result = ballot == c.mask; break;
        case WarpOpKind::exchange: std::memcpy(t.call.all, gathered.data(), 32 * c.bytes); break;
        case WarpOpKind::sync: break;
      }
    }
    if (!b.error.empty()) break;
    for (int l = 0; l < 32; ++l)
      if (c.mask >> l & 1) lane_thread(l).state = State::ready;
    pending &= ~c.mask;
    progress = true;
  }
  return progress;
}

// Opens __syncthreads when every live thread waits at it; otherwise the block cannot go on.
void resolve_barrier(BlockRun& b) {
  const Thread* waiting = nullptr;
  const Thread* other = nullptr;
  for (const Thread& t : b.threads) {
    if (t.state != State::at_barrier) continue;
    if (!waiting) waiting = &t;
    else if (t.site.line() != waiting->site.line() || std::strcmp(t.site.file_name(), waiting->site.file_name()))
      other = &t;
  }
  if (!waiting) return;
  if (other) {
    b.error = thread_name(*waiting) + " waits at __syncthreads (" + where(waiting->site) + ") and " +
              thread_name(*other) + " at another __syncthreads (" + where(other->site) +
              "): a barrier must be reached by every thread of the block at the same place";
    return;
  }
  // Exited threads do not hold a barrier up, as on the hardware.
  for (Thread& t : b.threads)
    if (t.state == State::at_barrier) t.state = State::ready;
}

// ---- schedules ----

// The order in which a launch's blocks, a block's warps and a warp's threads run. The reference
// schedule runs all three in order; the checked one (LINATTN_EMULATION_SCHEDULE) reverses all
// three, or draws the warp to go on at random at every warp operation and barrier. A warp runs as
// far as it can before another one does: its threads in turn each up to their next barrier or warp
// operation, then the warp operations all of whose lanes have arrived complete, and so on, up to
// __syncthreads or the end. So a warp operation orders the threads of its warp, never other warps.
struct Schedule {
  std::string name;  // in messages: "warp 0 first"
  bool blocks_reversed = false, warps_reversed = false, lanes_reversed = false;
  bool random = false;
  std::mt19937_64 rng{};
};

Schedule in_order() { return Schedule{"warp 0 first"}; }
Schedule reversed() { return Schedule{"last warp first", true, true, true}; }

// Runs warp w's ready threads each up to its next barrier or warp operation, then completes the
// warp operations all of whose lanes have arrived. Returns whether some of its threads are ready.
bool step_warp(BlockRun& b, int w, Schedule& s) {
  const int lanes = threads_in_warp(b, w);
  int order[32];
  for (int l = 0; l < lanes; ++l) order[l] = s.lanes_reversed ? lanes - 1 - l : l;
  if (s.random) std::shuffle(order, order + lanes, s.rng);
  for (int k = 0; k < lanes && b.error.empty(); ++k) {
    Thread& t = b.threads[size_t(w * 32 + order[k])];
    if (t.state == State::ready) resume(t);
  }
  return b.error.empty() && resolve_warp(b, w);
}

// Runs one block to its end under schedule s.
void run_block(BlockRun& b, Schedule& s) {
  const int n = int(b.threads.size());
  const int warps = (n + 31) / 32;
  std::vector<Stack>& pool = stacks(size_t(n));
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[size_t(i)];
    t.state = State::ready;
    t.stack = pool[size_t(i)];
    t.fiber = fc::make_fcontext(t.stack.low + t.stack.size, t.stack.size, fiber_main);
  }
  std::vector<int> runnable;
  for (;;) {
    // Between two barriers: every warp as far as it goes.
    if (s.random) {
      runnable.clear();
      for (int w = 0; w < warps; ++w) runnable.push_back(w);
      while (!runnable.empty() && b.error.empty()) {
        const size_t k = size_t(s.rng() % runnable.size());
        if (!step_warp(b, runnable[k], s)) {
          runnable[k] = runnable.back();
          runnable.pop_back();
        }
      }
    } else {
      for (int k = 0; k < warps && b.error.empty(); ++k)
        while (step_warp(b, s.warps_reversed ? warps - 1 - k : k, s)) {
        }
    }
    if (!b.error.empty()) return;
    bool live = false;
    for (const Thread& t : b.threads) live |= t.state != State::done;
    if (!live) return;
    resolve_barrier(b);
    if (!b.error.empty()) return;
    bool ready = false;
    for (const Thread& t : b.threads) ready |= t.state == State::ready;
    if (!ready) {
      // Live threads, none ready, no barrier to open: some wait at a warp operation whose lanes
      // never all come (resolve_warp names them) or at a barrier others never reach.
      for (const Thread& t : b.threads)
        if (t.state == State::at_barrier) {
          b.error = thread_name(t) + " waits at __syncthreads (" + where(t.site) + ") that other threads never reach";
          return;
        }
      b.error = "the block cannot make progress";
      return;
    }
  }
}

// ---- the launch ----

constexpr unsigned char kSharedFill = 0xFF;  // shared memory at a block's start: NaN floats
#if LINATTN_EMULATION_ASAN
constexpr size_t kSharedGuard = 0;  // AddressSanitizer guards the buffer's end (poisoned in run_grid)
#else
constexpr size_t kSharedGuard = 64;  // bytes past the end that must stay untouched
#endif
constexpr unsigned char kGuardByte = 0xA5;

// One block at a time in the whole process: __shared__ variables are function-local statics.
std::mutex g_kernel_mutex;

// Which launches run under both schedules (LINATTN_EMULATION_CHECK): "every" launch; "first"
// (the default) the first kFirstChecked launches of each configuration (kernel, grid, block, shared
// bytes), so a training loop that repeats its launches pays for the check only in its first steps;
// "off" none.
enum class Check { every, first, off };
constexpr int kFirstChecked = 2;

// Read at every launch, so that a test can set it; a bad value is reported once.
Check check_setting() {
  const char* s = std::getenv("LINATTN_EMULATION_CHECK");
  const std::string v = s ? s : "first";
  if (v == "every") return Check::every;
  if (v == "off") return Check::off;
  static bool reported = false;  // guarded by g_kernel_mutex
  if (v != "first" && !reported) {
    reported = true;
    std::fprintf(stderr, "linattn CUDA emulation: LINATTN_EMULATION_CHECK=%s is not every, first or off; using first\n",
                 v.c_str());
  }
  return Check::first;
}

bool check_this_launch(const LaunchConfig& c) {
  switch (check_setting()) {
    case Check::every: return true;
    case Check::off: return false;
    case Check::first: break;
  }
  static std::mutex mutex;
  static std::map<std::string, int> launches;
  char key[160];
  std::snprintf(key, sizeof key, "%p %u %u %u %u %u %u %zu", c.kernel, c.grid.x, c.grid.y, c.grid.z, c.block.x,
                c.block.y, c.block.z, c.shared_bytes);
  std::lock_guard<std::mutex> lock(mutex);
  return ++launches[key] <= kFirstChecked;
}

// Runs every block of the launch; returns the first error ("" if none).
std::string run_grid(const Launch& L, Schedule& s) {
  const LaunchConfig& c = L.config;
  const size_t threads = size_t(c.block.x) * c.block.y * c.block.z;
  const uint64_t blocks = uint64_t(c.grid.x) * c.grid.y * c.grid.z;
  const size_t shared_total = (c.shared_bytes + kSharedGuard + 127) / 128 * 128;
  char* shared = static_cast<char*>(std::aligned_alloc(128, shared_total ? shared_total : 128));
#if LINATTN_EMULATION_ASAN
  // The rounding up to 128 bytes is not the kernel's: any access there is an overrun.
  ASAN_POISON_MEMORY_REGION(shared + c.shared_bytes, (shared_total ? shared_total : 128) - c.shared_bytes);
#endif
  BlockRun b;
  b.launch = &L;
  b.threads.resize(threads);
  for (size_t i = 0; i < threads; ++i) {
    Thread& t = b.threads[i];
    t.linear = int(i);
    t.idx = uint3{unsigned(i % c.block.x), unsigned(i / c.block.x % c.block.y), unsigned(i / (size_t(c.block.x) * c.block.y))};
  }
  gridDim = c.grid;
  blockDim = c.block;
  t_block = &b;
  t_dynamic_shared = shared;
  std::string error;
  for (uint64_t k = 0; k < blocks && error.empty(); ++k) {
    const uint64_t id = s.blocks_reversed ? blocks - 1 - k : k;
    blockIdx = uint3{unsigned(id % c.grid.x), unsigned(id / c.grid.x % c.grid.y), unsigned(id / (uint64_t(c.grid.x) * c.grid.y))};
    std::memset(shared, kSharedFill, c.shared_bytes);
    std::memset(shared + c.shared_bytes, kGuardByte, kSharedGuard);
    run_block(b, s);
    if (!b.error.empty()) {
      error = block_name() + ", " + b.error;
#if LINATTN_EMULATION_ASAN
      // The threads that did not finish leave their frames' redzones poisoned on stacks that the
      // next launch reuses.
      for (const Thread& t : b.threads)
        if (t.state != State::done) ASAN_UNPOISON_MEMORY_REGION(t.stack.low, t.stack.size);
#endif
      break;
    }
    for (size_t i = 0; i < kSharedGuard; ++i)
      if (static_cast<unsigned char>(shared[c.shared_bytes + i]) != kGuardByte) {
        error = block_name() + " wrote past the end of its " + std::to_string(c.shared_bytes) +
                " bytes of dynamic shared memory (at byte " + std::to_string(c.shared_bytes + i) + ")";
        break;
      }
  }
  t_block = nullptr;
  t_dynamic_shared = nullptr;
#if LINATTN_EMULATION_ASAN
  ASAN_UNPOISON_MEMORY_REGION(shared, shared_total ? shared_total : 128);
#endif
  std::free(shared);
  return error;
}

// Copies of the allocations a launch touches. The buffers are kept from launch to launch (one set
// per OS thread), so that a check costs copies, not fresh pages.
struct Snapshot {
  std::vector<std::vector<char>> bytes;
  void take(const std::vector<Span>& spans) {
    if (bytes.size() < spans.size()) bytes.resize(spans.size());
    for (size_t i = 0; i < spans.size(); ++i) {
      if (bytes[i].size() < spans[i].size) bytes[i].resize(spans[i].size);
      std::memcpy(bytes[i].data(), spans[i].base, spans[i].size);
    }
  }
  void restore(const std::vector<Span>& spans) const {
    for (size_t i = 0; i < spans.size(); ++i) std::memcpy(spans[i].base, bytes[i].data(), spans[i].size);
  }
};

// Where the results of schedules `a` (in `reference`) and `b` (in the allocations) first differ, or "".
std::string compare(const std::vector<Span>& spans, const Snapshot& reference, const std::string& a_name,
                    const std::string& b_name) {
  for (size_t i = 0; i < spans.size(); ++i) {
    const char* a = reference.bytes[i].data();
    const char* b = spans[i].base;
    if (std::memcmp(a, b, spans[i].size) == 0) continue;
    size_t at = 0;
    while (a[at] == b[at]) ++at;
    at &= ~size_t(3);
    float fa = 0, fb = 0;
    if (at + 4 <= spans[i].size) std::memcpy(&fa, a + at, 4), std::memcpy(&fb, b + at, 4);
    char buf[320];
    std::snprintf(buf, sizeof buf, "byte %zu of the %zu-byte allocation at %p: %.9g (%s) vs %.9g (%s)", at,
                  spans[i].size, static_cast<void*>(spans[i].base), double(fa), a_name.c_str(), double(fb),
                  b_name.c_str());
    return buf;
  }
  return "";
}

// The schedule checked launches are compared with the reference one by (LINATTN_EMULATION_SCHEDULE):
// "reversed" (the default: the last warp first, blocks and each warp's threads in reverse too), or
// "random:SEED", a random warp at every warp operation and barrier, each warp's threads in a random
// order and the blocks in or against order, drawn from SEED and the number of the launch. Read at
// every checked launch (a test sets it).
struct ScheduleSetting {
  bool random = false;
  uint64_t seed = 0;
  std::string error;  // what is wrong with the variable
};

ScheduleSetting schedule_setting() {
  const char* s = std::getenv("LINATTN_EMULATION_SCHEDULE");
  const std::string v = s ? s : "";
  ScheduleSetting out;
  if (v.empty() || v == "reversed") return out;
  const std::string prefix = "random:";
  if (v.compare(0, prefix.size(), prefix) == 0) {
    const std::string digits = v.substr(prefix.size());
    char* end = nullptr;
    errno = 0;
    const unsigned long long seed = std::strtoull(digits.c_str(), &end, 10);
    if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos && errno == 0 && *end == 0) {
      out.random = true;
      out.seed = seed;
      return out;
    }
  }
  out.error = "LINATTN_EMULATION_SCHEDULE=" + v +
              " is neither 'reversed' (the default) nor 'random:SEED' with SEED a non-negative integer "
              "(e.g. random:1); unset it or set one of those";
  return out;
}

Schedule checked_schedule(const ScheduleSetting& setting) {
  if (!setting.random) return reversed();
  static uint64_t launches = 0;  // guarded by g_kernel_mutex
  const uint64_t launch = ++launches;
  Schedule s{"random:" + std::to_string(setting.seed) + ", checked launch " + std::to_string(launch)};
  s.random = true;
  std::seed_seq seq{uint32_t(setting.seed), uint32_t(setting.seed >> 32), uint32_t(launch), uint32_t(launch >> 32)};
  s.rng.seed(seq);
  s.blocks_reversed = s.rng() & 1;
  return s;
}

// The two schedules differ; which single reversal (of the threads in a warp, the warps, the blocks)
// reproduces the difference on its own says what kind of race it is.
std::string race_kind(const Launch& L, const Snapshot& before, const Snapshot& reference) {
  struct Probe {
    bool blocks, warps, lanes;
    const char* kind;
  };
  const Probe probes[] = {
      {false, false, true, "a race between the threads of one warp: a missing __syncwarp or __syncthreads?"},
      {false, true, false,
       "a race between warps: a missing barrier? A shuffle, __syncwarp or WMMA operation orders only the "
       "threads of its own warp; what another warp wrote needs a __syncthreads between the write and the read."},
      {true, false, false,
       "a race between blocks: two blocks writing one place, or one reading what another writes? Only the "
       "end of a launch orders blocks."}};
  for (const Probe& p : probes) {
    before.restore(L.touched);
    Schedule s{"", p.blocks, p.warps, p.lanes};
    if (run_grid(L, s).empty() && !compare(L.touched, reference, "", "").empty()) return p.kind;
  }
  return "a race: a missing __syncthreads or __syncwarp, or two threads writing one place?";
}

void execute(const Launch& L) {
  std::lock_guard<std::mutex> lock(g_kernel_mutex);
  Schedule reference = in_order();
  if (!check_this_launch(L.config)) {
    const std::string e = run_grid(L, reference);
    if (!e.empty()) fail(cudaErrorLaunchFailure, "kernel " + L.name + ": " + e);
    return;
  }
  const ScheduleSetting setting = schedule_setting();
  if (!setting.error.empty()) {
    fail(cudaErrorLaunchFailure, "kernel " + L.name + ": " + setting.error);
    return;
  }
  thread_local Snapshot before, first;
  before.take(L.touched);
  std::string e = run_grid(L, reference);
  if (e.empty()) {
    first.take(L.touched);
    before.restore(L.touched);
    Schedule checked = checked_schedule(setting);
    e = run_grid(L, checked);
    if (e.empty()) {
      const std::string diff = compare(L.touched, first, reference.name, checked.name);
      if (!diff.empty())
        e = race_kind(L, before, first) + " The schedules " + reference.name + " and " + checked.name +
            " give different results: " + diff;
    } else {
      e = "under the schedule " + checked.name + ": " + e;
    }
  }
  if (!e.empty()) fail(cudaErrorLaunchFailure, "kernel " + L.name + ": " + e);
}

// ---- argument checks ----

struct MappedRanges {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  std::unordered_set<uint64_t> unmapped;  // words already found outside every mapping

  // The readable mappings of at most 1 TiB: a host object lives in one. Left out: reserved
  // PROT_NONE ranges and the terabytes AddressSanitizer maps for its shadow, where small integers
  // and float pairs would otherwise look like addresses.
  void reload() {
    ranges.clear();
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      uintptr_t lo = 0, hi = 0;
      char perms[8] = "";
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) == 3 && perms[0] == 'r' &&
          hi - lo <= (uintptr_t(1) << 40))
        ranges.emplace_back(lo, hi);
    }
  }
  bool contains(uintptr_t w) const {
    for (auto& [lo, hi] : ranges)
      if (w >= lo && w < hi) return true;
    return false;
  }
  // Whether w is an address in this process's memory (reloading the map at most once per launch).
  bool host_address(uint64_t w, bool& reloaded) {
    if (w < 65536 || w >= (uint64_t(1) << 47)) return false;
    if (contains(w)) return true;
    if (unmapped.count(w)) return false;
    if (!reloaded) {
      reload();
      reloaded = true;
      if (contains(w)) return true;
    }
    if (unmapped.size() > 65536) unmapped.clear();
    unmapped.insert(w);
    return false;
  }
};

std::mutex g_maps_mutex;
MappedRanges g_maps;

std::string hex(uint64_t w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, w);
  return buf;
}

}  // namespace

void* dynamic_shared() {
  require_thread("dynamic shared memory");
  return t_dynamic_shared;
}

void syncthreads(Site site) {
  require_thread("__syncthreads");
  t_self->site = site;
  t_self->state = State::at_barrier;
  switch_to_scheduler(t_self, false);
}

uint64_t warp_op(WarpOpKind kind, unsigned mask, uint64_t value, int param, int width, Site site) {
  require_thread(op_name(kind));
  const int lane = t_self->linear % 32;
  if (!(mask >> lane & 1))
    fail_block(thread_name(*t_self) + " (lane " + std::to_string(lane) + ") calls " + op_name(kind) + " at " +
               where(site) + " with mask " + mask_hex(mask) + ", which leaves it out");
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail_block(std::string(op_name(kind)) + " at " + where(site) + ": width " + std::to_string(width) +
               " is not a power of two from 1 to 32");
  t_self->site = site;
  t_self->call = WarpCall{kind, mask, value, param, width};
  t_self->state = State::at_warp;
  switch_to_scheduler(t_self, false);
  return t_self->result;
}

void warp_exchange(const void* mine, size_t bytes, void* all, Site site) {
  require_thread("a warp-collective operation");
  t_self->site = site;
  t_self->call = WarpCall{WarpOpKind::exchange, 0xffffffffu, 0, 0, 32, mine, bytes, all};
  t_self->state = State::at_warp;
  switch_to_scheduler(t_self, false);
}

namespace {
std::mutex g_recorder_mutex;
LaunchRecorder* g_recorder = nullptr;  // guarded by g_recorder_mutex
}  // namespace

LaunchRecorder::LaunchRecorder() {
  std::lock_guard<std::mutex> lock(g_recorder_mutex);
  if (g_recorder) {
    std::fprintf(stderr, "cuda emulation: a second LaunchRecorder while one is recording\n");
    std::abort();
  }
  g_recorder = this;
}

LaunchRecorder::~LaunchRecorder() {
  std::lock_guard<std::mutex> lock(g_recorder_mutex);
  g_recorder = nullptr;
}

void record_launch(const LaunchConfig& config) {
  std::lock_guard<std::mutex> lock(g_recorder_mutex);
  if (g_recorder) g_recorder->launches_.push_back({config.name, config.grid, config.block, config.shared_bytes});
}

void submit(const LaunchConfig& config, std::vector<ArgBytes> args, std::shared_ptr<void> keep,
            void (*thread)(const void*), const void* launch_data) {
  auto L = std::make_shared<Launch>();
  L->config = config;
  L->name = std::string("'") + config.name + "'";
  const dim3 g = config.grid, b = config.block;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads == 0 || g.x == 0 || g.y == 0 || g.z == 0) {
    reject(cudaErrorInvalidConfiguration, "kernel " + L->name + ": launched with a zero grid or block dimension");
    return;
  }
  if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64) {
    reject(cudaErrorInvalidConfiguration, "kernel " + L->name + ": a block of " + std::to_string(b.x) + " x " +
                                              std::to_string(b.y) + " x " + std::to_string(b.z) + " = " +
                                              std::to_string(threads) +
                                              " threads; a block has at most 1024 threads (x, y <= 1024, z <= 64)");
    return;
  }
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    reject(cudaErrorInvalidConfiguration, "kernel " + L->name + ": a grid of " + std::to_string(g.x) + " x " +
                                              std::to_string(g.y) + " x " + std::to_string(g.z) +
                                              " blocks; grid y and z are at most 65535, x at most 2^31 - 1");
    return;
  }
  const size_t limit = max_dynamic_shared(config.kernel);
  if (config.shared_bytes > limit) {
    reject(cudaErrorInvalidValue,
           "kernel " + L->name + ": " + std::to_string(config.shared_bytes) + " bytes of dynamic shared memory, above " +
               (limit == kDefaultDynamicShared
                    ? std::string("the 48 KiB a kernel gets without cudaFuncSetAttribute(kernel, "
                                  "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)")
                    : "the " + std::to_string(limit) + " bytes set with cudaFuncSetAttribute"));
    return;
  }
  // Every pointer-sized word of the arguments: device memory (remembered, for the two schedules'
  // comparison), or else no address of this process (a host pointer is refused).
  {
    std::lock_guard<std::mutex> lock(g_maps_mutex);
    bool reloaded = false;
    for (size_t a = 0; a < args.size(); ++a) {
      for (size_t off = 0; off + 8 <= args[a].size; off += 8) {
        uint64_t w = 0;
        std::memcpy(&w, static_cast<const char*>(args[a].data) + off, 8);
        if (w == 0) continue;
        Span s;
        if (find_allocation(reinterpret_cast<const void*>(w), 0, &s)) {
          bool seen = false;
          for (const Span& t : L->touched) seen |= t.base == s.base;
          if (!seen) L->touched.push_back(s);
        } else if (g_maps.host_address(w, reloaded)) {
          reject(cudaErrorInvalidValue,
                 "kernel " + L->name + ": argument " + std::to_string(a + 1) + " holds " + hex(w) +
                     (args[a].size > 8 ? " (at byte " + std::to_string(off) + " of the argument)" : std::string()) +
                     ", which is host memory or freed device memory, not a live cudaMalloc allocation: copy the data "
                     "to the device and pass the device pointer");
          return;
        }
      }
    }
  }
  record_launch(config);
  count(Count::kernel);
  L->keep = std::move(keep);
  L->thread = thread;
  L->data = launch_data;
  enqueue(config.stream, std::string("kernel ") + L->name, [L] { execute(*L); });
}

}  // namespace cuda_emu
