#include "core/hdf5.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace linattn {

namespace fs = std::filesystem;

namespace {

// Silence HDF5's stack printing once; errors surface as exceptions instead. HDF5's exit handler
// is not installed: after a write failed for lack of space the file cannot be closed, and HDF5 1.10
// crashes (SIGSEGV) when it tries again at exit. Every file is closed by its H5File.
void quiet_hdf5() {
  static bool done = [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

hid_t mem_type(DType t) {
  switch (t) {
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
    case DType::i32: return H5T_NATIVE_INT32;
  }
  return H5T_NATIVE_DOUBLE;
}

// Closes an HDF5 handle at scope exit, or at close_now(), which says whether closing succeeded (a
// dataset's cached chunks are written when it closes).
struct Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  bool close_now() {
    herr_t status = id >= 0 ? close(id) : -1;
    id = -1;
    return status >= 0;
  }
  ~Handle() {
    if (id >= 0) close(id);
  }
};

// Why a write to `path` failed, when the disk is full: errno `err` (of the failed call) is ENOSPC,
// or the folder's file system has next to nothing left. "" otherwise.
std::string space_problem(const std::string& path, int err) {
  fs::path dir = fs::absolute(path).parent_path();
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return err == ENOSPC ? ": no space left on the device" : "";
  const unsigned long long free_bytes = (unsigned long long)st.f_bavail * st.f_frsize;
  if (err != ENOSPC && free_bytes >= (1u << 20)) return "";
  return ": no space left on the device (" + std::to_string(free_bytes / 1024) + " KiB free in '" + dir.string() +
         "'): free some space there or write somewhere else";
}

// Throws "<what>: no space left ..." (or "<what><otherwise>") unless ok. Call it right after the
// failed call, before errno changes.
template <class... Args>
void require_written(bool ok, const std::string& path, const std::string& otherwise, Args&&... what) {
  if (ok) return;
  const int err = errno;
  std::string space = space_problem(path, err);
  LINATTN_REQUIRE(false, std::forward<Args>(what)..., space.empty() ? otherwise : space);
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  LINATTN_REQUIRE(fd >= 0, "cannot open '", path, "' to flush it to disk: ", std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  errno = err;
  require_written(rc == 0, path, std::string(": ") + std::strerror(err), "cannot flush '", path, "' to disk");
}

}  // namespace

H5File::H5File(const std::string& path, Mode mode) : path_(path) {
  quiet_hdf5();
  if (mode == Mode::read) {
    LINATTN_CHECK(std::filesystem::exists(path), "cannot open '", path, "': no such file");
    LINATTN_CHECK(H5Fis_hdf5(path.c_str()) > 0, "cannot open '", path,
                  "': not an HDF5 file (or its header is damaged)");
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    LINATTN_REQUIRE(file_ >= 0 || access(path.c_str(), R_OK) == 0, "cannot open '", path,
                    "': no permission to read it");
    LINATTN_REQUIRE(file_ >= 0, "cannot open '", path, "': the HDF5 file is damaged or cut short (its header is "
                    "there, its structure cannot be read); use an earlier copy, e.g. another checkpoint of the run");
  } else {
    errno = 0;
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    require_written(file_ >= 0, path, " (check the path and permissions)", "cannot create the HDF5 file '", path,
                    "'");
  }
}

H5File::~H5File() {
  if (file_ >= 0) H5Fclose(file_);
}

void H5File::close() {
  if (file_ < 0) return;
  errno = 0;
  bool ok = H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0;
  const int err = errno;
  ok = H5Fclose(file_) >= 0 && ok;
  file_ = -1;
  errno = err ? err : errno;
  require_written(ok, path_, " (is the disk full or the file system read-only?)", "cannot finish writing '", path_,
                  "'");
}

bool H5File::has(const std::string& name) const {
  return H5Lexists(file_, name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> H5File::dataset_names() const {
  std::vector<std::string> names;
  H5Literate(
      file_, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t group, const char* name, const H5L_info_t*, void* out) -> herr_t {
        H5O_info_t info;
        if (H5Oget_info_by_name(group, name, &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_DATASET)
          static_cast<std::vector<std::string>*>(out)->push_back(name);
        return 0;
      },
      &names);
  std::sort(names.begin(), names.end());
  return names;
}

Shape H5File::shape(const std::string& name) const {
  LINATTN_CHECK(has(name), "'", path_, "' has no dataset '", name, "'");
  Handle ds{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  LINATTN_CHECK(ds.id >= 0, "cannot open dataset '", name, "' in '", path_, "'");
  Handle space{H5Dget_space(ds.id), H5Sclose};
  int rank = H5Sget_simple_extent_ndims(space.id);
  LINATTN_CHECK(rank >= 0 && rank <= Shape::kMaxDims, "dataset '", name, "' in '", path_, "' has rank ", rank,
                " (at most ", Shape::kMaxDims, " supported)");
  hsize_t dims[Shape::kMaxDims];
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  Shape s;
  for (int i = 0; i < rank; ++i) s = s.appended(int64_t(dims[i]));
  return s;
}

Tensor H5File::read(const std::string& name, DType dtype) const {
  Shape s = shape(name);
  Tensor t = Tensor::empty(s, dtype);
  Handle ds{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  herr_t status = H5Dread(ds.id, mem_type(dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw());
  LINATTN_CHECK(status >= 0, "cannot read dataset '", name, "' from '", path_,
                "': the data is corrupt (checksum mismatch) or not numeric");
  return t;
}

Tensor H5File::read(const std::string& name, DType dtype, const Shape& expected) const {
  Shape s = shape(name);
  LINATTN_CHECK(s == expected, "dataset '", name, "' in '", path_, "' has shape ", s.str(), ", expected ",
                expected.str());
  return read(name, dtype);
}

void H5File::write(const std::string& name, const Tensor& t, bool checksum) {
  if (t.device() != Device::cpu) return write(name, t.to(Device::cpu), checksum);  // the host copy is written
  hsize_t dims[Shape::kMaxDims];
  for (int i = 0; i < t.ndim(); ++i) dims[i] = hsize_t(t.size(i));
  Handle space{t.ndim() == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(t.ndim(), dims, nullptr), H5Sclose};
  Handle props{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
  if (checksum && t.numel() > 0 && t.ndim() > 0) {
    // Chunk along the first dim (about 1 MiB a chunk) so the Fletcher-32 filter can apply.
    hsize_t chunk[Shape::kMaxDims];
    size_t row_bytes = t.nbytes() / size_t(t.size(0));
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (1 << 20) / std::max<size_t>(row_bytes, 1)));
    for (int i = 1; i < t.ndim(); ++i) chunk[i] = dims[i];
    H5Pset_chunk(props.id, t.ndim(), chunk);
    H5Pset_fletcher32(props.id);
  }
  Handle ds{H5Dcreate2(file_, name.c_str(), mem_type(t.dtype()), space.id, H5P_DEFAULT, props.id, H5P_DEFAULT),
            H5Dclose};
  require_written(ds.id >= 0, path_, " (does it exist already?)", "cannot create dataset '", name, "' in '", path_,
                  "'");
  errno = 0;
  bool ok = H5Dwrite(ds.id, mem_type(t.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) >= 0 && ds.close_now();
  require_written(ok, path_, "", "cannot write dataset '", name, "' to '", path_, "'");
}

// float32 bits -> IEEE half bits, rounded to nearest even; overflow gives infinity.
static uint16_t float_to_half_bits(uint32_t x) {
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));  // inf, NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                  // below 2^-14: a subnormal half (or zero)
    float f;
    std::memcpy(&f, &a, 4);
    return uint16_t(sign | uint16_t(std::nearbyint(f * 16777216.0f)));  // units of 2^-24
  }
  a += 0xfffu + ((a >> 13) & 1u);  // round the 13 dropped bits to nearest even (a carry bumps the exponent)
  return uint16_t(sign | ((a - 0x38000000u) >> 13));  // rebias the exponent from 127 to 15
}

void H5File::write_half(const std::string& name, const Tensor& t, Half kind) {
  Tensor f = t.to(DType::f32);
  hsize_t dims[Shape::kMaxDims];
  for (int i = 0; i < f.ndim(); ++i) dims[i] = hsize_t(f.size(i));
  Handle space{f.ndim() == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(f.ndim(), dims, nullptr), H5Sclose};
  if (kind == Half::f16) {
    // IEEE binary16: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9. The values are
    // rounded here (to nearest even): HDF5 1.10's own float conversion loses the carry when rounding
    // the mantissa up crosses a power of two (0.0624891 became 0.03125).
    Handle half{H5Tcopy(H5T_IEEE_F32LE), H5Tclose};
    H5Tset_fields(half.id, 15, 10, 5, 0, 10);
    H5Tset_precision(half.id, 16);
    H5Tset_ebias(half.id, 15);
    H5Tset_size(half.id, 2);
    std::vector<uint16_t> bits(size_t(f.numel()));
    const uint32_t* src = static_cast<const uint32_t*>(f.raw());
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_half_bits(src[i]);
    errno = 0;
    Handle ds{H5Dcreate2(file_, name.c_str(), half.id, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
    bool ok = ds.id >= 0 && H5Dwrite(ds.id, half.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0 && ds.close_now();
    require_written(ok, path_, "", "cannot write dataset '", name, "' to '", path_, "'");
    return;
  }
  // bfloat16: the top 16 bits of the float32, rounded to nearest even.
  std::vector<uint16_t> bits(size_t(f.numel()));
  const float* src = f.data<float>();
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = from_float(src[i]).bits;
  errno = 0;
  Handle ds{H5Dcreate2(file_, name.c_str(), H5T_NATIVE_UINT16, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose};
  require_written(ds.id >= 0 && H5Dwrite(ds.id, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0,
                  path_, "", "cannot write dataset '", name, "' to '", path_, "'");
  Handle tspace{H5Screate(H5S_SCALAR), H5Sclose};
  Handle str{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(str.id, 8);
  Handle attr{H5Acreate2(ds.id, "dtype", str.id, tspace.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  LINATTN_CHECK(attr.id >= 0 && H5Awrite(attr.id, str.id, "bfloat16") >= 0, "cannot tag dataset '", name, "'");
  attr.close_now();
  require_written(ds.close_now(), path_, "", "cannot write dataset '", name, "' to '", path_, "'");
}

static void write_attr(hid_t file, const std::string& name, hid_t type, const void* value) {
  if (H5Aexists(file, name.c_str()) > 0) H5Adelete(file, name.c_str());
  Handle space{H5Screate(H5S_SCALAR), H5Sclose};
  Handle attr{H5Acreate2(file, name.c_str(), type, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  LINATTN_CHECK(attr.id >= 0 && H5Awrite(attr.id, type, value) >= 0, "cannot write attribute '", name, "'");
}

void H5File::set_attr(const std::string& name, double value) { write_attr(file_, name, H5T_NATIVE_DOUBLE, &value); }
void H5File::set_attr(const std::string& name, int64_t value) { write_attr(file_, name, H5T_NATIVE_INT64, &value); }
void H5File::set_attr(const std::string& name, const std::string& value) {
  Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, std::max<size_t>(1, value.size()));
  H5Tset_strpad(type.id, H5T_STR_NULLPAD);
  write_attr(file_, name, type.id, value.data());
}

std::optional<double> H5File::attr_double(const std::string& name) const {
  if (H5Aexists(file_, name.c_str()) <= 0) return std::nullopt;
  Handle attr{H5Aopen(file_, name.c_str(), H5P_DEFAULT), H5Aclose};
  double v = 0;
  LINATTN_CHECK(H5Aread(attr.id, H5T_NATIVE_DOUBLE, &v) >= 0, "attribute '", name, "' in '", path_,
                "' is not a number");
  return v;
}

std::optional<int64_t> H5File::attr_int(const std::string& name) const {
  if (H5Aexists(file_, name.c_str()) <= 0) return std::nullopt;
  Handle attr{H5Aopen(file_, name.c_str(), H5P_DEFAULT), H5Aclose};
  int64_t v = 0;
  LINATTN_CHECK(H5Aread(attr.id, H5T_NATIVE_INT64, &v) >= 0, "attribute '", name, "' in '", path_,
                "' is not an integer");
  return v;
}

std::optional<std::string> H5File::attr_string(const std::string& name) const {
  if (H5Aexists(file_, name.c_str()) <= 0) return std::nullopt;
  Handle attr{H5Aopen(file_, name.c_str(), H5P_DEFAULT), H5Aclose};
  Handle type{H5Aget_type(attr.id), H5Tclose};
  LINATTN_CHECK(H5Tget_class(type.id) == H5T_STRING, "attribute '", name, "' in '", path_, "' is not a string");
  if (H5Tis_variable_str(type.id) > 0) {
    char* s = nullptr;
    Handle mem{H5Tget_native_type(type.id, H5T_DIR_ASCEND), H5Tclose};
    LINATTN_CHECK(H5Aread(attr.id, mem.id, &s) >= 0, "cannot read attribute '", name, "'");
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  std::string out(H5Tget_size(type.id), '\0');
  LINATTN_CHECK(H5Aread(attr.id, type.id, out.data()) >= 0, "cannot read attribute '", name, "'");
  out.erase(std::find(out.begin(), out.end(), '\0'), out.end());
  return out;
}

void write_atomically(const std::string& path, const std::function<void(const std::string& tmp)>& fill) {
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  // The temporary name is in the same folder, so the rename below is atomic.
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  try {
    fill(tmp);
    fsync_path(tmp, false);
    std::error_code ec;
    fs::rename(tmp, path, ec);
    LINATTN_REQUIRE(!ec, "cannot move the new file into place at '", path, "': ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fsync_path(target.has_parent_path() ? target.parent_path().string() : ".", true);
}

void write_text_atomically(const std::string& path, const std::string& text) {
  write_atomically(path, [&](const std::string& tmp) {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    LINATTN_REQUIRE(f, "cannot create '", tmp, "': ", std::strerror(errno));
    const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int write_error = errno;
    const bool closed = std::fclose(f) == 0;  // a full disk may show only here, as the buffer is flushed
    if (!written) errno = write_error;
    require_written(written && closed, tmp, std::string(": ") + std::strerror(errno), "cannot write '", path, "'");
  });
}

void write_h5_atomically(const std::string& path, const std::function<void(H5File&)>& fill) {
  write_atomically(path, [&](const std::string& tmp) {
    H5File f(tmp, H5File::Mode::create);
    fill(f);
    f.close();
  });
}

}  // namespace linattn
