// Generation: a Model fed a prompt and then one token at a time, carrying each layer's state
// between calls (docs/decoding.md): the recurrent state of a linear mixer (constant size), the
// last inputs of each short convolution, and the keys and values of an attention layer (a ring of
// window_size for a sliding window, growing for global attention). Prefill-then-step gives the
// logits of Model::logits on the whole sequence (tests/layers/decoder_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "layers/model.h"

namespace linattn {

class Decoder {
 public:
  // Decodes `batch` sequences side by side, all at the same position. `model` must outlive it.
  Decoder(const Model& model, int64_t batch);

  // Feeds the next T tokens of every sequence, ids i32 [batch, T] (T >= 1; usually the prompt, run
  // on the training kernels), and returns the logits [batch, vocab] that predict the token after them.
  Tensor prefill(const Tensor& ids);
  // The same, with the logits at every fed position: [batch, T, vocab].
  Tensor prefill_all(const Tensor& ids);
  // Feeds one token per sequence (tokens.size() == batch, the recurrent step) and returns the
  // logits [batch, vocab] that predict the next one.
  Tensor step(const std::vector<int32_t>& tokens);

  // Forgets every sequence: the next call starts at position 0.
  void reset();
  int64_t batch() const { return batch_; }
  int64_t position() const { return pos_; }  // tokens fed so far to each sequence
  // One state per layer, in layer order: what to save, restore or move (docs/decoding.md).
  std::vector<MixerState>& states() { return states_; }
  const std::vector<MixerState>& states() const { return states_; }
  size_t state_bytes() const;  // memory the states hold, all sequences together
  // Continues from a saved state: one per layer (as states() returned them) at `position`.
  void restore(std::vector<MixerState> states, int64_t position);

 private:
  Tensor run(const Tensor& ids, bool all_positions);

  const Model& model_;
  int64_t batch_;
  int64_t pos_ = 0;
  std::vector<MixerState> states_;
};

}  // namespace linattn
