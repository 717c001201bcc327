#include "train/signals.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace linattn {

namespace {

std::atomic<int> g_interrupts{0};

// Only async-signal-safe calls here: an atomic, write() and _exit().
void on_signal(int) {
  if (g_interrupts.fetch_add(1) >= 1) {
    const char msg[] = "\nlinattn-train: second interrupt, exiting now\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(130);
  }
  const char msg[] = "\nlinattn-train: interrupt received, stopping after this step (press Ctrl-C again to exit now)\n";
  ssize_t ignored = write(2, msg, sizeof(msg) - 1);
  (void)ignored;
}

}  // namespace

void install_interrupt_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return g_interrupts.load() > 0; }

}  // namespace linattn
