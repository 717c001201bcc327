// The CPU mixers over a batch's documents (MixerArgs::seqs, kernels/op_types.h): the chunkwise and
// recurrent kernels of kernels/cpu/ take rows of one length, so the entries (kernels/cpu/entries.cpp,
// mamba2_entries.cpp) call them once per document, on views of the batch's tensors, with the row
// states that kernels/sequences.h's initial_state_row / final_state_row give it (none: zeros in,
// nothing out) and its share of `saved`. Consecutive whole-row documents share one call, as the rows
// do.
//
// Why calls per document rather than one OpenMP loop over (document, head): every kernel, forward
// and backward, chunkwise and recurrent, stays as its tests check it, and each document gets the
// bits of a call on it alone by construction (Mamba2's dA and D gradients, sums over the rows of a
// call, included). A call is a plain function call on the host: nothing is launched or uploaded. The
// cost is parallelism: a short document's call spreads only its H heads over the threads.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace linattn::cpu {

using MixerCall = void (*)(const backend::MixerArgs& r);
using MixerSavedSize = int64_t (*)(const backend::MixerArgs& r);

// Runs `call` over the documents of r (once over r when r.seqs is empty); `saved_size` gives each call's share of r.saved (when defined), in the documents' order.
void call_per_sequence(const backend::MixerArgs& r, MixerCall call, MixerSavedSize saved_size);

// The elements of `saved` call_per_sequence's calls need together.
int64_t saved_size_per_sequence(const backend::MixerArgs& r, MixerSavedSize saved_size);

}  // namespace linattn::cpu
