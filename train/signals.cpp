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

void tell(const char* message) {
  size_t n = 0;
  while (message[n]) ++n;
  ssize_t ignored = write(2, message, n);
  (void)ignored;
}

// The signal thread: takes SIGINT and SIGTERM one at a time, outside any computation.
void take_signals(sigset_t signals) {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (!g_armed.load()) {
      tell("\nlinattn-train: interrupted before training started\n");
      _exit(128 + sig);
    }
    if (g_interrupts.fetch_add(1) >= 1) {
      tell("\nlinattn-train: second interrupt, exiting now\n");
      _exit(130);
    }
    tell("\nlinattn-train: interrupt received, stopping after this step (press Ctrl-C again to exit now)\n");
  }
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
}

void arm_interrupts() { g_armed.store(true); }

bool interrupt_requested() { return g_interrupts.load() > 0; }

}  // namespace linattn
