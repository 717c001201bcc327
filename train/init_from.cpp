#include "train/init_from.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "core/hdf5.h"
#include "data/safetensors.h"
#include "train/fla_export.h"

namespace linattn {

namespace {

namespace fs = std::filesystem;

// The tensors a weights file offers: our name -> shape, and a reader converting to our shape.
struct Source {
  std::map<std::string, Shape> shapes;
  std::function<Tensor(const std::string& name, DType dtype)> read;
};

bool is_hdf5(const std::string& path) {
  char magic[8] = {};
  std::ifstream(path, std::ios::binary).read(magic, 8);
  return std::string(magic, 8) == "\x89HDF\r\n\x1a\n";
}

Source hdf5_source(const std::string& path) {
  auto f = std::make_shared<H5File>(path, H5File::Mode::read);
  const std::string format = f->attr_string("format").value_or("");
  LINATTN_REQUIRE(format == "linattn-checkpoint" || format == "linattn-weights", path,
                  ": an HDF5 file, but not a linattn checkpoint or export (no 'format' attribute linattn-checkpoint "
                  "or linattn-weights)");
  LINATTN_REQUIRE(f->attr_string("dtype").value_or("f32") != "bf16", path,
                  ": a bf16 export (stored as 16-bit patterns): export again with --dtype f32 (or f16)");
  Source s;
  for (const std::string& name : f->dataset_names())
    if (name.rfind("optimizer.", 0) != 0) s.shapes[name] = f->shape(name);
  s.read = [f](const std::string& name, DType dtype) { return f->read(name, dtype); };
  return s;
}

// fla's names (fla_names: Mamba2ForCausalLM's backbone...) are read as the model's parameters they
// stand for; a parameter written under two names (a tied Mamba2 embedding, also lm_head.weight)
// must hold the same values under both.
Source safetensors_source(const std::string& path, const Model& model) {
  auto f = std::make_shared<data::SafetensorsFile>(path);
  std::map<std::string, std::string> ours_of;
  const Parameters& p = model.params();
  for (size_t i = 0; i < p.size(); ++i)
    for (const std::string& theirs : fla_names(model.config(), p.name(int(i)))) ours_of[theirs] = p.name(int(i));
  auto names = std::make_shared<std::map<std::string, std::vector<std::string>>>();  // ours -> the file's
  Source s;
  for (const data::SafetensorsEntry& e : f->entries()) {
    auto it = ours_of.find(e.name);
    const std::string ours = it == ours_of.end() ? e.name : it->second;
    (*names)[ours].push_back(e.name);
    s.shapes[ours] = our_shape(e.name, e.shape);
  }
  s.read = [f, names, path](const std::string& ours, DType dtype) {
    const std::vector<std::string>& theirs = names->at(ours);
    Tensor t = f->read(theirs[0], dtype);
    for (size_t i = 1; i < theirs.size(); ++i) {
      const Tensor other = f->read(theirs[i], dtype);
      LINATTN_REQUIRE(other.numel() == t.numel() && std::memcmp(other.raw(), t.raw(), t.nbytes()) == 0,
                      "--init-from ", path, ": ", theirs[i], " differs from ", theirs[0], ", but the model has one ",
                      "parameter for both (", ours, "; tie_word_embeddings ties the LM head to the embedding): set "
                      "tie_word_embeddings: false to import both");
    }
    return t.view(our_shape(theirs[0], t.shape()));
  };
  return s;
}

// How many entries of the host tensor `t` are NaN or infinite.
int64_t non_finite_count(const Tensor& t) {
  int64_t n = 0;
  dispatch_float(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* v = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) n += !std::isfinite(v[i]);
  });
  return n;
}

}  // namespace

size_t init_from(const std::string& path_in, Model& model, const std::string& config_source) {
  std::string path = path_in;
  if (fs::is_directory(path)) {
    path = (fs::path(path) / "model.safetensors").string();
    LINATTN_REQUIRE(fs::exists(path), "--init-from ", path_in, ": the folder has no model.safetensors (give a "
                    "safetensors file, a folder holding model.safetensors, or a linattn .h5)");
  }
  LINATTN_REQUIRE(fs::exists(path), "--init-from ", path, ": no such file");
  Source src = is_hdf5(path) ? hdf5_source(path) : safetensors_source(path, model);

  const Parameters& p = model.params();
  std::vector<std::string> mismatched, missing, unmatched;
  std::set<std::string> ours;
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string& name = p.name(int(i));
    ours.insert(name);
    const Shape& want = p.values()[int(i)].shape();
    auto it = src.shapes.find(name);
    if (it == src.shapes.end()) missing.push_back(name + " " + want.str());
    else if (!(it->second == want))
      mismatched.push_back(name + ": expected " + want.str() + ", found " + it->second.str());
  }
  for (const auto& [name, shape] : src.shapes)
    if (!ours.count(name)) unmatched.push_back(name + " " + shape.str());
  if (!mismatched.empty() || !missing.empty() || !unmatched.empty()) {
    std::string list;
    auto section = [&](const std::vector<std::string>& items, const std::string& title) {
      if (items.empty()) return;
      list += "\n" + title + " (" + std::to_string(items.size()) + "):";
      for (const std::string& s : items) list += "\n  " + s;
    };
    section(mismatched, "shapes that differ (the model of " + config_source + " vs the file)");
    section(missing, "parameters of the model that the file lacks");
    section(unmatched, "tensors of the file that match no parameter of the model");
    LINATTN_REQUIRE(false, "--init-from ", path, ": the weights do not fit the model of ", config_source,
                    "; nothing was trained.", list,
                    "\nuse the config the weights were trained with (a linattn file stores it: linattn-export "
                    "--list FILE), or export the weights of this model");
  }
  // Every tensor is read and checked before any is copied: a NaN or an infinity would otherwise
  // surface steps later as a loss or gate error that names neither the file nor the tensor.
  const DType dt = p.values().all().dtype();
  std::vector<Tensor> weights;
  std::vector<std::string> non_finite;
  for (size_t i = 0; i < p.size(); ++i) {
    weights.push_back(src.read(p.name(int(i)), dt));
    if (const int64_t n = non_finite_count(weights.back()))
      non_finite.push_back(p.name(int(i)) + " " + weights.back().shape().str() + ": " + std::to_string(n) + " of " +
                           std::to_string(weights.back().numel()) + " entries");
  }
  if (!non_finite.empty()) {
    std::string list;
    for (const std::string& s : non_finite) list += "\n  " + s;
    LINATTN_REQUIRE(false, "--init-from ", path, ": ", non_finite.size(),
                    non_finite.size() == 1 ? " tensor holds" : " tensors hold", " NaN or infinite values; nothing was "
                    "trained:", list,
                    "\nthe weights come from a run that diverged: start from an earlier checkpoint of it");
  }
  for (size_t i = 0; i < p.size(); ++i) p.values()[int(i)].copy_from(weights[i]);
  return p.size();
}

}  // namespace linattn
