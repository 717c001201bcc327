// CUDA DeltaNet and Gated DeltaNet (the delta rule; a null log-decay a is DeltaNet): the device twin
// of kernels/cpu/deltanet.h, with the same arguments (DeltaNetArgs), layouts, math, named
// stages and `saved` buffer (so the chunkwise backward may follow either device's forward of the
// same sizes). Gradients accumulate (+=).
//
// The chunkwise forward is three launches (deltanet_block.h holds the block programs and how each
// splits over its threads): per chunk in parallel the WY factors that need no state (A^-1 by forward
// substitution in shared memory, and PG); the state pass, one block per (sequence, head) and tile of
// state columns walking the chunks in order (S0, R, U' of every chunk, float32 state); per chunk in
// parallel the output. The backward is three launches as well: per chunk in parallel what needs no
// state gradient (scale P^T dO and scale Q^T diag(gamma) dO); the pass of the state gradient dS
// from the last chunk to the first, one block per (sequence, head) and tile of state columns (dS of
// every chunk and X = A^-T dU'); per chunk in parallel every gradient. It reads the forward's
// `saved` and needs delta::backward_scratch floats of scratch (two [C, D]-sized blocks per chunk).
// The sequences are the rows or the batch's documents (p.seqs): one launch each for all of them,
// each document getting the bits of a call on it alone (h0 and ht as kernels/sequences.h says).
// The recurrent form steps token by token (the decoding path); its backward runs the chunkwise
// forward (into a scratch `saved`) and backward, which give the same gradients.
//
// p.precision bf16 or tf32 runs the per-chunk products on the tensor cores (deltanet.cu): the
// forward's (K Kᵀ, Q Kᵀ in the factors; Q S0 and P U' in the output) and, for Dk, Dv <= 64, the
// backward's (delta::backward_precision); the solve and the sequential passes stay float32.
// Pointers are device memory; kernels run on linattn::cuda::compute_stream(). Float32 tensors only.
// Chunk sizes 1..kDeltaNetMaxChunk (the chunk's products must fit the block's shared memory).
// Compiled with the CUDA backend only (LINATTN_CUDA).
#pragma once

#include <cstdint>

#include "kernels/cuda/deltanet_block.h"

namespace linattn::cuda {

inline constexpr int64_t kDeltaNetMaxChunk = 64;

// p.saved: deltanet_chunk_saved_size elements (with documents: as for one row of delta::Dims::tiles()
// chunks), filled here and read by the backward.
void deltanet_chunk_forward(const DeltaNetArgs<float>& p);
// work: delta::backward_scratch(delta::dims(p)) floats of scratch.
void deltanet_chunk_backward(const DeltaNetArgs<float>& p, float* work);
// p.saved unused; state: sequences * H * Dk * Dv floats of scratch.
void deltanet_recurrent_forward(const DeltaNetArgs<float>& p, float* state);

}  // namespace linattn::cuda
