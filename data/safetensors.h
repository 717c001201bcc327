// safetensors files (the Hugging Face weights format), read and written without model knowledge:
// an 8-byte little-endian header length N, N bytes of JSON mapping each tensor's name to
// {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets from the end of the header) plus an
// optional "__metadata__" map of strings, then the tensors' raw little-endian bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/mapped_file.h"

namespace linattn::data {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // as the file names it: "F32", "BF16", ...
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets from the end of the header
};

class SafetensorsFile {
 public:
  // Maps the file and checks its header: the length, the JSON, every entry's dtype, shape and
  // offsets (inside the data, not overlapping, end - begin = the shape's bytes). Errors name the file
  // and the tensor at fault.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in file order of offsets
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent
  // The tensor `name` (F64, F32, F16 or BF16 in the file) converted to `dtype` (f32 or f64).
  Tensor read(const std::string& name, DType dtype) const;

 private:
  MappedFile file_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (f32 as F32, f64 as F64, in the given order) and `metadata` to `path` through a
// temporary file in the same folder, renamed over `path` once complete and on disk.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Whether `path` starts as a safetensors file does (a header length that fits the file, then a JSON
// object), so that a tool expecting HDF5 can say what it was given.
bool looks_like_safetensors(const std::string& path);

// Bytes per element of a safetensors dtype name, or 0 for a name the format does not define.
size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace linattn::data
