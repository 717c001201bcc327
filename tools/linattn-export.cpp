// linattn-export: a checkpoint's weights (and model config) in a file for other tools, or a listing.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/hdf5.h"
#include "train/checkpoint.h"

namespace {

using namespace linattn;

const char* kUsage = R"(usage: linattn-export CKPT.h5 OUT.h5 [--dtype f32|f16|bf16]
       linattn-export --list CKPT.h5

Writes the weights of a linattn checkpoint (no optimizer state) with the model config to OUT.h5:
one dataset per parameter under its HF/fla name ([out, in] for linear weights), and the root
attributes format = "linattn-weights", format_version, config (YAML), step, dtype. f16 is HDF5's
IEEE half (h5py reads float16); bf16 is stored as uint16 bit patterns with the dataset attribute
dtype = "bfloat16". docs/checkpoint-format.md describes both files.

--list prints a checkpoint's (or an export's) step, model config and every tensor's name and shape.
)";

int list(const std::string& path) {
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

int export_weights(const std::string& in_path, const std::string& out_path, const std::string& dtype) {
  std::error_code ec;
  LINATTN_REQUIRE(!std::filesystem::equivalent(in_path, out_path, ec), "'", out_path, "' is the checkpoint '",
                  in_path, "' itself: writing the export there would replace the checkpoint (and its training "
                  "state); give another OUT.h5");
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  std::string dtype = "f32";
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--list") {
      listing = true;
    } else if (a == "--dtype" && i + 1 < argc) {
      dtype = argv[++i];
      if (dtype != "f32" && dtype != "f16" && dtype != "bf16") {
        std::fprintf(stderr, "linattn-export: --dtype must be f32, f16 or bf16, got '%s'\n", dtype.c_str());
        return 2;
      }
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "linattn-export: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if ((listing && positional.size() != 1) || (!listing && positional.size() != 2)) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  try {
    return listing ? list(positional[0]) : export_weights(positional[0], positional[1], dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-export: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
