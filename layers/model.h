// The language model: embeddings, pre-norm blocks (mixer and SwiGLU MLP, or the mixer alone with
// mlp: none), final norm, LM head.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "layers/mixer.h"
#include "layers/modules.h"

namespace linattn {

class Model {
 public:
  Model(const ModelConfig& config, DType dtype);

  // ids: i32 [B, T] -> logits [B, T, vocab]. segments: the documents of the batch (document-aware
  // training, autograd/segments.h); empty = each row is one sequence.
  Variable logits(const Tensor& ids, const ops::Segments& segments = {}) const;
  // Mean cross-entropy of next-token prediction: targets i32 [B, T]. The logits are made a chunk of
  // rows of at most loss_chunk_bytes at a time (ops::linear_cross_entropy). seed: the gradient
  // backward will seed the loss with, when known (the head's backward then runs in the forward pass).
  Variable loss(const Tensor& ids, const Tensor& targets, const ops::Segments& segments = {},
                size_t loss_chunk_bytes = ops::kLossChunkBytes, const Tensor& seed = {}) const;

  // Activation recomputation in training (train.recompute; autograd/checkpoint.h): each block runs as
  // one checkpointed region. Decoding and evaluation (nothing recorded) run the blocks directly.
  void set_recompute(ops::Recompute mode) { recompute_ = mode; }
  ops::Recompute recompute() const { return recompute_; }

  Parameters& params() { return params_; }
  const Parameters& params() const { return params_; }
  const ModelConfig& config() const { return config_; }
  Device device() const { return params_.values().all().device(); }

  // Training FLOPs per token for sequences of T tokens: 6 x (parameters used in matrix products)
  // as in llm.c, plus the mixers' own work.
  double flops_per_token(int64_t T) const;
  int64_t matmul_params() const;
  std::string summary() const;  // one line per layer kind, the parameter count
  // Empty when every mixer of the model has its kernels on `device`; else names the first layer
  // that lacks some, and which: "model.layers.0 (gla): no CUDA kernel yet for gla_forward,
  // gla_backward" (the mixer descriptor's missing_kernels).
  std::string unsupported_on(Device device) const;

 private:
  friend class Decoder;  // layers/decoder.h
  // The residual stream between blocks: x + pending, pending the last branch's output not yet added
  // (undefined: none), which the next norm adds in its own pass (ops::add_rmsnorm): a block's last
  // residual add costs no pass of its own when the blocks run directly.
  struct Residual {
    Variable x, pending;
  };
  // The blocks over ids (no final norm): forward() of every mixer, or when decoding (states: one per
  // layer) their decode() at positions pos .. pos + T - 1. Then the final norm and the LM head.
  Residual stream(const Tensor& ids, std::vector<MixerState>* states, int64_t pos,
                  const ops::Segments& segments = {}) const;
  Variable body(const Tensor& ids, std::vector<MixerState>* states, int64_t pos,
                const ops::Segments& segments = {}) const;  // the stream added up
  Variable head(const Residual& x) const;
  static Variable added(const Residual& x);  // x.x + x.pending
  // {the stream added up, its norm}: one pass (ops::add_rmsnorm) when something is pending.
  std::pair<Variable, Variable> norm_of(const RMSNorm& norm, const Residual& x) const;

  struct Block {
    RMSNorm attn_norm, mlp_norm;  // mlp_norm and mlp: unset (no parameters) with mlp: none
    std::unique_ptr<MixerLayer> attn;
    MLP mlp;
    int first_param = 0, end_param = 0;  // its parameters' ids: [first_param, end_param)
  };
  // One block: r = x + mixer(norm(x)), then {r, mlp(norm(r))} (the MLP's residual add pending), or with
  // mlp: none {x, mixer(norm(x))}; state: the mixer's when decoding, else nullptr.
  Residual block(const Block& b, const Residual& x, MixerState* state, int64_t pos,
                 const ops::Segments& segments) const;
  ModelConfig config_;
  Parameters params_;
  int embeddings_ = -1;
  std::vector<Block> blocks_;
  RMSNorm norm_;
  int lm_head_ = -1;  // == embeddings_ when tied
  ops::Recompute recompute_ = ops::Recompute::none;
};

}  // namespace linattn
