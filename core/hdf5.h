// Tensors in HDF5 files: one dataset per tensor, attributes on the root group. Used by the
// conformance tool, checkpoints and export. HDF5's own error printing is silenced; every failure
// throws linattn::Error naming the file and the dataset (and, for writes that ran out of space,
// saying that the disk is full).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace linattn {

class H5File {
 public:
  enum class Mode { read, create };  // create truncates an existing file

  H5File(const std::string& path, Mode mode);
  ~H5File();
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const;
  std::vector<std::string> dataset_names() const;  // root-level datasets, sorted
  Shape shape(const std::string& name) const;

  // Reads a floating or integer dataset and converts it to `dtype`.
  Tensor read(const std::string& name, DType dtype) const;
  // Reads a dataset and checks its shape, naming the dataset and both shapes when they differ.
  Tensor read(const std::string& name, DType dtype, const Shape& expected) const;
  // Writes t (CPU) as a dataset of t's dtype; with checksum, chunked with Fletcher-32.
  void write(const std::string& name, const Tensor& t, bool checksum = false);

  // Writes a float tensor stored at reduced precision: f16 as HDF5's IEEE half type (numpy's and
  // h5py's float16), bf16 as its 16-bit patterns in a uint16 dataset with the attribute
  // dtype = "bfloat16" (numpy has no bfloat16; shift the bits left by 16 to get float32).
  enum class Half { f16, bf16 };
  void write_half(const std::string& name, const Tensor& t, Half kind);

  void set_attr(const std::string& name, double value);
  void set_attr(const std::string& name, int64_t value);
  void set_attr(const std::string& name, const std::string& value);
  std::optional<double> attr_double(const std::string& name) const;
  std::optional<int64_t> attr_int(const std::string& name) const;
  std::optional<std::string> attr_string(const std::string& name) const;

  void flush();
  // Flushes and closes the file, throwing when any of it fails (a write that ran out of space can
  // first show at this point). The destructor closes silently; call close() when the file matters.
  void close();

 private:
  std::string path_;
  int64_t file_ = -1;  // hid_t
};

// Writes the HDF5 file `path` through a temporary file in the same folder: `fill` writes into it,
// then it is closed, flushed to disk and renamed over `path`. When anything fails the temporary
// file is removed, `path` is left as it was, and the error says what failed (a full disk as such).
void write_h5_atomically(const std::string& path, const std::function<void(H5File&)>& fill);
// The same for any file: `fill` writes the temporary file whose path it is given, then it is flushed
// to disk and renamed over `path`; on failure it is removed and `path` is left as it was.
void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& fill);
// A text file written so: `path` holds either its old content or all of `text`, never a part.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace linattn
