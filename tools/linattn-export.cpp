// linattn-export: a checkpoint's weights (and model config) in a file for other tools, or a listing.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "core/hdf5.h"
#include "data/safetensors.h"
#include "train/checkpoint.h"
#include "tools/cli.h"
#include "train/fla_export.h"

namespace {

using namespace linattn;

struct Args {
  std::string in, out, dtype = "f32", format = "hdf5";
  bool list = false, force = false;
};

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Writes the weights of a linattn checkpoint (no optimizer state) with the model config to OUT.h5:\n"
      "one dataset per parameter under its HF/fla name ([out, in] for linear weights), and the root\n"
      "attributes format = \"linattn-weights\", format_version, config (YAML), step, dtype. f16 is HDF5's\n"
      "IEEE half (h5py reads float16); bf16 is stored as uint16 bit patterns with the dataset attribute\n"
      "dtype = \"bfloat16\". docs/checkpoint-format.md describes both files.\n\n"
      "  linattn-export CKPT.h5 OUT.h5 [--dtype f32|f16|bf16]\n"
      "  linattn-export CKPT.h5 OUT_DIR --format safetensors\n"
      "  linattn-export --list CKPT.h5",
      "linattn-export");
  app.add_option("CKPT.h5", a.in, "the checkpoint, or a run folder: its newest intact checkpoint (with --list: an export)");
  app.add_option("OUT", a.out, "OUT.h5, or the folder OUT_DIR of --format safetensors");
  app.add_option("--dtype", a.dtype, "the exported weights' type (default f32)")
      ->type_name("f32|f16|bf16")
      ->check(cli::one_of({"f32", "f16", "bf16"}));
  app.add_option("--format", a.format,
                 "safetensors writes OUT_DIR/model.safetensors (float32, fla's parameter names and shapes) and "
                 "OUT_DIR/config.json in fla's HF config schema, so that after `import fla`, "
                 "AutoModelForCausalLM.from_pretrained(OUT_DIR) builds the same model. A model fla cannot "
                 "express (two different linear mixers, RetNet, ...) gets the weights without a config.json, and "
                 "the reasons on stderr. docs/interop.md has the whole mapping. (default hdf5)")
      ->type_name("hdf5|safetensors")
      ->check(cli::one_of({"hdf5", "safetensors"}));
  app.add_flag("--force", a.force, "replace OUT.h5 even when it is a training checkpoint (which the export "
                                   "would otherwise refuse to overwrite)");
  app.add_flag("--list", a.list, "print a checkpoint's (or an export's) step, model config and every tensor's name "
                                 "and shape");
  cli::parse(app, argc, argv, 2);
  if (a.in.empty()) cli::usage_error("linattn-export", "no checkpoint: give CKPT.h5", 2);
  if (a.list && !a.out.empty())
    cli::usage_error("linattn-export", "--list reads one file: drop '" + a.out + "'", 2);
  if (!a.list && a.out.empty())
    cli::usage_error("linattn-export", "no output: give OUT.h5 (or OUT_DIR with --format safetensors)", 2);
  if (a.format == "safetensors" && a.dtype != "f32")
    cli::usage_error("linattn-export", "--format safetensors writes f32; drop --dtype " + a.dtype, 2);
  return a;
}

// The tensors of a safetensors file (an export with fla's names, or any other).
int list_safetensors(const std::string& path) {
  const data::SafetensorsFile f(path);
  std::printf("%s: safetensors, %zu tensors\n", path.c_str(), f.entries().size());
  int64_t params = 0;
  for (const data::SafetensorsEntry& e : f.entries()) {
    params += e.shape.numel();
    std::printf("  %-56s %s %s\n", e.name.c_str(), e.dtype.c_str(), e.shape.str().c_str());
  }
  std::printf("%lld parameters\n", (long long)params);
  return 0;
}

int list(const std::string& path) {
  if (std::filesystem::is_directory(path) && data::looks_like_safetensors(path + "/model.safetensors"))
    return list_safetensors(path + "/model.safetensors");
  if (data::looks_like_safetensors(path)) return list_safetensors(path);
  H5File f(path, H5File::Mode::read);
  std::string format = f.attr_string("format").value_or("?");
  LINATTN_REQUIRE(format == "linattn-checkpoint" || format == "linattn-weights", path,
                  ": not a linattn checkpoint or weights file");
  std::printf("%s: %s, format version %lld, written by linattn %s, step %lld\n", path.c_str(), format.c_str(),
              (long long)f.attr_int("format_version").value_or(0), f.attr_string("linattn_version").value_or("?").c_str(),
              (long long)f.attr_int("step").value_or(0));
  std::string config = f.attr_string("config").value_or("");
  size_t model_end = config.find("\ndata:");
  std::printf("%s\n", config.substr(0, model_end).c_str());
  int64_t params = 0;
  for (const std::string& name : f.dataset_names()) {
    Shape s = f.shape(name);
    if (name.rfind("optimizer.", 0) != 0) params += s.numel();
    std::printf("  %-56s %s\n", name.c_str(), s.str().c_str());
  }
  std::printf("%lld parameters\n", (long long)params);
  return 0;
}

// The step of the training checkpoint at `path`, or nothing when there is none there.
std::optional<int64_t> checkpoint_at(const std::string& path) {
  char magic[8] = {};
  std::ifstream(path, std::ios::binary).read(magic, 8);
  if (std::string(magic, 8) != "\x89HDF\r\n\x1a\n") return std::nullopt;
  const H5File f(path, H5File::Mode::read);
  if (f.attr_string("format").value_or("") != "linattn-checkpoint") return std::nullopt;
  return f.attr_int("step").value_or(-1);
}

int export_weights(const std::string& in_path, const std::string& out_path, const std::string& dtype, bool force) {
  // Before the export is written: the rename onto a folder would fail only at the end.
  LINATTN_REQUIRE(!std::filesystem::is_directory(out_path), "'", out_path, "' is a folder: give the file to write, "
                  "e.g. ", (std::filesystem::path(out_path) / "weights.h5").string(), " (or --format safetensors, "
                  "which writes model.safetensors and config.json into a folder)");
  std::error_code ec;
  LINATTN_REQUIRE(!std::filesystem::equivalent(in_path, out_path, ec), "'", out_path, "' is the checkpoint '",
                  in_path, "' itself: writing the export there would replace the checkpoint (and its training "
                  "state); give another OUT.h5");
  if (const std::optional<int64_t> step = checkpoint_at(out_path); step && !force)
    throw Error("'" + out_path + "' is a training checkpoint (step " + std::to_string(*step) +
                "): writing the export there would replace it and its training state; give another OUT.h5, or "
                "--force to replace it");
  std::string text = checkpoint_config_text(in_path);
  Config config = parse_config(text, in_path);
  Model model(config.model, DType::f32);
  TrainState state;
  load_checkpoint(in_path, config, model, nullptr, &state);
  const Parameters& p = model.params();
  // Through a temporary file: a failed export (a full disk) leaves no damaged file at OUT.h5.
  write_h5_atomically(out_path, [&](H5File& out) {
    out.set_attr("format", std::string("linattn-weights"));
    out.set_attr("format_version", kCheckpointFormatVersion);
    out.set_attr("linattn_version", std::string(LINATTN_VERSION));
    out.set_attr("config", config.text);
    out.set_attr("step", state.step);
    out.set_attr("dtype", dtype);
    for (size_t i = 0; i < p.size(); ++i) {
      if (dtype == "f32") out.write(p.name(int(i)), p.values()[int(i)]);
      else out.write_half(p.name(int(i)), p.values()[int(i)], dtype == "f16" ? H5File::Half::f16 : H5File::Half::bf16);
    }
  });
  std::printf("linattn-export: %zu tensors (%lld parameters, %s) from step %lld to %s\n", p.size(),
              (long long)p.count(), dtype.c_str(), (long long)state.step, out_path.c_str());
  return 0;
}

// OUT_DIR/model.safetensors and, when fla can build the model, OUT_DIR/config.json.
int export_safetensors(const std::string& in_path, const std::string& out_dir) {
  namespace fs = std::filesystem;
  LINATTN_REQUIRE(!fs::exists(out_dir) || fs::is_directory(out_dir), "'", out_dir,
                  "' is a file: --format safetensors writes a folder (model.safetensors, config.json); give a "
                  "folder path");
  Config config = parse_config(checkpoint_config_text(in_path), in_path);
  Model model(config.model, DType::f32);
  TrainState state;
  load_checkpoint(in_path, config, model, nullptr, &state);
  const Parameters& p = model.params();
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < p.size(); ++i) {
    const Tensor& t = p.values()[int(i)];
    for (const std::string& name : fla_names(config.model, p.name(int(i))))
      tensors.emplace_back(name, t.view(fla_shape(name, t.shape())));
  }
  fs::create_directories(out_dir);
  const std::string weights = (fs::path(out_dir) / "model.safetensors").string();
  const std::string config_json = (fs::path(out_dir) / "config.json").string();
  data::write_safetensors(weights, tensors,
                          {{"format", "pt"}, {"linattn_config", config.text}, {"step", std::to_string(state.step)}});
  std::printf("linattn-export: %zu tensors (%lld parameters, f32) from step %lld to %s\n", tensors.size(),
              (long long)p.count(), (long long)state.step, weights.c_str());
  const TokenizerExport tokenizer = config.data.source == "mqar" ? TokenizerExport{{}, "an MQAR model has no text tokenizer"}
                                                                  : export_tokenizer_files(config.data.path, in_path, out_dir);
  for (const std::string& f : tokenizer.copied) std::printf("linattn-export: %s (the run's tokenizer)\n", f.c_str());
  if (!tokenizer.note.empty()) std::printf("linattn-export: no tokenizer.json: %s\n", tokenizer.note.c_str());
  FlaConfig fla = fla_config(config.model);
  if (!fla.problems.empty()) {
    // A config.json that fla would build into another model is worse than none.
    std::error_code ec;
    const bool removed = fs::remove(config_json, ec);
    std::fprintf(stderr, "linattn-export: warning: no config.json: fla has no model equal to this one:\n");
    for (const std::string& why : fla.problems) std::fprintf(stderr, "  %s\n", why.c_str());
    std::fprintf(stderr, "the weights are in %s under fla's names; load them tensor by tensor%s\n", weights.c_str(),
                 removed ? " (an older config.json there was removed)" : "");
    return 0;
  }
  write_atomically(config_json, [&](const std::string& tmp) {
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    LINATTN_REQUIRE(f, "cannot create '", tmp, "'");
    const bool ok = std::fwrite(fla.json.data(), 1, fla.json.size(), f) == fla.json.size();
    LINATTN_REQUIRE(std::fclose(f) == 0 && ok, "cannot write '", config_json, "' (is the disk full?)");
  });
  std::printf("linattn-export: %s (fla model_type '%s'): load with `import fla` and "
              "AutoModelForCausalLM.from_pretrained('%s')\n",
              config_json.c_str(), fla.model_type.c_str(), out_dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  try {
    if (a.list) return list(a.in);
    a.in = checkpoint_argument(a.in, "linattn-export");
    return a.format == "safetensors" ? export_safetensors(a.in, a.out) : export_weights(a.in, a.out, a.dtype, a.force);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-export: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
