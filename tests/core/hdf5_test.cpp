#include "core/hdf5.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "small_disk.h"
#include "testing.h"

namespace linattn {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".h5")).string();
}

TEST(H5File, RoundTripDatasetsAndAttributes) {
  std::string path = temp_path("roundtrip");
  Rng rng(1);
  Tensor a = testing::random_tensor({2, 3, 4}, rng);
  Tensor b = testing::random_tensor({5}, rng, -1, 1, DType::f32);
  {
    H5File f(path, H5File::Mode::create);
    f.write("model.layers.0.attn.q_proj.weight", a);
    f.write("b", b, /*checksum=*/true);
    f.set_attr("scale", 0.125);
    f.set_attr("window_size", int64_t(64));
    f.set_attr("feature_map", std::string("elu1"));
  }
  H5File f(path, H5File::Mode::read);
  EXPECT_EQ(f.dataset_names(), (std::vector<std::string>{"b", "model.layers.0.attn.q_proj.weight"}));
  EXPECT_CLOSE(f.read("model.layers.0.attn.q_proj.weight", DType::f64), a, 0.0);
  EXPECT_CLOSE(f.read("b", DType::f32, {5}), b, 0.0);
  EXPECT_EQ(f.attr_double("scale"), 0.125);
  EXPECT_EQ(f.attr_int("window_size"), 64);
  EXPECT_EQ(f.attr_string("feature_map"), "elu1");
  EXPECT_FALSE(f.attr_int("absent").has_value());
  EXPECT_THROW(f.read("missing", DType::f64), Error);
  EXPECT_THROW(f.read("b", DType::f32, {4}), Error);
  std::filesystem::remove(path);
}

TEST(H5File, FlippedByteFailsTheChecksumAndNamesTheDataset) {
  std::string path = temp_path("corrupt");
  Tensor t = Tensor::empty({1000}, DType::f32);
  t.fill_(1.2345);
  {
    H5File f(path, H5File::Mode::create);
    f.write("weights", t, /*checksum=*/true);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  float v = 1.2345f;
  std::string pattern(reinterpret_cast<const char*>(&v), 4);
  size_t at = bytes.find(pattern + pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 400] ^= 0x10;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  H5File f(path, H5File::Mode::read);
  try {
    f.read("weights", DType::f32);
    FAIL() << "a corrupt dataset was read without error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'weights'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(H5File, MissingOrForeignFilesAreClearErrors) {
  EXPECT_THROW(H5File("/nonexistent/x.h5", H5File::Mode::read), Error);
  std::string path = temp_path("foreign");
  std::ofstream(path) << "not hdf5";
  try {
    H5File f(path, H5File::Mode::read);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an HDF5 file"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(H5File, ATruncatedFileIsCalledDamagedNotAPermissionProblem) {
  std::string path = temp_path("truncated");
  Rng rng(2);
  {
    H5File f(path, H5File::Mode::create);
    f.write("w", testing::random_tensor({256, 256}, rng));
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);  // a copy cut short
  const std::string message = testing::error_of([&] { H5File f(path, H5File::Mode::read); });
  EXPECT_NE(message.find("damaged or cut short"), std::string::npos) << message;
  EXPECT_EQ(message.find("permission"), std::string::npos) << message;
  std::filesystem::remove(path);
}

TEST(H5File, AFullDiskIsAClearErrorAndLeavesTheOldFile) {
  // A 512 KiB disk holding a small file; rewriting it with more than fits must fail wherever HDF5
  // first notices (a dataset write, a cached chunk written when the dataset closes, the final
  // flush), say that the disk is full, and leave the old file and no temporary file behind.
  const std::string dir = temp_path("small-disk");
  testing::SmallDisk disk(dir, 512 * 1024);
  if (!disk.mounted()) GTEST_SKIP() << disk.why_not();
  const std::string path = dir + "/x.h5";
  Tensor small = Tensor::empty({10}, DType::f32);
  small.fill_(1.5);
  write_h5_atomically(path, [&](H5File& f) { f.write("w", small); });
  for (int64_t numel : {int64_t(40000), int64_t(200000), int64_t(1000000)}) {
    for (bool checksum : {false, true}) {
      SCOPED_TRACE("numel " + std::to_string(numel) + (checksum ? " with checksum" : ""));
      Tensor big = Tensor::empty({numel}, DType::f32);
      big.fill_(2.5);
      std::string msg;
      try {
        write_h5_atomically(path, [&](H5File& f) {
          for (const char* name : {"w0", "w1", "w2", "w3"}) f.write(name, big, checksum);
        });
      } catch (const Error& e) {
        msg = e.what();
      }
      EXPECT_NE(msg.find("no space left on the device"), std::string::npos) << msg;
      H5File f(path, H5File::Mode::read);
      EXPECT_CLOSE(f.read("w", DType::f32), small, 0.0);
      int files = 0;
      for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
      EXPECT_EQ(files, 1) << "a temporary file was left behind";
    }
  }
}

}  // namespace
}  // namespace linattn
