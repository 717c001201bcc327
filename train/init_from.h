// --init-from: a model's starting weights from a file (a linattn checkpoint or export .h5, or a
// safetensors file or folder with fla's parameter names), checked against the model first.
#pragma once

#include <string>

#include "layers/model.h"

namespace linattn {

// Copies every parameter of `model` from `path` (a folder means PATH/model.safetensors). Before
// anything is copied, every problem is collected and reported in one error naming the file: each
// parameter whose shape differs (name, expected shape, found shape), each one the file lacks, and
// each tensor of the file that matches no parameter. `config_source` names the config in messages.
// Returns the number of tensors loaded.
size_t init_from(const std::string& path, Model& model, const std::string& config_source);

}  // namespace linattn
