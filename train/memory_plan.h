// The memory a training run needs on each rank, predicted before the run and without building the
// model at its size: `linattn-train --dry-run` prints it, and says whether it fits the GPU that is
// here, or an 80 GB H100 and a 141 GB H200 (docs/memory.md).
//
// Weights, gradients, AdamW moments and the bf16 weight copy follow from the parameter count. The
// activations (everything a micro-batch's forward and backward take from the trainer's arena, at
// their peak) are measured on small probe models and extrapolated: a probe keeps the config's
// sizes (hidden, heads, vocabulary, MLP) but has one layer of each distinct kind, then one more of
// a kind, at two short sequence lengths with one sequence. A layer kind's extra layer adds what such
// a layer keeps. The peak of each phase of the step (the forward, each node's backward) is linear in
// the micro-batch's tokens (every mixer keeps O(tokens) for its backward, attention included), but
// for the loss's logits, which are capped at a chunk of rows; the step's peak is the largest phase's.
// Which phase that is can change with the length: at a probe's few tokens the loss's logits make the
// peak, at a long micro-batch with recomputation the last layer's replay. So the prediction is exact
// in the layer count, and holds to the arena's alignment and gaps in the tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"
#include "layers/model.h"
#include "train/config.h"

namespace linattn {

struct MemoryPlan {
  int64_t parameters = 0;
  // Bytes per rank.
  double weights = 0, bf16_weights = 0, gradients = 0, moments = 0, activations = 0;
  int64_t micro_batch = 0, seq_len = 0;  // the micro-batch the activations are for
  Device probed_on = Device::cpu;  // where the probes ran (the config's device, or the CPU without a GPU)
  double total() const { return weights + bf16_weights + gradients + moments + activations; }
};

// A run fits a GPU when it needs at most this share of its memory: the CUDA context, cuBLAS's
// workspace and NCCL's buffers, which the plan does not count, take the rest.
constexpr double gpu_usable_share = 0.95;

// The plan of `config` (its model, train.dtype, precision, recompute and micro-batch, for this
// process's number of ranks). The probes run on train.device when it can run here, else on the CPU.
MemoryPlan plan_memory(const Config& config, int world_size = 1);

// The report: one line per part, the total, and whether it fits the GPU that is here (train.device:
// cuda) or the usual ones.
std::string describe(const MemoryPlan& plan, const Config& config);

// One forward and backward of `model` on a zero batch of [batch, seq] tokens, in `arena`, the
// logits made loss_chunk_bytes at a time: the arena's high-water mark (what a training micro-batch
// takes from it: live bytes and the gaps below them), the peak of the live bytes alone, and that
// peak in each phase of the step: the forward, then each node of the tape as backward runs it. The
// weights' bf16 copy, if the model keeps one, must be current.
struct ArenaPeaks {
  size_t high_water = 0, live = 0;
  std::vector<size_t> phases;
};
ArenaPeaks activation_peaks(Model& model, Arena& arena, int64_t batch, int64_t seq,
                            size_t loss_chunk_bytes = ops::kLossChunkBytes);

}  // namespace linattn
