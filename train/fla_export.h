// Our model in fla's terms (docs/interop.md): the parameter names and shapes of fla's PyTorch
// modules, and the config.json (fla's HF config schema) that rebuilds the same model with
// AutoModelForCausalLM after `import fla`.
#pragma once

#include <string>
#include <vector>

#include "layers/model_config.h"
#include "core/shape.h"

namespace linattn {

// fla's names for our parameter `ours` of `model`: ours (fla's model uses our names), or where
// fla's model names them otherwise and fla_config can build it, its names: Mamba2ForCausalLM's
// backbone.layers.N.mixer..., with a tied embedding under both backbone.embeddings.weight and
// lm_head.weight.
std::vector<std::string> fla_names(const ModelConfig& model, const std::string& ours);
// fla's shape for our parameter `name` of shape `ours`: the same, except the short convolutions'
// [C, K], which PyTorch's Conv1d holds as [C, 1, K] (the same bytes). `name`: ours or fla's.
Shape fla_shape(const std::string& name, const Shape& ours);
// Our shape for a tensor fla holds as `theirs` under `name` (the inverse of fla_shape).
Shape our_shape(const std::string& name, const Shape& theirs);

struct FlaConfig {
  std::string json;                   // config.json, when `problems` is empty
  std::string model_type;             // its model_type
  std::vector<std::string> problems;  // why fla cannot build this model, one sentence each
};

// fla's config for `model`: model_type after the linear mixer (gla, delta_net, gated_deltanet,
// linear_attn, mamba2) with attention layers in `attn`, or transformer when every layer is attention.
FlaConfig fla_config(const ModelConfig& model);

// The tokenizer files of an export: the tokenizer.json (and tokenizer_config.json) that linattn-data
// prepare kept in the run's data folder (data.path, found as find_run_data does from the checkpoint
// `ckpt`), copied into out_dir so that the folder loads as a whole model. `copied` lists the files
// written; `note` says why there are none (a bytes or gpt2 run, the data folder not at hand).
struct TokenizerExport {
  std::vector<std::string> copied;
  std::string note;
};
TokenizerExport export_tokenizer_files(const std::string& data_path, const std::string& ckpt, const std::string& out_dir);

}  // namespace linattn
