// The run configuration: one YAML file with sections model, data, train, checkpoint, distributed.
// Every key is declared once, in train/config_keys.cpp; README.md's "Config reference" is printed
// from the declarations (config_reference_markdown, `linattn-train --config-reference`).
// Errors are reported as FILE:LINE:COL: message, before anything is allocated.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "data/mqar.h"
#include "layers/model_config.h"

namespace linattn {

// data.document_boundaries: whether the documents of a training window see each other (cross), or each
// end-of-text token starts a fresh sequence (reset): README, "Document boundaries".
enum class DocumentBoundaries { cross, reset };
const char* document_boundaries_name(DocumentBoundaries b);

struct DataConfig {
  std::string path = "data/cache/sotu-bytes";  // a folder written by `linattn-data prepare`
  int64_t seq_len = 256;
  int64_t val_tokens = 0;  // evaluations during training; 0 = the whole split (the final one always is)
  std::string source = "tokens";  // tokens: the prepared folder at path; mqar: generated MQAR examples
  data::MqarTask mqar;            // source mqar: the task (data/mqar.h, docs/mqar.md)
  // Unset: reset for a token corpus, cross for MQAR (one example per row); a checkpoint written
  // before reset became the default keeps cross (train/checkpoint.h, upgrade_saved_config).
  DocumentBoundaries document_boundaries = DocumentBoundaries::reset;
};

enum class Schedule { cosine, linear, constant };

struct TrainConfig {
  int64_t batch_size = 16;        // global batch, in sequences of seq_len tokens
  int64_t micro_batch_size = 0;   // per rank; 0 = batch_size / world size (no gradient accumulation)
  double lr = 3e-3;
  double lr_min = 3e-4;
  int64_t warmup_steps = 100;
  Schedule schedule = Schedule::cosine;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // 0 = off
  int64_t max_steps = 0;   // 0 = no bound by steps
  int64_t max_tokens = 0;  // 0 = no bound by tokens
  double max_time = 0;     // seconds; 0 = no bound by time
  uint64_t seed = 1234;
  int64_t threads = 0;     // 0 = all cores
  int64_t eval_every = 200;
  int64_t log_every = 10;
  bool log_grad_norms = false;    // with each progress line, every parameter's gradient norm
  std::string dtype = "f32";  // f32 | f64
  std::string out_dir = "runs/default";
  int64_t max_bad_steps = 5;  // consecutive non-finite steps before the run stops
  int64_t sample_every = 0;          // steps between samples printed after the evaluation; 0 = none
  int64_t sample_tokens = 64;        // tokens per sample
  std::string sample_prompt = "";    // the text each sample continues ("" = a new document)
  // Where the step runs (README "Training on a GPU"): cpu | cuda.
  std::string device = "cpu";
  // fp32 | bf16: the GEMMs read bf16 operands (a bf16 weight copy written once per step by the
  // optimizer, activations converted once) with float32 accumulation; float32 masters and moments.
  std::string precision = "fp32";
  bool tf32 = false;               // cuda: TF32 tensor cores for the float32 matrix products (ignored on cpu)
  // cuda: the step's work captured once as a CUDA graph and replayed, one launch per step, where
  // the step's shapes are fixed (one rank, data.document_boundaries: cross); ignored elsewhere.
  bool cuda_graphs = true;
  // Activation recomputation (autograd/checkpoint.h, docs/recompute.md): none | selective | full.
  ops::Recompute recompute = ops::Recompute::none;
};

struct CheckpointConfig {
  int64_t every = 0;     // steps; 0 = only at the end
  int64_t keep_last = 3;
};

struct DistributedConfig {
  double bucket_mb = 4;  // MiB of gradients per all-reduce bucket
};

struct Config {
  std::string source;  // the file's path
  std::string text;    // the resolved config, as YAML
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  CheckpointConfig checkpoint;
  DistributedConfig distributed;
  // "FILE:LINE:COL" (or "--set KEY") of every key given, by dotted path ("model.vocab_size"), so
  // checks made after parsing (against the data, say) can point at the line to fix.
  std::map<std::string, std::string> locations;
  std::string where(const std::string& path) const;
};

// Loads and validates a config file; `overrides` are "section.key=value" strings (--set).
// Throws linattn::Error with FILE:LINE:COL for the first problem found.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {});
// `config` with settings the program chose ("section.key=value"), its text rewritten to say so; the
// locations stay those of the user's keys, so a setting chosen this way still counts as unset.
Config with_settings(const Config& config, const std::vector<std::string>& settings);

// README.md's config reference: for each section a heading and a table of its keys (key, default,
// values, meaning), from the declarations.
std::string config_reference_markdown();

}  // namespace linattn
