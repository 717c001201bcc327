// Shared by the activation-recomputation tests (tests/layers, tests/cuda): a small model's losses
// and accumulated parameter gradients in a recompute mode, and a bit-for-bit comparison.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "layers/model.h"
#include "testing.h"
#include "train/config.h"

namespace linattn::testing {

// Two blocks of `layer` (a mixer's name, or a layer as the config's list writes it), hidden 16, two
// heads, chunks of 4 (the 13-token rows below end mid-chunk).
inline ModelConfig two_blocks_of(const std::string& layer) {
  return parse_config(R"(model:
  vocab_size: 11
  hidden_size: 16
  num_hidden_layers: 2
  num_heads: 2
  intermediate_size: 24
  chunk_size: 4
  layers: [)" + layer + ", " + layer + R"(]
train: {max_steps: 1}
)",
                      "two-blocks.yaml")
      .model;
}

struct LossesAndGradients {
  std::vector<double> losses;  // one per micro-batch
  Tensor grads;                // all parameters' (the flat buffer), accumulated, on the host
};

// Two micro-batches of 2 x 13 tokens, each row cut into documents by token 10 (the segments are a
// temporary that is gone before backward, as in the trainer), with the model in `mode`: their
// losses and the gradients accumulated over both (seeded with 1/2 each).
inline LossesAndGradients run_micro_batches(Model& model, ops::Recompute mode) {
  model.set_recompute(mode);
  model.params().zero_grad();
  const Device device = model.device();
  const DType dtype = model.params().values().all().dtype();
  Rng rng(21);
  LossesAndGradients r;
  for (int micro = 0; micro < 2; ++micro) {
    Tensor ids = Tensor::empty({2, 13}, DType::i32), targets = Tensor::empty({2, 13}, DType::i32);
    for (int64_t i = 0; i < 26; ++i) {
      ids.data<int32_t>()[i] = int32_t(rng.below(10));
      targets.data<int32_t>()[i] = int32_t(rng.below(11));
    }
    ids.data<int32_t>()[5] = ids.data<int32_t>()[13 + 9] = 10;
    Variable loss = model.loss(ids, targets, ops::Segments::starting_at(ids, 10, device));
    Tensor seed = Tensor::empty({1}, dtype, device);
    seed.fill_(0.5);
    backward({loss}, {seed});
    r.losses.push_back(loss.value().to(Device::cpu).to(DType::f64).data<double>()[0]);
  }
  r.grads = model.params().grads().all().to(Device::cpu);
  model.set_recompute(ops::Recompute::none);
  return r;
}

// Where two tensors first differ, or "" when they are equal bit for bit.
inline std::string bitwise_difference(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(Device::cpu), w = want.to(Device::cpu);
  if (g.shape() != w.shape() || g.dtype() != w.dtype()) return "shapes or dtypes differ: " + g.str() + " vs " + w.str();
  const size_t n = size_t(g.numel()), elem = dtype_size(g.dtype());
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(static_cast<const char*>(g.raw()) + i * elem, static_cast<const char*>(w.raw()) + i * elem, elem))
      return "first difference at flat index " + std::to_string(i) + "; " + compare(g, w).str();
  return "";
}

// The parameter (by name) a flat index of the gradient buffer falls in, for messages.
inline std::string parameter_at(const Parameters& params, int64_t index) {
  for (size_t p = 0; p < params.size(); ++p) {
    const FlatLayout::Entry& e = params.layout().entries()[p];
    if (index >= e.offset && index < e.offset + e.shape.numel()) return params.name(int(p));
  }
  return "padding";
}

// What differs between `mode`'s losses and gradients and recompute: none's (the first loss, or
// the first gradient element and its parameter), or "" when they are equal bit for bit. Each test
// asserts EXPECT_EQ(difference_from_none(...), "").
inline std::string difference_from_none(Model& model, ops::Recompute mode) {
  const LossesAndGradients none = run_micro_batches(model, ops::Recompute::none);
  const LossesAndGradients got = run_micro_batches(model, mode);
  if (!(max_abs(none.grads) > 0.0)) return "no gradient: the comparison would prove nothing";
  for (size_t i = 0; i < none.losses.size(); ++i)
    if (got.losses[i] != none.losses[i])
      return "micro-batch " + std::to_string(i) + ": loss " + std::to_string(got.losses[i]) + " vs " +
             std::to_string(none.losses[i]);
  const std::string diff = bitwise_difference(got.grads, none.grads);
  if (diff.empty()) return "";
  const Tensor g = got.grads.to(DType::f64), w = none.grads.to(DType::f64);
  for (int64_t i = 0; i < g.numel(); ++i)
    if (g.data<double>()[i] != w.data<double>()[i]) return diff + "; first in " + parameter_at(model.params(), i);
  return diff;
}

}  // namespace linattn::testing
