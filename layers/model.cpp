#include "layers/model.h"

#include <cmath>
#include <map>
#include <sstream>

#include "autograd/saved.h"

namespace linattn {

Model::Model(const ModelConfig& c, DType dtype) : config_(c) {
  const double std = c.initializer_range;
  // Output projections of each residual branch are scaled down so the residual stream's variance
  // does not grow with depth.
  const double out_std = std / std::sqrt(2.0 * double(c.num_hidden_layers));
  embeddings_ = params_.add("model.embeddings.weight", {c.vocab_size, c.hidden_size}, Init::Normal(std), true);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    std::string prefix = "model.layers." + std::to_string(i);
    Block b;
    b.first_param = int(params_.size());
    b.attn_norm = RMSNorm(params_, prefix + ".attn_norm", c.hidden_size, c.norm_eps);
    const LayerSpec& spec = c.layers[size_t(i)];
    b.attn = mixer_descriptor(spec.mixer).make(params_, prefix + ".attn", c, spec, std, out_std);
    if (c.mlp == Mlp::swiglu) {
      b.mlp_norm = RMSNorm(params_, prefix + ".mlp_norm", c.hidden_size, c.norm_eps);
      b.mlp = MLP(params_, prefix + ".mlp", c.hidden_size, c.resolved_intermediate_size(), std, out_std);
    }
    b.end_param = int(params_.size());
    blocks_.push_back(std::move(b));
  }
  norm_ = RMSNorm(params_, "model.norm", c.hidden_size, c.norm_eps);
  lm_head_ = c.tie_word_embeddings ? embeddings_
                                   : params_.add("lm_head.weight", {c.vocab_size, c.hidden_size}, Init::Normal(std), true);
  params_.allocate(dtype);
}

Variable Model::logits(const Tensor& ids, const ops::Segments& segments) const {
  return head(stream(ids, nullptr, 0, segments));
}

Variable Model::added(const Residual& x) { return x.pending.defined() ? ops::add(x.x, x.pending) : x.x; }

Variable Model::body(const Tensor& ids, std::vector<MixerState>* states, int64_t pos,
                     const ops::Segments& segments) const {
  return added(stream(ids, states, pos, segments));
}

Model::Residual Model::stream(const Tensor& ids, std::vector<MixerState>* states, int64_t pos,
                              const ops::Segments& segments) const {
  LINATTN_CHECK(ids.ndim() == 2, "Model::logits: ids must be [batch, seq_len], got ", ids.str());
  // Host ids (a batch) stay there: the embedding checks them on the host and copies them over without
  // waiting for the device.
  Residual x{ops::embedding(ids, params_[embeddings_]), {}};
  // Recomputation applies where a tape is recorded: in training, not when decoding or evaluating.
  if (recompute_ == ops::Recompute::none || states || !grad_enabled()) {
    for (size_t i = 0; i < blocks_.size(); ++i)
      x = block(blocks_[i], x, states ? &(*states)[i] : nullptr, pos, segments);
    return x;
  }
  // Each block is one checkpointed region (autograd/checkpoint.h), replayed in backward, after the
  // caller's segments are gone: the replays read a copy. A region's output is its stream added up.
  auto kept_segments = std::make_shared<const ops::Segments>(segments);
  ops::SaveInBf16 bf16_saves(params_.has_bf16_copy());  // the blocks' inputs, kept by their regions
  for (const Block& b : blocks_) {
    std::vector<Variable> params;
    for (int id = b.first_param; id < b.end_param; ++id) params.push_back(params_[id]);
    x.x = ops::checkpoint(
        recompute_,
        [this, &b, kept_segments](const Variable& in) { return added(block(b, {in, {}}, nullptr, 0, *kept_segments)); },
        x.x, params);
  }
  return x;
}

std::pair<Variable, Variable> Model::norm_of(const RMSNorm& norm, const Residual& x) const {
  if (x.pending.defined()) return norm.after_add(params_, x.x, x.pending);
  return {x.x, norm(params_, x.x)};
}

// What a block's backward reads, per token, in each recompute mode (autograd/checkpoint.h):
//   none:      everything the ops save: x, the norm outputs, the mixer's projections, gates and
//              activations, its core's output (the gated output norm's input) and chunk states, the
//              residual sum, the MLP's gate and up outputs.
//   selective: x and the outputs of the matrix products (the mixer's projections, o_proj, the MLP's
//              gate, up and down) and of softmax attention; the norms (attn_norm, mlp_norm, the
//              output norm), SwiGLUs, gate activations, short convolutions, L2 norms, RoPE, residual
//              sums and linear mixer cores are recomputed in backward, one block at a time.
//   full:      x only; the whole block is recomputed in backward, one block at a time.
// Under train.precision: bf16 the activations among these are kept as bf16 copies (autograd/saved.h),
// the norms' rstd, the chunk states and attention's log-sum-exp in float32.
Model::Residual Model::block(const Block& b, const Residual& in, MixerState* state, int64_t pos,
                             const ops::Segments& segments) const {
  ops::SaveInBf16 bf16_saves(params_.has_bf16_copy());  // in the replays of recomputation too
  const auto [x, h] = norm_of(b.attn_norm, in);  // the last block's MLP added in the norm's pass
  Variable mixed = state ? b.attn->decode(params_, h, *state, pos) : b.attn->forward(params_, h, segments);
  // model.mlp: none: norm + mixer only (fla's Mamba2 block)
  if (config_.mlp != Mlp::swiglu) return {x, mixed};
  const auto [r, normed] = b.mlp_norm.after_add(params_, x, mixed);  // r = x + mixed and its norm, one pass
  return {r, b.mlp(params_, normed)};
}

Variable Model::head(const Residual& x) const {
  ops::SaveInBf16 bf16_saves(params_.has_bf16_copy());
  return ops::linear(norm_of(norm_, x).second, params_[lm_head_]);
}

Variable Model::loss(const Tensor& ids, const Tensor& targets, const ops::Segments& segments,
                     size_t loss_chunk_bytes, const Tensor& seed) const {
  const Residual x = stream(ids, nullptr, 0, segments);
  ops::SaveInBf16 bf16_saves(params_.has_bf16_copy());
  // host targets: copied over without waiting
  return ops::linear_cross_entropy(norm_of(norm_, x).second, params_[lm_head_], targets, -100, loss_chunk_bytes,
                                   seed);
}

std::string Model::unsupported_on(Device device) const {
  for (size_t i = 0; i < config_.layers.size(); ++i) {
    const std::string& name = config_.layers[i].mixer;
    const std::string missing = mixer_descriptor(name).missing_kernels(device);
    if (!missing.empty())
      return "model.layers." + std::to_string(i) + " (" + name + "): no " +
             (device == Device::cuda ? "CUDA" : device_name(device)) + " kernel yet for " + missing;
  }
  return "";
}

int64_t Model::matmul_params() const {
  int64_t n = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape& s = params_.layout().entries()[i].shape;
    bool lookup_only = int(i) == embeddings_ && lm_head_ != embeddings_;
    bool conv = params_.name(int(i)).find("conv1d") != std::string::npos;
    if (s.ndim() == 2 && !lookup_only && !conv) n += s.numel();
  }
  return n;
}

double Model::flops_per_token(int64_t T) const {
  double f = 6.0 * double(matmul_params());
  for (const Block& b : blocks_) f += b.attn->mixing_flops_per_token(T);
  return f;
}

std::string Model::summary() const {
  std::map<std::string, int> kinds;
  for (const LayerSpec& l : config_.layers) {
    std::string k = l.mixer;
    if (mixer_descriptor(l.mixer).attention) k += l.window_size > 0 ? " (window " + std::to_string(l.window_size) + ")" : " (global)";
    kinds[k]++;
  }
  std::ostringstream os;
  os << "model: " << config_.num_hidden_layers << " layers, hidden " << config_.hidden_size << ", heads "
     << config_.num_heads << ", vocab " << config_.vocab_size
     << (config_.mlp == Mlp::none ? ", no MLP" : "") << ", mixers:";
  std::string sep = " ";
  for (auto& [k, n] : kinds) os << sep << n << "x " << k, sep = ", ";
  os << "\nlayers:";
  for (size_t i = 0; i < config_.layers.size(); ++i) {
    const LayerSpec& l = config_.layers[i];
    os << " " << i << ":" << l.mixer;
    if (mixer_descriptor(l.mixer).attention && l.window_size > 0) os << "/w" << l.window_size;
  }
  os << "\nparameters: " << params_.count() << " (" << matmul_params() << " in matrix products)";
  return os.str();
}

}  // namespace linattn
