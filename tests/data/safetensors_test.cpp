// safetensors: what the writer produces parses by the format's definition alone (header length,
// JSON, offsets, dtypes, raw bytes), hand-built files read back their values, and every kind of
// damaged file is refused naming the file and the tensor.
#include "data/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/rng.h"
#include "data/json.h"

namespace linattn::data {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linattn-st-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of the 8-byte length of `header`, `header`, then `data`.
  std::string hand_built(const std::string& name, const std::string& header, const std::string& data) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << data;
    return path;
  }
  static std::string bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }
  static std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The error opening `path` gives ("" when it opens).
  static std::string error_of(const std::string& path) {
    try {
      SafetensorsFile f(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(Safetensors, WrittenFileParsesByTheFormatAlone) {
  Rng rng(7);
  Tensor a = Tensor::empty({3, 5}, DType::f32), b = Tensor::empty({4, 1, 2}, DType::f64), c = Tensor::empty({7}, DType::f32);
  rng.fill_normal(a, 0, 1);
  rng.fill_normal(b, 0, 1);
  rng.fill_normal(c, 0, 1);
  const std::string path = (dir_ / "w.safetensors").string();
  write_safetensors(path, {{"model.a.weight", a}, {"b \"quoted\"", b}, {"c", c}}, {{"format", "pt"}});

  // Independently of SafetensorsFile: length, JSON header, offsets, dtypes, bytes.
  const std::string raw = read_all(path);
  ASSERT_GE(raw.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(raw[size_t(i)]);  // little-endian by hand
  ASSERT_LE(8 + n, raw.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data should start 8-byte aligned";
  const Json h = parse_json(std::string_view(raw).substr(8, n), "header");
  ASSERT_TRUE(h.is_object());
  ASSERT_TRUE(h.contains("__metadata__"));
  EXPECT_EQ(h["__metadata__"], Json({{"format", "pt"}}));
  struct Want {
    const char* name;
    const char* dtype;
    std::vector<double> shape;
    const Tensor* t;
  };
  uint64_t expected_begin = 0;
  for (const Want& w : {Want{"model.a.weight", "F32", {3, 5}, &a}, Want{"b \"quoted\"", "F64", {4, 1, 2}, &b},
                        Want{"c", "F32", {7}, &c}}) {
    SCOPED_TRACE(w.name);
    ASSERT_TRUE(h.contains(w.name));
    const Json& e = h[w.name];
    EXPECT_EQ(e["dtype"], w.dtype);
    EXPECT_EQ(e["shape"].get<std::vector<double>>(), w.shape);
    const Json& off = e["data_offsets"];
    ASSERT_EQ(off.size(), 2u);
    const uint64_t begin = off[0], end = off[1];
    EXPECT_EQ(begin, expected_begin);  // packed in the given order
    ASSERT_EQ(end - begin, w.t->nbytes());
    EXPECT_EQ(std::memcmp(raw.data() + 8 + n + begin, w.t->raw(), w.t->nbytes()), 0) << "the bytes differ";
    expected_begin = end;
  }
  EXPECT_EQ(8 + n + expected_begin, raw.size()) << "trailing bytes after the last tensor";

  // And our reader gives the tensors back bit for bit.
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  Tensor a2 = f.read("model.a.weight", DType::f32), b2 = f.read("b \"quoted\"", DType::f64);
  EXPECT_EQ(a2.shape(), a.shape());
  EXPECT_EQ(std::memcmp(a2.raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(b2.raw(), b.raw(), b.nbytes()), 0);
}

// Names and metadata are JSON strings: quotes, control characters and non-ASCII text (the config
// YAML in linattn's metadata) survive the writer's escaping, and a Python writer's \u escapes
// (json.dumps escapes all non-ASCII) read as the UTF-8 name.
TEST_F(Safetensors, EscapedNamesAndMetadataReadBackAsUtf8) {
  Tensor a = Tensor::empty({2}, DType::f32);
  a.data<float>()[0] = 1, a.data<float>()[1] = 2;
  const std::string name = "caf\xC3\xA9.\xF0\x9F\x98\x80 \"q\"\\", text = "model:\n\tname: \"\xC3\xA9\"\x01";
  const std::string path = (dir_ / "names.safetensors").string();
  write_safetensors(path, {{name, a}}, {{"linattn_config", text}});
  const std::string raw = read_all(path), header_text = raw.substr(8, raw.size() - 8 - a.nbytes());
  EXPECT_EQ(header_text.find('\x01'), std::string::npos) << "a control character written unescaped: " << header_text;
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("linattn_config"), text);
  ASSERT_TRUE(f.find(name));
  EXPECT_EQ(f.read(name, DType::f32).data<float>()[1], 2.0f);

  const std::string header = R"({"caf\u00e9.\ud83d\ude00":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  SafetensorsFile python(hand_built("python.safetensors", header, bytes(a.data<float>(), 8)));
  ASSERT_TRUE(python.find("caf\xC3\xA9.\xF0\x9F\x98\x80"));
  EXPECT_EQ(python.read("caf\xC3\xA9.\xF0\x9F\x98\x80", DType::f32).data<float>()[0], 1.0f);
}

TEST_F(Safetensors, HandBuiltHalfTypesReadAsTheirValues) {
  // F16 1.0 = 0x3c00, -2.0 = 0xc000, 2^-24 (smallest subnormal) = 0x0001; BF16 1.5 = 0x3fc0, -0.25 = 0xbe80.
  const uint16_t f16[] = {0x3c00, 0xc000, 0x0001}, bf16[] = {0x3fc0, 0xbe80};
  std::string header = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
                       R"("__metadata__":{"k":"v"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[6,10]}})";
  SafetensorsFile f(hand_built("half.safetensors", header, bytes(f16, 6) + bytes(bf16, 4)));
  Tensor h = f.read("h", DType::f64), b = f.read("b", DType::f32);
  EXPECT_EQ(h.data<double>()[0], 1.0);
  EXPECT_EQ(h.data<double>()[1], -2.0);
  EXPECT_EQ(h.data<double>()[2], std::ldexp(1.0, -24));
  EXPECT_EQ(b.shape(), Shape({1, 2}));
  EXPECT_EQ(b.data<float>()[0], 1.5f);
  EXPECT_EQ(b.data<float>()[1], -0.25f);
  EXPECT_EQ(f.metadata().at("k"), "v");
}

TEST_F(Safetensors, DamagedFilesAreRefusedNamingFileAndTensor) {
  const std::string eight(8, '\0');
  struct Case {
    const char* name;
    std::string header, data;
    std::vector<std::string> says;
  };
  std::vector<Case> cases = {
      {"offsets_out_of_range", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight,
       {"tensor 'w'", "out of range", "8 bytes"}},
      {"unknown_dtype", R"({"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight,
       {"tensor 'w'", "unknown dtype 'F12'"}},
      {"size_mismatch", R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", eight,
       {"tensor 'w'", "16 bytes", "hold 8"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
       eight, {"'a'", "'b'", "overlap"}},
      {"truncated_json", R"({"w":{"dtype":"F32","sha)", eight, {"(header):1:25 (byte 24)", "missing closing quote", "damaged or truncated"}},
      {"no_offsets", R"({"w":{"dtype":"F32","shape":[1]}})", eight, {"tensor 'w'", "data_offsets"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = hand_built(std::string(c.name) + ".safetensors", c.header, c.data);
    std::string err = error_of(path);
    EXPECT_NE(err.find(path), std::string::npos) << err;
    for (const std::string& s : c.says) EXPECT_NE(err.find(s), std::string::npos) << "'" << s << "' not in: " << err;
  }

  // A header length beyond the file, and a file shorter than the length field itself.
  std::string path = (dir_ / "long_header.safetensors").string();
  {
    std::ofstream out(path, std::ios::binary);
    uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << R"({"w":{)";
  }
  std::string err = error_of(path);
  EXPECT_NE(err.find("header length says 1000 bytes but only 6 follow"), std::string::npos) << err;
  path = (dir_ / "stub.safetensors").string();
  std::ofstream(path, std::ios::binary) << "abc";
  err = error_of(path);
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
}

TEST_F(Safetensors, IntegerTensorsAreNamedWhenReadAsWeights) {
  const int32_t v[] = {1, 2};
  SafetensorsFile f(hand_built("int.safetensors", R"({"ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                               bytes(v, 8)));
  try {
    f.read("ids", DType::f32);
    FAIL() << "an I32 tensor read as weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'ids' is I32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn::data
