// The registry of token mixers (layers/mixer.h).
#include "layers/mixer.h"

#include "core/error.h"

namespace linattn {

// Every mixer, one line each, in the registry's order (the order of the config reference's choices
// and of messages). MIXER(name) names the descriptor `mixers::name`, defined in its own file of
// layers/mixers/; a name without one fails to link.
#define LINATTN_MIXERS(MIXER) \
  MIXER(linear_attn)          \
  MIXER(gla)                  \
  MIXER(retnet)               \
  MIXER(deltanet)             \
  MIXER(gated_deltanet)       \
  MIXER(attention)            \
  MIXER(mamba2)

namespace mixers {
#define DECLARE(name) extern const MixerDescriptor name;
LINATTN_MIXERS(DECLARE)
#undef DECLARE
}  // namespace mixers

const std::vector<const MixerDescriptor*>& all_mixers() {
#define ADDRESS(name) &mixers::name,
  static const std::vector<const MixerDescriptor*> all = {LINATTN_MIXERS(ADDRESS)};
#undef ADDRESS
  return all;
}

const MixerDescriptor* find_mixer(const std::string& name) {
  for (const MixerDescriptor* m : all_mixers())
    if (m->name == name) return m;
  return nullptr;
}

const MixerDescriptor& mixer_descriptor(const std::string& name) {
  if (const MixerDescriptor* m = find_mixer(name)) return *m;
  std::string known;
  for (const MixerDescriptor* m : all_mixers()) known += (known.empty() ? "" : ", ") + m->name;
  LINATTN_FAIL("unknown mixer '", name, "' (known: ", known, ")");
}

std::vector<std::string> mixer_names() {
  std::vector<std::string> names;
  for (const MixerDescriptor* m : all_mixers()) names.push_back(m->name);
  return names;
}

namespace {

const ConfigKey<ModelConfig>& setting(const std::string& key) {
  for (const MixerDescriptor* m : all_mixers())
    for (const ConfigKey<ModelConfig>& k : m->config_keys)
      if (k.name == key) return k;
  LINATTN_FAIL("no mixer has the config key '", key, "'");
}

}  // namespace

ConfigValue mixer_setting(const ModelConfig& c, const std::string& key) { return setting(key).get(c); }

void set_mixer_setting(ModelConfig& c, const std::string& key, const ConfigValue& value) {
  const ConfigKey<ModelConfig>& k = setting(key);
  LINATTN_CHECK(k.get(c).index() == value.index(), "set_mixer_setting: '", key,
                "' takes a value of another type (bool, int64_t, double or std::string) than the one given");
  k.set(c, value);
}

size_t MixerState::bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors)
    if (t.defined()) n += t.nbytes();
  return n;
}

}  // namespace linattn
