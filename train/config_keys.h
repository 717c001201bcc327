// The declaration of every key of the run configuration, one table per section (config_keys.cpp).
// train/config.cpp reads, checks and writes back the config from these tables, and
// config_reference_markdown() prints README.md's "Config reference" from them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config_key.h"
#include "train/config.h"

namespace linattn {

// Bounds on the sizes: each far above any model this trains, and low enough that no product of
// them overflows int64 (tensor sizes, parameter counts, tokens per step).
constexpr int64_t kMaxVocab = int64_t(1) << 24;
constexpr int64_t kMaxWidth = int64_t(1) << 16;  // hidden_size
constexpr int64_t kMaxExpand = 16;               // expand_k, expand_v, hidden_ratio
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxSeqLen = int64_t(1) << 24;
constexpr int64_t kMaxBatch = int64_t(1) << 20;
constexpr double kMaxElements = double(int64_t(1) << 40);  // in one model, or in one activation
constexpr double kMaxSeconds = 366.0 * 24 * 3600;           // a duration (max_time)

// model: the general keys, then the keys of the mixers (mixer_option_keys), then the layer schedule.
const std::vector<ConfigKey<ModelConfig>>& model_keys();
// The keys only some mixers read, each declared by its mixer's descriptor (layers/mixers/) on the
// mixer's settings struct; a key several mixers share is listed once.
std::vector<ConfigKey<ModelConfig>> mixer_option_keys();
// One entry of model.layers, and (all but mixer) the model.attn block.
const std::vector<ConfigKey<LayerSpec>>& layer_keys();
const std::vector<ConfigKey<DataConfig>>& data_keys();
const std::vector<ConfigKey<data::MqarTask>>& mqar_keys();
const std::vector<ConfigKey<TrainConfig>>& train_keys();
const std::vector<ConfigKey<CheckpointConfig>>& checkpoint_keys();
const std::vector<ConfigKey<DistributedConfig>>& distributed_keys();

// A section of the file: its dotted path ("data.mqar": nested, under the custom key mqar of data),
// a note for the reference, its keys, and `of(config)`, the struct its values go to.
template <class S, class Of>
struct ConfigSection {
  const char* path;
  const char* note;
  const std::vector<ConfigKey<S>>& keys;
  Of of;  // Config& -> S&, and const Config& -> const S&
};

template <class S, class Of>
ConfigSection<S, Of> config_section(const char* path, const char* note, const std::vector<ConfigKey<S>>& keys, Of of) {
  return {path, note, keys, of};
}

// Calls f(section) for every section, in the order of the file.
template <class F>
void for_each_section(F&& f) {
  f(config_section("model", "", model_keys(), [](auto& c) -> auto& { return c.model; }));
  f(config_section("data", "", data_keys(), [](auto& c) -> auto& { return c.data; }));
  f(config_section("data.mqar", "", mqar_keys(), [](auto& c) -> auto& { return c.data.mqar; }));
  f(config_section("train", "", train_keys(), [](auto& c) -> auto& { return c.train; }));
  f(config_section("checkpoint", "", checkpoint_keys(), [](auto& c) -> auto& { return c.checkpoint; }));
  f(config_section("distributed", "read only under mpirun", distributed_keys(),
                   [](auto& c) -> auto& { return c.distributed; }));
}

}  // namespace linattn
