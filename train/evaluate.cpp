#include "train/evaluate.h"

#include <algorithm>

#include "autograd/ops.h"
#include "autograd/variable.h"

namespace linattn {

ops::Segments document_segments(const Tensor& inputs, DocumentBoundaries boundaries, uint32_t eot, Device device) {
  if (boundaries == DocumentBoundaries::cross) return {};
  LINATTN_REQUIRE(eot != data::no_eot, "document boundaries reset: the data's shards record no end-of-text token; "
                  "prepare the data with linattn-data prepare, or keep the documents' boundaries crossed");
  return ops::Segments::starting_at(inputs, int32_t(eot), device);
}

EvalResult evaluate(const Model& model, std::shared_ptr<const data::Dataset> val_data, int64_t seq_len,
                    int64_t batch_rows, int64_t max_tokens, Arena& arena, Communicator* comm,
                    DocumentBoundaries boundaries) {
  data::LoaderOptions lo;
  lo.batch_size = batch_rows;
  if (comm) {
    lo.rank = comm->rank();
    lo.world_size = comm->world_size();
  }
  lo.seq_len = seq_len;
  lo.max_tokens = uint64_t(max_tokens);
  data::ValLoader val(val_data, lo);
  return evaluate(model, val, arena, comm, boundaries, val_data->eot());
}

namespace {

// Targets that take a loss; of them, those whose logits' argmax is the target.
void count_targets(const Tensor& logits, const Tensor& targets, bool argmax, int64_t& counted, int64_t& correct) {
  const int32_t* tg = targets.data<int32_t>();
  const int64_t V = logits.shape().last();
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (tg[i] == data::kIgnoreTarget) continue;
    ++counted;
    if (!argmax) continue;
    dispatch_float(logits.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* row = logits.data<T>() + i * V;
      correct += std::max_element(row, row + V) - row == tg[i];
    });
  }
}

}  // namespace

EvalResult evaluate(const Model& model, data::ValBatches& val, Arena& arena, Communicator* comm,
                    DocumentBoundaries boundaries, uint32_t eot) {
  val.reset();
  NoGrad no_grad;
  double loss_sum = 0;
  int64_t tokens = 0, correct = 0;
  data::Batch batch;
  while (val.next(batch)) {
    if (batch.rows == 0) continue;
    {
      ArenaScope scope(arena);
      Variable logits =
          model.logits(batch.inputs, document_segments(batch.inputs, boundaries, eot, model.device()));
      const Device device = logits.device();
      const Tensor targets = device == Device::cpu ? batch.targets : batch.targets.to(device);
      const double l = ops::cross_entropy(logits, targets, data::kIgnoreTarget).value().item();
      int64_t n = 0;
      // The argmax is read on the host (MQAR's recall only).
      const bool argmax = val.scores_recall();
      count_targets(argmax && device != Device::cpu ? logits.value().to(Device::cpu) : logits.value(), batch.targets,
                    argmax, n, correct);
      loss_sum += l * double(n);
      tokens += n;
    }
    arena.reset();
  }
  double sums[3] = {loss_sum, double(tokens), double(correct)};
  if (comm) comm->allreduce_sum(sums, 3);
  loss_sum = sums[0];
  tokens = int64_t(sums[1]);
  EvalResult r;
  r.tokens = tokens;
  r.loss = tokens ? loss_sum / double(tokens) : NAN;
  r.perplexity = std::exp(r.loss);
  r.bits_per_byte = data::bits_per_byte(r.loss, val.bytes_per_token());  // NaN when unknown
  if (val.scores_recall()) r.recall_accuracy = tokens ? sums[2] / double(tokens) : NAN;
  return r;
}

}  // namespace linattn
