#include "data/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/hdf5.h"
#include "data/json.h"

namespace linattn::data {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is this reader");

namespace {

// Headers beyond this are refused before allocating (the format's own reader sets 100 MB).
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return (sign ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);  // zero and subnormals
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// A whole number >= 0 from the header.
uint64_t header_count(const Json& v, const std::string& where) {
  LINATTN_REQUIRE(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), where,
                  " must be a whole number >= 0");
  return v.get<uint64_t>();
}

}  // namespace

size_t safetensors_dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const uint64_t size = file_.size();
  LINATTN_REQUIRE(size >= 8, path, ": not a safetensors file: ", size,
                  " bytes, shorter than the 8-byte header length it starts with (the file is truncated)");
  uint64_t n = 0;
  std::memcpy(&n, file_.data(), 8);
  LINATTN_REQUIRE(n <= size - 8, path, ": the header length says ", n, " bytes but only ", size - 8,
                  " follow it (the file is truncated, or not a safetensors file)");
  LINATTN_REQUIRE(n <= kMaxHeader, path, ": a header of ", n, " bytes is beyond the format's 100 MB limit");
  data_start_ = 8 + n;
  const uint64_t data_size = size - data_start_;
  Json header;
  try {
    header = parse_json(file_.text().substr(8, n), path + " (header)");
  } catch (const Error& e) {
    LINATTN_REQUIRE(false, e.what(), " (the header is damaged or truncated)");
  }
  LINATTN_REQUIRE(header.is_object(), path, ": the header is not a JSON object");
  for (const auto& [name, v] : header.items()) {
    const std::string at = path + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      LINATTN_REQUIRE(v.is_object(), path, ": '__metadata__' must map names to strings");
      for (const auto& [k, s] : v.items()) {
        LINATTN_REQUIRE(s.is_string(), path, ": '__metadata__' entry '", k, "' is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    LINATTN_REQUIRE(v.is_object(), at, ": expected {\"dtype\", \"shape\", \"data_offsets\"}");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      LINATTN_REQUIRE(v.contains(key), at, ": missing \"", key, "\"");
    const Json &dtype = v["dtype"], &shape = v["shape"], &offsets = v["data_offsets"];
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();
    const size_t width = safetensors_dtype_size(e.dtype);
    LINATTN_REQUIRE(dtype.is_string() && width > 0, at, ": unknown dtype '", e.dtype,
                    "' (the format's dtypes: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, "
                    "I64, U64, F64)");
    LINATTN_REQUIRE(shape.is_array(), at, ": \"shape\" must be a list of sizes");
    LINATTN_REQUIRE(shape.size() <= 4, at, ": ", shape.size(), " dims; linattn's tensors have at most 4");
    double elements = 1;
    for (const Json& d : shape) {
      e.shape = e.shape.appended(int64_t(header_count(d, at + ": a size in \"shape\"")));
      elements *= double(e.shape[-1]);
    }
    LINATTN_REQUIRE(offsets.is_array() && offsets.size() == 2, at, ": \"data_offsets\" must be [begin, end]");
    e.begin = header_count(offsets[0], at + ": data_offsets begin");
    e.end = header_count(offsets[1], at + ": data_offsets end");
    LINATTN_REQUIRE(e.begin <= e.end && e.end <= data_size, at, ": data_offsets [", e.begin, ", ", e.end,
                    "] are out of range: the data after the header holds ", data_size, " bytes",
                    e.end > data_size ? " (the file is truncated?)" : "");
    LINATTN_REQUIRE(elements * double(width) == double(e.end - e.begin), at, ": shape ", e.shape.str(), " of ",
                    e.dtype, " is ", elements * double(width), " bytes but data_offsets [", e.begin, ", ", e.end,
                    "] hold ", e.end - e.begin);
    entries_.push_back(std::move(e));
  }
  std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries_.size(); ++i)
    LINATTN_REQUIRE(entries_[i].begin >= entries_[i - 1].end, path, ": tensors '", entries_[i - 1].name, "' [",
                    entries_[i - 1].begin, ", ", entries_[i - 1].end, ") and '", entries_[i].name, "' [",
                    entries_[i].begin, ", ", entries_[i].end, ") overlap");
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

Tensor SafetensorsFile::read(const std::string& name, DType dtype) const {
  const SafetensorsEntry* e = find(name);
  LINATTN_REQUIRE(e, path(), ": no tensor '", name, "'");
  const unsigned char* p = file_.data() + data_start_ + e->begin;
  const int64_t n = e->shape.numel();
  Tensor out = Tensor::empty(e->shape, dtype);
  dispatch_float(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* o = out.data<T>();
    // memcpy per element: the offsets need not be aligned.
    for (int64_t i = 0; i < n; ++i) {
      if (e->dtype == "F64") {
        double v;
        std::memcpy(&v, p + 8 * i, 8);
        o[i] = T(v);
      } else if (e->dtype == "F32") {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        o[i] = T(v);
      } else {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        if (e->dtype == "F16") o[i] = T(f16_to_float(v));
        else if (e->dtype == "BF16") o[i] = T(bf16_to_float(v));
        else LINATTN_REQUIRE(false, path(), ": tensor '", name, "' is ", e->dtype, ", not a floating-point type this "
                             "reads (F64, F32, F16, BF16)");
      }
    }
  });
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  if (!metadata.empty()) json["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LINATTN_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, "write_safetensors: '", name, "' is ", t.str());
    const uint64_t bytes = uint64_t(t.numel()) * dtype_size(t.dtype());
    std::vector<int64_t> shape;
    for (int d = 0; d < t.shape().ndim(); ++d) shape.push_back(t.shape()[d]);
    json[name] = {{"dtype", t.dtype() == DType::f32 ? "F32" : "F64"},
                  {"shape", shape},
                  {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header = json.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as HF's writer does
  write_atomically(path, [&](const std::string& tmp) {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    LINATTN_REQUIRE(f, "cannot create '", tmp, "': ", std::strerror(errno));
    const uint64_t n = header.size();
    bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(header.data(), 1, n, f) == n;
    for (const auto& [name, t] : tensors) {
      const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
      ok = ok && std::fwrite(t.raw(), 1, bytes, f) == bytes;
    }
    const int err = errno;
    ok = std::fclose(f) == 0 && ok;
    LINATTN_REQUIRE(ok, "cannot write '", path, "': ", std::strerror(err), " (is the disk full?)");
  });
}

bool looks_like_safetensors(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char head[9] = {};
  const bool read = std::fread(head, 1, sizeof head, f) == sizeof head;
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  std::fclose(f);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | head[i];  // little-endian
  return read && size > 8 && n >= 2 && n <= uint64_t(size) - 8 && head[8] == '{';
}

}  // namespace linattn::data
