#include "layers/decoder.h"

#include "autograd/decoding.h"

namespace linattn {

Decoder::Decoder(const Model& model, int64_t batch)
    : model_(model), batch_(batch), states_(size_t(model.config().num_hidden_layers)) {
  LINATTN_CHECK(batch >= 1, "Decoder: batch ", batch, " must be >= 1");
  // The decoding ops (autograd/decoding.h) and the sampler read host memory.
  LINATTN_CHECK(model.device() == Device::cpu, "Decoder: decoding runs on the CPU only, not yet on ",
                device_name(model.device()), " (where the model's parameters are); sample from a checkpoint with ",
                "linattn-generate, which decodes on the CPU");
}

Tensor Decoder::run(const Tensor& ids, bool all_positions) {
  LINATTN_CHECK(ids.ndim() == 2 && ids.dtype() == DType::i32 && ids.shape()[0] == batch_ && ids.shape()[1] >= 1,
                "Decoder: expected token ids i32[", batch_, ", T >= 1], got ", ids.str());
  NoGrad no_grad;
  const int64_t T = ids.shape()[1];
  Variable x = model_.body(ids, &states_, pos_);
  pos_ += T;
  if (!all_positions) x = ops::view(ops::slice_time(x, T - 1, T), {batch_, x.shape()[2]});
  return model_.head({x, {}}).value().clone();  // a copy: the head's output may live in an activation arena
}

Tensor Decoder::prefill(const Tensor& ids) { return run(ids, false); }
Tensor Decoder::prefill_all(const Tensor& ids) { return run(ids, true); }

Tensor Decoder::step(const std::vector<int32_t>& tokens) {
  LINATTN_CHECK(int64_t(tokens.size()) == batch_, "Decoder::step: ", tokens.size(), " tokens for ", batch_,
                " sequences");
  Tensor ids = Tensor::empty({batch_, 1}, DType::i32);
  std::copy(tokens.begin(), tokens.end(), ids.data<int32_t>());
  return run(ids, false);
}

void Decoder::reset() {
  pos_ = 0;
  states_.assign(states_.size(), MixerState());
}

void Decoder::restore(std::vector<MixerState> states, int64_t position) {
  LINATTN_CHECK(states.size() == states_.size() && position >= 0, "Decoder::restore: ", states.size(),
                " layer states at position ", position, " for a model of ", states_.size(), " layers");
  states_ = std::move(states);
  pos_ = position;
}

size_t Decoder::state_bytes() const {
  size_t n = 0;
  for (const MixerState& s : states_) n += s.bytes();
  return n;
}

}  // namespace linattn
