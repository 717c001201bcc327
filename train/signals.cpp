#include "train/signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace linattn {

namespace {

std::atomic<bool> g_armed{false};
std::atomic<int> g_interrupts{0};
std::atomic<int> g_rank{0}, g_world_size{1};  // set when armed
std::atomic<bool> g_output_gone{false};  // a write to stdout or stderr found no reader (EPIPE)

void tell(const char* message) {
  size_t n = 0;
  while (message[n]) ++n;
  ssize_t ignored = write(2, message, n);
  (void)ignored;
}

// The signal thread: takes SIGINT and SIGTERM one at a time, outside any computation.
void take_signals(sigset_t signals) {
  for (;;) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&signals, &info);
    if (sig < 0) continue;
    if (!g_armed.load()) {
      tell("\nlinattn-train: interrupted before training started\n");
      _exit(128 + sig);
    }
    if (g_interrupts.fetch_add(1) >= 1) {
      tell("\nlinattn-train: second interrupt, exiting now\n");
      _exit(130);
    }
    if (g_rank.load() != 0) continue;  // rank 0 tells
    // mpirun ends a job with SIGTERM to every rank: when a rank failed (MPI_Abort, or an exit without
    // MPI_Finalize), and when it was itself interrupted or killed. Rank 0 is then likely waiting for the
    // failed rank in a collective, which no step end follows.
    if (g_world_size.load() > 1 && sig == SIGTERM && info.si_code == SI_USER && info.si_pid == getppid())
      tell("\nlinattn-train: mpirun is ending the job (SIGTERM): another rank failed (its error is above), or "
           "mpirun was interrupted; stopping after this step if every rank is still there\n");
    else
      tell("\nlinattn-train: interrupt received, stopping after this step (press Ctrl-C again to exit now)\n");
  }
}

// SIGPIPE comes to the thread whose write found the pipe closed, at that write: the reader of our
// output (linattn-sweep, a pager) is gone. Training stops after the step with a checkpoint, as after
// a Ctrl-C; the writes that follow fail with EPIPE and are ignored. Before training starts the
// process ends as SIGPIPE's default would.
void on_broken_pipe(int) {
  if (!g_armed.load()) _exit(128 + SIGPIPE);
  g_output_gone.store(true);
}

}  // namespace

void take_interrupt_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread(take_signals, signals).detach();
  signal(SIGXFSZ, SIG_IGN);
  struct sigaction pipe_action {};
  pipe_action.sa_handler = on_broken_pipe;
  pipe_action.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &pipe_action, nullptr);
}

void arm_interrupts(int rank, int world_size) {
  g_rank.store(rank);
  g_world_size.store(world_size);
  g_armed.store(true);
}

bool interrupt_requested() { return g_interrupts.load() > 0 || g_output_gone.load(); }

}  // namespace linattn
