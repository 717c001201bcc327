// linattn-ops, the conformance tool: its chunk and recurrent forms agree through the file interface,
// and malformed inputs are rejected naming the dataset.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <hdf5.h>

#include "autograd/mixer_ops.h"
#include "core/hdf5.h"
#include "core/memory.h"
#include "testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

// Runs linattn-ops with `args`.
testing::CommandResult run_tool(const std::string& args) {
  return testing::run_command(testing::built_binary("linattn-ops") + " " + args);
}

class LinattnOps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("linattn-ops-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes the op's random problem (autograd/mixer_ops.h, its optional inputs too), do and dht for
  // a small problem, leaving out the datasets in `skip`.
  void write_inputs(const std::string& op_name, const std::string& file, const std::vector<std::string>& skip = {}) {
    const ops::MixerOpDescriptor& op = ops::mixer_op_named(op_name);
    Rng rng(3);
    const int64_t B = 2, T = 37, H = 2, dk = 8, dv = 6;
    H5File f(file, H5File::Mode::create);
    auto put = [&](const std::string& name, Tensor t) {
      if (std::find(skip.begin(), skip.end(), name) == skip.end()) f.write(name, t);
    };
    const ops::OpSizes sizes{{"B", B}, {"T", T}, {"H", H}, {"Hkv", H}, {"G", 1}, {"dk", dk}, {"dv", dv}};
    for (const auto& [name, t] : ops::random_inputs(op, sizes, rng, /*with_optional=*/true))
      if (name != "z0") put(name, t);  // z0 belongs to the normalized form only
    put("do", testing::random_tensor({B, T, H, dv}, rng));
    if (op.recurrent) put("dht", testing::random_tensor({B, H, dk, dv}, rng));
    if (op_name == "linear_attn") f.set_attr("feature_map", std::string("elu1"));
    if (op_name == "attention") f.set_attr("window_size", int64_t(8));
  }

  fs::path dir_;
};

TEST_F(LinattnOps, ChunkAndRecurrentFormsAgreeThroughTheFiles) {
  for (const ops::MixerOpDescriptor* m : ops::all_mixer_ops()) {
    if (!m->recurrent) continue;
    const std::string op = m->name;
    SCOPED_TRACE(op);
    write_inputs(op, path("in.h5"));
    ASSERT_EQ(run_tool(op + " " + path("in.h5") + " " + path("chunk.h5") + " --chunk-size 16").status, 0);
    ASSERT_EQ(run_tool(op + " " + path("in.h5") + " " + path("rec.h5") + " --form recurrent").status, 0);
    H5File chunk(path("chunk.h5"), H5File::Mode::read), rec(path("rec.h5"), H5File::Mode::read);
    std::vector<std::string> names = chunk.dataset_names();
    EXPECT_EQ(names, rec.dataset_names());
    EXPECT_TRUE(std::find(names.begin(), names.end(), "dh0") != names.end());
    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      EXPECT_CLOSE(chunk.read(name, DType::f64), rec.read(name, DType::f64), 1e-10);
    }
  }
}

TEST_F(LinattnOps, AttentionWritesOutputAndGradients) {
  write_inputs("attention", path("in.h5"));
  ASSERT_EQ(run_tool("attention " + path("in.h5") + " " + path("out.h5") + " --dtype f32").status, 0);
  H5File out(path("out.h5"), H5File::Mode::read);
  EXPECT_EQ(out.dataset_names(), (std::vector<std::string>{"dk", "dq", "dv", "o"}));
  EXPECT_GT(testing::max_abs(out.read("dq", DType::f64)), 0.0);
}

TEST_F(LinattnOps, MissingOrMisshapedDatasetsAreNamed) {
  write_inputs("gla", path("in.h5"), {"g"});
  testing::CommandResult r = run_tool("gla " + path("in.h5") + " " + path("out.h5"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("missing dataset 'g' (gla needs q, k, v, g)"), std::string::npos) << r.output;

  {
    Rng rng(1);
    H5File f(path("bad2.h5"), H5File::Mode::create);
    f.write("q", testing::random_tensor({1, 5, 2, 4}, rng));
    f.write("k", testing::random_tensor({1, 5, 2, 4}, rng));
    f.write("v", testing::random_tensor({1, 5, 2, 4}, rng));
    f.write("beta", testing::random_tensor({1, 5, 3}, rng, 0.1, 0.9));
  }
  r = run_tool("deltanet " + path("bad2.h5") + " " + path("out.h5"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("dataset 'beta' has shape [1, 5, 3], expected [1, 5, 2]"), std::string::npos)
      << r.output;
  {
    Rng rng(2);
    H5File f(path("bad3.h5"), H5File::Mode::create);
    for (const char* name : {"q", "k", "v"}) f.write(name, testing::random_tensor({1, 5, 2, 4}, rng));
    f.write("z0", testing::random_tensor({1, 2, 4}, rng, 0.5, 1.5));
  }
  r = run_tool("linear_attn " + path("bad3.h5") + " " + path("out.h5"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("'z0' is the normalizer state of the normalized form; set the attribute normalize = 1"),
            std::string::npos)
      << r.output;
  r = run_tool("nonsense " + path("bad2.h5") + " " + path("out.h5"));
  EXPECT_EQ(r.status, 2);
  std::string known;
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) known += (known.empty() ? "" : ", ") + op->name;
  EXPECT_NE(r.output.find("OP 'nonsense' is not one of " + known), std::string::npos) << r.output;
}

// Sizes are bounded: a chunk size past the config's bound, or a shape in the file too large to hold, is
// an error naming the flag or the dataset (it was std::bad_alloc).
TEST_F(LinattnOps, SizesAreBounded) {
  write_inputs("gla", path("in.h5"));
  for (std::string bad : {"100000", "0", "-3", "16x", ""}) {
    testing::CommandResult r = run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --chunk-size '" + bad + "'");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("--chunk-size '" + bad + "' is not a whole number in [1, 256]"), std::string::npos)
        << r.output;
  }
  EXPECT_EQ(run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --chunk-size 256").status, 0);

  testing::CommandResult r = run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --chunk-sise 16");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.output, "linattn-ops: error: unknown option '--chunk-sise' (see linattn-ops --help)\n");
  EXPECT_EQ(run_tool("--help").status, 0);

  // A dataset declared [100000, 100000, 64, 64] float64, written in chunks: only its shape is stored.
  {
    const hsize_t dims[4] = {100000, 100000, 64, 64}, chunk[4] = {1, 1, 64, 64};
    hid_t file = H5Fcreate(path("huge.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(4, dims, nullptr);
    hid_t props = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(props, 4, chunk);
    hid_t set = H5Dcreate2(file, "q", H5T_IEEE_F64LE, space, H5P_DEFAULT, props, H5P_DEFAULT);
    ASSERT_GE(set, 0);
    H5Dclose(set);
    H5Pclose(props);
    H5Sclose(space);
    H5Fclose(file);
  }
  r = run_tool("linear_attn " + path("huge.h5") + " " + path("out.h5"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output.rfind("linattn-ops: error: " + path("huge.h5") +
                                    ": dataset 'q' has shape [100000, 100000, 64, 64]: every size must be",
                                0),
            0u)
      << r.output;
}

// --device cuda without a GPU: an error that says so and how to go on, and nothing written.
TEST_F(LinattnOps, CudaWithoutAGpuIsAClearError) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is here: linattn-ops --device cuda would run";
  write_inputs("gla", path("in.h5"));
  testing::CommandResult r = run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --device cuda");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.rfind("linattn-ops: error: --device cuda: no CUDA device here (this build ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("leave out --device cuda to run the CPU kernels"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("out.h5")));
}

TEST_F(LinattnOps, CudaComputesInFloat32AndKnowsTwoDevices) {
  write_inputs("gla", path("in.h5"));
  testing::CommandResult r = run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --device cuda --dtype f64");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--device cuda computes in float32 (the CUDA kernels' type): use --dtype f32 or leave "
                          "--dtype out"),
            std::string::npos)
      << r.output;
  r = run_tool("gla " + path("in.h5") + " " + path("out.h5") + " --device tpu");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--device 'tpu' is not one of cpu, cuda"), std::string::npos) << r.output;
}

// On a GPU: every op either matches the CPU kernels (and OUT.h5 holds the CUDA results), or has no
// CUDA kernel yet and is reported as skipped with nothing written. (A Cuda* suite: it needs a GPU,
// which scripts/fresh-root-test reads from the name.)
class CudaLinattnOps : public LinattnOps {};
TEST_F(CudaLinattnOps, MatchesTheCpuOrIsSkipped) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  for (const ops::MixerOpDescriptor* m : ops::all_mixer_ops()) {
    const std::string op = m->name;
    for (const char* form : {"chunk", "recurrent"}) {
      if (!m->recurrent && std::string(form) == "recurrent") continue;
      SCOPED_TRACE(op + " " + form);
      write_inputs(op, path("in.h5"));
      fs::remove(path("out.h5"));
      testing::CommandResult r =
          run_tool(op + " " + path("in.h5") + " " + path("out.h5") + " --device cuda --form " + form);
      EXPECT_EQ(r.status, 0) << r.output;
      if (r.output.find("skipped: no CUDA kernel yet") != std::string::npos) {
        EXPECT_FALSE(fs::exists(path("out.h5")));
        continue;
      }
      EXPECT_NE(r.output.find("every array matches the CPU kernels"), std::string::npos) << r.output;
      H5File out(path("out.h5"), H5File::Mode::read);
      EXPECT_EQ(out.attr_string("device"), std::optional<std::string>("cuda"));
    }
  }
}

}  // namespace
}  // namespace linattn
