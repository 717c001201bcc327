// A mixer over a batch's documents (MixerArgs::seqs, kernels/op_types.h) as one call of a kernel that
// takes rows of one length per document: the CPU column's linear mixers (kernels/cpu/entries.cpp,
// mamba2_entries.cpp). Each document's call runs on views of the batch's tensors, with the row states that
// kernels/sequences.h's initial_state_row / final_state_row give it (none: zeros in, nothing out)
// and its share of `saved`. Consecutive whole-row documents share one call, as the rows do.
//
// On the CPU, why calls per document rather than one OpenMP loop over (document, head): every kernel, forward
// and backward, chunkwise and recurrent, stays as its tests check it, and each document gets the
// bits of a call on it alone by construction (Mamba2's dA and D gradients, sums over the rows of
// a call, included). A call is a plain function call on the host: nothing is launched or uploaded.
// The cost is parallelism: a short document's call spreads only its H heads over the threads.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace linattn {

using MixerCall = void (*)(const backend::MixerArgs& r);
using MixerSavedSize = int64_t (*)(const backend::MixerArgs& r);

// Runs `call` over the documents of r (once over r when r.seqs is empty); `saved_size` gives each
// call's share of r.saved (when defined), in the documents' order. offsets: r.seqs.offsets in host
// memory (on the CPU, r.seqs.offsets itself).
void call_per_sequence(const backend::MixerArgs& r, const int32_t* offsets, MixerCall call,
                       MixerSavedSize saved_size);

// The elements of `saved` call_per_sequence's calls need together.
int64_t saved_size_per_sequence(const backend::MixerArgs& r, const int32_t* offsets, MixerSavedSize saved_size);

}  // namespace linattn::cpu
