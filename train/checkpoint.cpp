#include "train/checkpoint.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <variant>

#include "core/hdf5.h"
#include "data/safetensors.h"
#include "layers/mixer.h"

namespace linattn {

namespace fs = std::filesystem;

namespace {

const char* kFormat = "linattn-checkpoint";

void write_sampler(H5File& f, const data::SamplerState& s) {
  f.set_attr("data.seed", int64_t(s.seed));
  f.set_attr("data.epoch", int64_t(s.epoch));
  f.set_attr("data.position", int64_t(s.position));
  f.set_attr("data.batches", int64_t(s.batches));
  f.set_attr("data.num_tokens", int64_t(s.num_tokens));
  f.set_attr("data.seq_len", int64_t(s.seq_len));
}

int64_t required_int(const H5File& f, const std::string& name) {
  auto v = f.attr_int(name);
  LINATTN_REQUIRE(v.has_value(), f.path(), ": the checkpoint has no attribute '", name, "' (the file is damaged)");
  return *v;
}

data::SamplerState read_sampler(const H5File& f) {
  data::SamplerState s;
  s.seed = uint64_t(required_int(f, "data.seed"));
  s.epoch = uint64_t(required_int(f, "data.epoch"));
  s.position = uint64_t(required_int(f, "data.position"));
  s.batches = uint64_t(required_int(f, "data.batches"));
  s.num_tokens = uint64_t(required_int(f, "data.num_tokens"));
  s.seq_len = uint64_t(required_int(f, "data.seq_len"));
  return s;
}

void check_format(const H5File& f) {
  auto format = f.attr_string("format");
  LINATTN_REQUIRE(format && *format == kFormat, f.path(), ": not a linattn checkpoint (no 'format' attribute '",
                  kFormat, "')");
  int64_t version = required_int(f, "format_version");
  LINATTN_REQUIRE(version <= kCheckpointFormatVersion, f.path(), ": checkpoint format version ", version,
                  " was written by a newer linattn (", f.attr_string("linattn_version").value_or("?"),
                  "); this build reads up to version ", kCheckpointFormatVersion, ": upgrade linattn");
}

// Scalar fields of a YAML section, flattened ("layers" compared as a whole).
std::map<std::string, std::string> section_fields(const std::string& config_text, const std::string& section) {
  std::map<std::string, std::string> out;
  YAML::Node root = YAML::Load(config_text);
  for (const auto& kv : root[section]) {
    YAML::Emitter e;
    e << YAML::Flow << kv.second;
    out[kv.first.as<std::string>()] = e.c_str();
  }
  return out;
}

}  // namespace

std::string upgrade_saved_config(const std::string& config_text) {
  try {
    YAML::Node root = YAML::Load(config_text);
    bool changed = false;
    YAML::Node model = root["model"];
    if (model.IsMap() && !model["gated_deltanet_decay"]) {
      model["gated_deltanet_decay"] = "logsigmoid";  // the only decay before the key existed
      changed = true;
    }
    YAML::Node data = root["data"];
    if (data.IsMap() && !data["document_boundaries"]) {
      data["document_boundaries"] = "cross";  // the only mode before the key existed
      changed = true;
    }
    if (!changed) return config_text;
    YAML::Emitter e;
    e << root;
    return std::string(e.c_str()) + "\n";
  } catch (const YAML::Exception&) {
    return config_text;  // parse_config reports what is wrong with it
  }
}

void keep_checkpoint_defaults(Config& config, const std::string& checkpoint) {
  Config saved = parse_config(checkpoint_config_text(checkpoint), checkpoint);
  std::vector<std::string> keep;  // KEY=VALUE
  const ConfigValue saved_decay = mixer_setting(saved.model, "gated_deltanet_decay");
  if (!config.locations.count("model.gated_deltanet_decay") &&
      saved_decay != mixer_setting(config.model, "gated_deltanet_decay"))
    keep.push_back("model.gated_deltanet_decay=" + std::get<std::string>(saved_decay));
  if (!config.locations.count("data.document_boundaries") &&
      saved.data.document_boundaries != config.data.document_boundaries)
    keep.push_back(std::string("data.document_boundaries=") +
                   document_boundaries_name(saved.data.document_boundaries));
  if (!keep.empty()) config = with_settings(config, keep);  // keys the user set are checked on load
}

namespace {

// A saved config as this build writes it, so that a checkpoint written before a change in how
// configs are written (expand_k resolved, 1.0e-06 for 1e-06) compares equal to today's text.
std::string written_by_this_build(const std::string& config_text) {
  try {
    return parse_config(upgrade_saved_config(config_text), "the checkpoint's config").text;
  } catch (const Error&) {
    return config_text;  // compared as it is
  }
}

// Values compare as numbers when both are numbers (1e-06 == 9.9999999999999995e-07), else as text.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char *end_a = nullptr, *end_b = nullptr;
  double x = std::strtod(a.c_str(), &end_a), y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

// "name: a -> b" for every field of `section` that differs.
std::vector<std::string> differences(const std::string& saved, const std::string& now, const std::string& section) {
  std::map<std::string, std::string> a = section_fields(saved, section), b = section_fields(now, section);
  std::vector<std::string> diffs;
  for (auto& [key, value] : b) {
    auto it = a.find(key);
    std::string old = it == a.end() ? "(absent)" : it->second;
    if (!same_value(old, value)) diffs.push_back(section + "." + key + ": " + old + " -> " + value);
  }
  return diffs;
}

}  // namespace

std::string checkpoint_path(const std::string& out_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld.h5", (long long)step);
  return (fs::path(out_dir) / "checkpoints" / name).string();
}

static std::vector<fs::path> list_checkpoints(const std::string& out_dir) {
  std::vector<fs::path> found;
  fs::path dir = fs::path(out_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return found;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.path().extension() == ".h5") found.push_back(e.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string latest_checkpoint(const std::string& out_dir) {
  auto all = list_checkpoints(out_dir);
  return all.empty() ? "" : all.back().string();
}

void prune_checkpoints(const std::string& out_dir, int64_t keep) {
  auto all = list_checkpoints(out_dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove(all[i]);
  // Temporary files of writes that never finished (a killed run) are garbage.
  fs::path dir = fs::path(out_dir) / "checkpoints";
  const std::string mine = ".tmp-" + std::to_string(getpid());
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.find(".h5.tmp-") != std::string::npos && n.find(mine) == std::string::npos) fs::remove(e.path());
  }
}

void save_checkpoint(const std::string& path, const Config& config, const Model& model, const AdamW* optimizer,
                     const TrainState& state) {
  write_h5_atomically(path, [&](H5File& f) {
    f.set_attr("format", std::string(kFormat));
    f.set_attr("format_version", kCheckpointFormatVersion);
    f.set_attr("linattn_version", std::string(LINATTN_VERSION));
    f.set_attr("config", config.text);
    f.set_attr("step", state.step);
    f.set_attr("tokens", state.tokens);
    f.set_attr("elapsed_seconds", state.elapsed);
    f.set_attr("best_val_loss", state.best_val_loss);
    f.set_attr("log_window.loss_sum", state.log_loss_sum);
    f.set_attr("log_window.steps", state.log_steps);
    f.set_attr("log_window.seconds", state.log_seconds);
    f.set_attr("seed", int64_t(config.train.seed));
    write_sampler(f, state.sampler);
    const Parameters& p = model.params();
    for (size_t i = 0; i < p.size(); ++i) f.write(p.name(int(i)), p.values()[int(i)], /*checksum=*/true);
    if (optimizer) {
      f.set_attr("optimizer.steps", optimizer->steps());
      for (size_t i = 0; i < p.size(); ++i) {
        f.write("optimizer.m." + p.name(int(i)), optimizer->m()[int(i)], true);
        f.write("optimizer.v." + p.name(int(i)), optimizer->v()[int(i)], true);
      }
    }
  });
}

std::string checkpoint_problem(const std::string& path) {
  try {
    H5File f(path, H5File::Mode::read);
    check_format(f);
    required_int(f, "step");
    // Reading every dataset verifies its Fletcher-32 checksums.
    for (const std::string& name : f.dataset_names()) f.read(name, DType::f64);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string latest_verified_checkpoint(const std::string& out_dir, std::vector<std::string>* skipped) {
  auto all = list_checkpoints(out_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    std::string problem = checkpoint_problem(it->string());
    if (problem.empty()) return it->string();
    if (skipped) skipped->push_back(it->string() + ": " + problem);
  }
  return "";
}

std::string checkpoint_argument(const std::string& path, const std::string& tool) {
  if (!fs::is_directory(fs::path(path) / "checkpoints")) return path;
  std::vector<std::string> skipped;
  const std::string newest = latest_verified_checkpoint(path, &skipped);
  for (const std::string& s : skipped) std::fprintf(stderr, "%s: warning: skipped a damaged checkpoint: %s\n", tool.c_str(), s.c_str());
  LINATTN_REQUIRE(!newest.empty(), path, ": a run folder with no intact checkpoint in ", path,
                  "/checkpoints; give a checkpoint file (.h5), or train the run further (linattn-train --resume ",
                  path, ")");
  std::fprintf(stderr, "%s: %s: its newest checkpoint, %s\n", tool.c_str(), path.c_str(), newest.c_str());
  return newest;
}

std::string checkpoint_config_text(const std::string& path) {
  // What the path is instead, said before HDF5 would call it "not an HDF5 file".
  const bool folder = fs::is_directory(path);
  if (data::looks_like_safetensors(folder ? (fs::path(path) / "model.safetensors").string() : path))
    throw Error(path + ": safetensors weights (fla's names and shapes, without linattn's config or training "
                "state): give the linattn checkpoint (.h5) they were exported from, or its .h5 export; to train from "
                "them, linattn-train CONFIG.yaml --init-from " + path);
  if (folder) {
    const std::string newest = latest_checkpoint(path);
    throw Error(path + " is a folder" + (newest.empty() ? ": give a checkpoint file (.h5)"
                                                        : ", a run's: give one of its checkpoints, e.g. the newest, " +
                                                              newest));
  }
  H5File f(path, H5File::Mode::read);
  check_format(f);
  auto text = f.attr_string("config");
  LINATTN_REQUIRE(text.has_value(), path, ": the checkpoint has no 'config' attribute (the file is damaged)");
  return upgrade_saved_config(*text);
}

void load_checkpoint(const std::string& path, const Config& config, Model& model, AdamW* optimizer, TrainState* state,
                     std::vector<std::string>* warnings) {
  H5File f(path, H5File::Mode::read);
  check_format(f);
  std::string saved = written_by_this_build(f.attr_string("config").value_or(""));
  std::vector<std::string> model_diffs = differences(saved, config.text, "model");
  if (!model_diffs.empty()) {
    std::string list;
    for (const std::string& d : model_diffs) list += "\n  " + d;
    LINATTN_REQUIRE(false, path, ": the checkpoint's model differs from the config's:", list,
                    "\nuse the config the checkpoint was trained with (it is stored in the checkpoint and in the "
                    "run's config.yaml)");
  }
  if (warnings)
    for (const char* section : {"data", "train", "checkpoint"})
      for (const std::string& d : differences(saved, config.text, section)) warnings->push_back(d);

  const Parameters& p = model.params();
  const DType dt = p.values().all().dtype();
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string& name = p.name(int(i));
    LINATTN_REQUIRE(f.has(name), path, ": missing parameter '", name, "'");
    p.values()[int(i)].copy_from(f.read(name, dt, p.values()[int(i)].shape()));
  }
  if (optimizer) {
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string& name = p.name(int(i));
      LINATTN_REQUIRE(f.has("optimizer.m." + name), path, ": no optimizer state for '", name,
                      "' (an exported weights-only file cannot be resumed)");
      optimizer->m()[int(i)].copy_from(f.read("optimizer.m." + name, dt, p.values()[int(i)].shape()));
      optimizer->v()[int(i)].copy_from(f.read("optimizer.v." + name, dt, p.values()[int(i)].shape()));
    }
    optimizer->set_steps(required_int(f, "optimizer.steps"));
  }
  if (state) {
    state->step = required_int(f, "step");
    state->tokens = required_int(f, "tokens");
    state->elapsed = f.attr_double("elapsed_seconds").value_or(0);
    state->best_val_loss = f.attr_double("best_val_loss").value_or(NAN);
    // Absent from the checkpoints of earlier builds: the first log line after the resume then
    // covers the steps since the resume.
    state->log_loss_sum = f.attr_double("log_window.loss_sum").value_or(0);
    state->log_steps = f.attr_int("log_window.steps").value_or(0);
    state->log_seconds = f.attr_double("log_window.seconds").value_or(0);
    state->sampler = read_sampler(f);
  }
}

}  // namespace linattn
