// Validation: the mean loss, perplexity, bits per byte (and MQAR's recall accuracy) of a model on
// validation batches, without a tape; what the trainer reports and linattn-eval prints.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "core/memory.h"
#include "data/dataset.h"
#include "layers/model.h"
#include "train/communicator.h"
#include "train/config.h"

namespace linattn {

struct EvalResult {
  double loss = 0;           // mean nats per token
  double perplexity = 0;
  double bits_per_byte = 0;  // NaN when the data does not record its text bytes
  int64_t tokens = 0;        // targets that took a loss (MQAR: the queries)
  double recall_accuracy = NAN;  // MQAR: the fraction of queries whose argmax is their value; else NaN
};

// Mean validation loss of `model` over `val` (or its first max_tokens tokens, 0 = all) in windows of
// seq_len tokens, batch rows at a time, without recording a tape. Activations use `arena`.
// `boundaries`: whether each end-of-text token of a window starts a fresh sequence (reset); no
// default, since the run's data.document_boundaries is what an evaluation must repeat.
EvalResult evaluate(const Model& model, std::shared_ptr<const data::Dataset> val, int64_t seq_len, int64_t batch,
                    int64_t max_tokens, Arena& arena, Communicator* comm, DocumentBoundaries boundaries);
// The same over any validation batches (from the first), with recall accuracy where they score it;
// `eot`: the end-of-text token that cuts documents when `boundaries` is reset.
EvalResult evaluate(const Model& model, data::ValBatches& val, Arena& arena, Communicator* comm = nullptr,
                    DocumentBoundaries boundaries = DocumentBoundaries::cross, uint32_t eot = data::no_eot);

// The sequences of a batch of inputs [B, T]: its rows (cross), cut also where a row holds the end-of-text
// token `eot`, which opens the document it precedes (reset). Throws for reset when the data has no eot.
// The offsets go to `device` once, for every op of the batch (ops::Segments::to).
ops::Segments document_segments(const Tensor& inputs, DocumentBoundaries boundaries, uint32_t eot,
                                Device device = Device::cpu);

}  // namespace linattn
