// Ctrl-C and SIGTERM during training: the first signal asks the loop to stop after the current step
// (it then writes a checkpoint), the second exits at once.
#pragma once

namespace linattn {

// Sets the SIGINT and SIGTERM handlers.
void install_interrupt_handlers();
// Whether a signal has arrived since the handlers were installed.
bool interrupt_requested();

}  // namespace linattn
