// Every key of the run configuration, declared once: name, field (whose initializer is the
// default), doc, bound or choices. Checks that involve two keys are in config.cpp.
#include "train/config_keys.h"

#include <algorithm>
#include <optional>
#include <string>

#include "layers/mixer.h"

namespace linattn {

namespace {

using M = ModelConfig;

// Every mixer of the registry (layers/mixer.h).
std::vector<ConfigChoice> mixer_choices() {
  std::vector<ConfigChoice> choices;
  for (const MixerDescriptor* m : all_mixers()) choices.push_back({m->name, m->summary});
  return choices;
}

// expand_k as it runs: the value every linear mixer of the schedule resolves to, or -1 (each
// mixer's default) when they differ, as in a GLA + DeltaNet hybrid left at the defaults.
double emitted_expand_k(const ModelConfig& m) {
  std::optional<double> common;
  for (const LayerSpec& l : m.layers) {
    if (mixer_descriptor(l.mixer).attention) continue;  // attention does not use expand_k
    double ek = m.resolved_expand_k(l.mixer);
    if (common && *common != ek) return m.expand_k;
    common = ek;
  }
  return common.value_or(m.expand_k);
}

bool with_mlp(const ModelConfig& m) { return m.mlp != Mlp::none; }
bool without_mlp(const ModelConfig& m) { return m.mlp == Mlp::none; }

std::vector<ConfigKey<M>> general_model_keys() {
  return {
      config_key("vocab_size", &M::vocab_size,
                 "vocabulary size; must be at least the data's (bytes: 257 = 256 bytes + end-of-text)")
          .in(2, kMaxVocab),
      config_key("hidden_size", &M::hidden_size, "model width").in(1, kMaxWidth),
      config_key("num_hidden_layers", &M::num_hidden_layers, "number of blocks").in(1, kMaxLayers),
      config_key("num_heads", &M::num_heads, "heads of every mixer (must divide `hidden_size`)").at_least(1),
      config_key("num_kv_heads", &M::num_kv_heads,
                 "key/value heads of attention layers (grouped-query attention; must divide `num_heads`)")
          .at_least(0)
          .note("0 = num_heads")
          .shown("`num_heads`"),
      // The per-mixer default (-1) moves to the mixer descriptors with the mixer keys below.
      config_key("expand_k", &M::expand_k,
                 "key dim = `expand_k * hidden_size`; -1 = each mixer's default (GLA 0.5, the others 1); "
                 "config.yaml has the value the linear mixers resolve to")
          .range(0, true, kMaxExpand, false)
          .or_special(-1, "the mixer's default")
          .shown("-1 (mixer default)")
          .writes(emitted_expand_k),
      config_key("expand_v", &M::expand_v, "value dim = `expand_v * hidden_size`").range(0, true, kMaxExpand, false),
      config_choice("mlp", &M::mlp,
                    {{Mlp::swiglu, {"swiglu", "down(silu(gate(x)) * up(x)) after every mixer"}},
                     {Mlp::none, {"none", "blocks of norm + mixer only"}}},
                    "the MLP of every block: `swiglu` (`down(silu(gate(x)) * up(x))`, sized by `hidden_ratio` or "
                    "`intermediate_size`), or `none`: blocks of norm + mixer only, as in fla's and mamba_ssm's "
                    "Mamba2 (`hidden_ratio` and `intermediate_size` are then ignored, and config.yaml leaves them out)")
          .written_only_if(without_mlp),
      config_key("hidden_ratio", &M::hidden_ratio,
                 "MLP intermediate size = `hidden_ratio * hidden_size * 2/3`, rounded up to a multiple of 256")
          .range(0, true, kMaxExpand, false)
          .written_only_if(with_mlp),
      config_key("intermediate_size", &M::intermediate_size,
                 "the MLP intermediate size, when given (0: from `hidden_ratio`; config.yaml has the size used)")
          .in(0, kMaxExpand * kMaxWidth)
          .note("0 = derived")
          .shown("0 (derived)")
          .writes([](const M& m) -> ConfigValue { return m.resolved_intermediate_size(); })
          .written_only_if(with_mlp),
      config_key("norm_eps", &M::norm_eps, "RMSNorm epsilon").positive(),
      config_key("tie_word_embeddings", &M::tie_word_embeddings, "share the embedding matrix with the LM head"),
      config_key("initializer_range", &M::initializer_range,
                 "init stddev; output projections get `/ sqrt(2 * num_hidden_layers)`")
          .positive(),
      config_key("mixer", &M::mixer, "the default mixer of every layer").one_of(mixer_choices()).unknown_as("mixer"),
      config_key("chunk_size", &M::chunk_size, "chunk length of the linear mixers' training kernels")
          .in(1, 256)
          .note("16, 32 or 64 are the usual choices"),
      config_key("window_size", &M::window_size, "default window of `attention` layers (0 = global)")
          .in(0, kMaxSeqLen)
          .note("0 = global attention"),
      config_key("rope_theta", &M::rope_theta, "RoPE base of attention layers").positive(),
  };
}

std::vector<ConfigKey<M>> schedule_keys() {
  return {
      config_custom<M>("attn", "a mapping",
                       "fla's hybrid convention: `{layers: [i, ...] or every: N, num_heads, num_kv_heads, "
                       "window_size, rope_theta}` makes those layers softmax attention (no `window_size` = global; "
                       "`every: 2` = layers 1, 3, 5, ...); config.yaml writes it into `layers`")
          .written_only_if([](const M&) { return false; }),
      config_custom<M>("layers", "a list",
                       "one entry per layer: a mixer name, or a mapping of the keys below (`model.layers[i]`)"),
  };
}

}  // namespace

// The mixers' own keys, each declared by its descriptor (layers/mixers/); a key that several mixers
// use (conv_size) is listed once, as the first of them declares it.
std::vector<ConfigKey<ModelConfig>> mixer_option_keys() {
  std::vector<ConfigKey<ModelConfig>> keys;
  for (const MixerDescriptor* m : all_mixers())
    for (const ConfigKey<ModelConfig>& k : m->config_keys)
      if (std::none_of(keys.begin(), keys.end(), [&](const ConfigKey<ModelConfig>& seen) { return seen.name == k.name; }))
        keys.push_back(k);
  return keys;
}

const std::vector<ConfigKey<ModelConfig>>& model_keys() {
  static const std::vector<ConfigKey<ModelConfig>> keys = [] {
    std::vector<ConfigKey<ModelConfig>> all = general_model_keys();
    for (auto* part : {mixer_option_keys, schedule_keys})
      for (ConfigKey<ModelConfig>& k : part()) all.push_back(std::move(k));
    return all;
  }();
  return keys;
}

const std::vector<ConfigKey<LayerSpec>>& layer_keys() {
  using L = LayerSpec;
  auto attention_only = [](const L& l) { return mixer_descriptor(l.mixer).attention; };
  static const std::vector<ConfigKey<L>> keys = {
      config_key("mixer", &L::mixer, "the layer's mixer (not in `attn`)")
          .one_of(mixer_choices())
          .unknown_as("mixer")
          .shown("`model.mixer`"),
      config_key("num_heads", &L::num_heads, "the layer's heads (must divide `hidden_size`)")
          .at_least(1)
          .shown("`model.num_heads`"),
      config_key("num_kv_heads", &L::num_kv_heads, "attention: key/value heads (must divide `num_heads`)")
          .at_least(1)
          .shown("`model.num_kv_heads`")
          .written_only_if(attention_only),
      config_key("window_size", &L::window_size, "attention: the window (0 = global)")
          .in(0, kMaxSeqLen)
          .note("0 = global")
          .shown("`model.window_size` (`attn`: 0)")
          .written_only_if(attention_only),
      config_key("rope_theta", &L::rope_theta, "attention: the RoPE base")
          .positive()
          .shown("`model.rope_theta`")
          .written_only_if(attention_only),
  };
  return keys;
}

const std::vector<ConfigKey<DataConfig>>& data_keys() {
  using D = DataConfig;
  auto mqar = [](const D& d) { return d.source == "mqar"; };  // token runs keep the text they always had
  static const std::vector<ConfigKey<D>> keys = {
      config_key("path", &D::path,
                 "a folder written by `linattn-data prepare` (`*train*.bin`, `*val*.bin`; llm.c shards work too)"),
      config_key("seq_len", &D::seq_len, "tokens per training sequence").in(1, kMaxSeqLen),
      config_key("val_tokens", &D::val_tokens,
                 "tokens of the validation split read by the evaluations during training (0 = all of it); the "
                 "final evaluation always reads the whole split")
          .at_least(0)
          .note("0 = the whole split"),
      config_choice("document_boundaries", &D::document_boundaries,
                    {{DocumentBoundaries::cross, {"cross", ""}}, {DocumentBoundaries::reset, {"reset", ""}}},
                    "`reset`: each end-of-text token in a training or validation window starts a fresh sequence "
                    "(see \"Document boundaries\" under Data); `cross`: each window is one sequence, across "
                    "documents. Unset, it is `cross` where there is nothing to cut at: MQAR, and shards that "
                    "record no end-of-text token. A checkpoint written before the key existed (when every run was "
                    "`cross`) resumes and evaluates as `cross` unless the config sets the key. The eval lines end "
                    "in `documents cross|reset`, metrics.jsonl has `val_document_reset` (1 or 0)")
          .shown("`reset` (MQAR: `cross`)"),
      config_key("source", &D::source,
                 "`tokens`: the prepared folder at `path`; `mqar`: multi-query associative recall examples "
                 "generated in memory from `mqar` below ([MQAR](data.md#mqar-associative-recall))")
          .one_of({{"tokens", "the prepared folder at data.path"},
                   {"mqar", "generated associative recall, data.mqar"}})
          .written_only_if(mqar),
      config_custom<D>("mqar", "a mapping", "the MQAR task (`source: mqar` only)").written_only_if(mqar),
  };
  return keys;
}

// The bounds of the MQAR keys depend on each other and on seq_len: data::mqar_problem checks them.
const std::vector<ConfigKey<data::MqarTask>>& mqar_keys() {
  using Q = data::MqarTask;
  static const std::vector<ConfigKey<Q>> keys = {
      config_key("vocab_size", &Q::vocab_size,
                 "the task's vocabulary: keys `[1, V/2)`, values `[V/2, V)`; at least `2 num_kv_pairs + 2`; "
                 "`model.vocab_size` must be at least this"),
      config_key("num_kv_pairs", &Q::num_kv_pairs,
                 "key-value pairs per example, each queried once; `seq_len` must be at least `4 num_kv_pairs`"),
      config_key("power_a", &Q::power_a,
                 "query placement: slot `g` is drawn with weight `(g + 1)^(power_a - 1)` (small: queries close "
                 "after the pairs)"),
      config_key("num_train_examples", &Q::num_train_examples, "training examples (one epoch)"),
      config_key("num_val_examples", &Q::num_val_examples,
                 "validation examples; `val_tokens` limits the evaluations during training to "
                 "`val_tokens / seq_len` of them"),
      config_key("seed", &Q::seed, "the examples: example `i` of a split depends on `(seed, split, i)` only"),
  };
  return keys;
}

const std::vector<ConfigKey<TrainConfig>>& train_keys() {
  using T = TrainConfig;
  static const std::vector<ConfigKey<T>> keys = {
      config_key("batch_size", &T::batch_size, "global batch, in sequences").in(1, kMaxBatch),
      config_key("micro_batch_size", &T::micro_batch_size,
                 "sequences per forward/backward on each rank (0: `batch_size / ranks`); each rank runs "
                 "`batch_size / ranks / micro_batch_size` gradient-accumulation steps")
          .at_least(0)
          .shown("`batch_size / ranks`"),
      config_key("lr", &T::lr, "peak learning rate").positive(),
      config_key("lr_min", &T::lr_min,
                 "final learning rate, at most `lr`: the last step's when the run is bounded by steps or tokens")
          .at_least(0),
      config_key("warmup_steps", &T::warmup_steps,
                 "linear warmup: step `s < warmup_steps` runs at `lr * (s + 1) / warmup_steps`")
          .at_least(0),
      config_choice("schedule", &T::schedule,
                    {{Schedule::cosine, {"cosine", ""}}, {Schedule::linear, {"linear", ""}},
                     {Schedule::constant, {"constant", ""}}},
                    "the learning rate after warmup"),
      config_key("weight_decay", &T::weight_decay,
                 "AdamW's decoupled weight decay (matrices and embeddings only: not norms, biases, gate biases, "
                 "convolutions)")
          .at_least(0),
      config_key("beta1", &T::beta1, "AdamW's first-moment decay").range(0, false, 1, true),
      config_key("beta2", &T::beta2, "AdamW's second-moment decay").range(0, false, 1, true),
      config_key("adam_eps", &T::adam_eps, "AdamW's epsilon").positive(),
      config_key("grad_clip", &T::grad_clip, "global gradient-norm clipping (0 = off)")
          .at_least(0)
          .note("0 = no clipping"),
      config_key("max_steps", &T::max_steps, "stop after this many steps (0 = no bound)").at_least(0),
      config_key("max_tokens", &T::max_tokens, "stop after this many training tokens (0 = no bound)").at_least(0),
      config_key("max_time", &T::max_time,
                 "stop after this much training time (evaluations not counted; 0 = no bound)")
          .duration(),
      config_key("seed", &T::seed, "initialization and data order; the same seed gives bit-identical losses"),
      config_key("threads", &T::threads, "OpenMP threads (0 = all cores)").in(0, 65536).note("0 = all cores"),
      config_key("eval_every", &T::eval_every, "validate every N steps (0 = only at the end); always at the end")
          .at_least(0)
          .note("0 = only at the end"),
      config_key("log_every", &T::log_every, "a progress line every N steps").at_least(1),
      config_key("log_grad_norms", &T::log_grad_norms,
                 "before each progress line, print every parameter's gradient norm (before clipping; summed over "
                 "the micro-batches and ranks) and its share of the total: to find which gradient a change moved"),
      config_key("dtype", &T::dtype, "the parameters' and the step's floating-point type (`f64` is slow: for checking)").one_of({{"f32", ""}, {"f64", ""}}),
      config_key("out_dir", &T::out_dir, "the run folder (`--out`)"),
      config_key("max_bad_steps", &T::max_bad_steps, "consecutive non-finite steps that stop the run").at_least(1),
      config_key("sample_every", &T::sample_every,
                 "print a sample of the model's text after each evaluation whose step is a multiple of N, and "
                 "after the final one (0 = none; rank 0; `configs/default.yaml` sets 500)")
          .at_least(0)
          .note("0 = no samples"),
      config_key("sample_tokens", &T::sample_tokens,
                 "tokens per sample, drawn at temperature 0.8 with `seed` (the same seed gives the same text for "
                 "the same weights); newlines are shown as `\\n`, other control characters escaped")
          .in(1, 100000),
      config_key("sample_prompt", &T::sample_prompt, "the text each sample continues (`\"\"`: a new document)")
          .in_quotes(),
      config_key("device", &T::device,
                 "where the step runs: `cuda` = all of it on the GPU ([Training on a GPU](gpu.md)); "
                 "without a GPU, an error at start-up naming this line (in the emulation build the emulated GPU runs it, "
                 "slowly: for tests)")
          .one_of({{"cpu", ""}, {"cuda", ""}}),
      config_key("precision", &T::precision,
                 "`bf16`: mixed precision: the matrix products take bf16 inputs with float32 accumulation "
                 "(`device: cuda`: the GEMMs and attention's tile products at head size 32, 64 or 128, on the "
                 "tensor cores; `device: cpu`: the GEMMs, through oneDNN, on AVX-512 BF16 or AMX, elsewhere "
                 "widened to float32: slower, same sums); the linear layers read a bf16 copy of the weights that "
                 "the optimizer writes once per step, and each activation and output gradient is converted once; "
                 "float32 weights (the masters checkpoints keep), AdamW state, gradients, activations, norms, "
                 "softmax statistics, the linear mixers and the loss stay float32 "
                 "([Training on a GPU](gpu.md))")
          .one_of({{"fp32", ""}, {"bf16", ""}}),
      config_key("tf32", &T::tf32,
                 "`device: cuda` only: TF32 tensor cores for the float32 matrix products (cuBLAS "
                 "`CUBLAS_COMPUTE_32F_FAST_TF32`, ~10-bit mantissa inputs); ignored on the CPU and under `precision: bf16`"),
      config_key("cuda_graphs", &T::cuda_graphs,
                 "`device: cuda` only: capture the step's work (forward, backward, clipping, AdamW) at its second "
                 "step as a CUDA graph and replay it, one launch per step, on one rank where the targets all take "
                 "a loss (not MQAR's; with `data.document_boundaries: reset` each batch's sequence table is padded "
                 "to one size, and a batch that outgrows it is captured anew); elsewhere, and after a capture that "
                 "fails (a warning says why), the steps launch their kernels one by one ([Training on a GPU]"
                 "(gpu.md#cuda-graphs))"),
      config_choice("recompute", &T::recompute,
                    {{ops::Recompute::none, {"none", "keep what backward reads"}},
                     {ops::Recompute::selective, {"selective", "recompute the norms, SwiGLUs, gates and mixer cores"}},
                     {ops::Recompute::full, {"full", "keep each block's input only, replay the block"}}},
                    "activation recomputation in backward, block by block: `selective` keeps each block's input and "
                    "its matrix products' and softmax attention's outputs and recomputes the rest; `full` keeps "
                    "the input only and replays the whole block; less activation memory for more compute, "
                    "bit-identical gradients ([Activation recomputation](recompute.md))"),
  };
  return keys;
}

const std::vector<ConfigKey<CheckpointConfig>>& checkpoint_keys() {
  using K = CheckpointConfig;
  static const std::vector<ConfigKey<K>> keys = {
      config_key("every", &K::every,
                 "steps between checkpoints in `OUT_DIR/checkpoints/` (0 = only at the end and on Ctrl-C)")
          .at_least(0)
          .note("0 = only at the end"),
      config_key("keep_last", &K::keep_last, "newest checkpoints to keep").at_least(1),
  };
  return keys;
}

const std::vector<ConfigKey<DistributedConfig>>& distributed_keys() {
  using P = DistributedConfig;
  static const std::vector<ConfigKey<P>> keys = {
      config_key("bucket_mb", &P::bucket_mb,
                 "MiB of gradients per all-reduce bucket (see [Data parallelism](data-parallel.md)); smaller "
                 "buckets start sooner, larger ones cost fewer calls; a value above the model's gradient size "
                 "makes one all-reduce after backward")
          .range(0, true, 65536, false)
          .note("MiB of gradients per all-reduce; the default is 4"),
  };
  return keys;
}

}  // namespace linattn
