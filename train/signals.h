// Ctrl-C and SIGTERM during training: the first signal asks the loop to stop after the current step
// (it then writes a checkpoint), the second exits at once.
//
// The signals are never handled inside a computation: they are blocked in every thread and taken by
// one thread of their own with sigwait. (An asynchronous handler runs on whichever thread the
// signal lands on, in the middle of oneDNN's JIT kernels too; with one, about 1 interrupted run in 10
// died of heap corruption right after Ctrl-C.)
#pragma once

namespace linattn {

// Blocks SIGINT and SIGTERM in this thread, and so in every thread started after it, and starts the
// thread that takes them. Call it first in main, before any other thread exists (OpenMP, oneDNN,
// MPI). Until arm_interrupts(), a signal ends the process at once, as by default. It also ignores
// SIGXFSZ, so that a write past the file size limit (ulimit -f) fails with EFBIG and is reported,
// naming the file and the limit, instead of killing the process without a word. Once training has
// started, a write to stdout or stderr whose pipe has no reader any more (SIGPIPE: the linattn-sweep
// that started the run was killed, or a pager quit) asks the loop to stop as a first signal does,
// so that the run writes its checkpoint instead of dying of SIGPIPE; it never counts as a second one.
void take_interrupt_signals();
// From now on the first signal asks the training loop to stop, and a second exits at once. Rank 0
// alone says so; under mpirun (`world_size` > 1) a SIGTERM from mpirun is told as what it is: the
// job ending, because another rank failed or mpirun was interrupted.
void arm_interrupts(int rank = 0, int world_size = 1);
// Whether a signal has arrived since arm_interrupts(), or the output's reader is gone.
bool interrupt_requested();

}  // namespace linattn
