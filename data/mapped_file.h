// A read-only memory map of a whole file (mmap), released when the object goes away.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace linattn::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path`; throws linattn::Error naming the file when it cannot be opened. An empty file maps to
  // size() == 0 and data() == nullptr.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view text() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace linattn::data
