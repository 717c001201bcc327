// Data parallelism: `mpirun -np 2` gives the same losses and final weights as one process
// training on the same global batch.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/hdf5.h"
#include "testing.h"
#include "train/checkpoint.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

std::vector<double> logged_losses(const std::string& metrics) {
  std::ifstream in(metrics);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::vector<double> losses;
  std::regex re("\"loss\": ([-0-9.e+]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

TEST(DataParallel, TwoRanksEqualOneProcess) {
#ifndef LINATTN_MPI
  GTEST_SKIP() << "built without MPI";
#endif
  ASSERT_EQ(std::system("command -v mpirun > /dev/null"), 0) << "mpirun is missing: install openmpi-bin";
  std::string dir = (fs::temp_directory_path() / ("linattn-mpi-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  std::string cfg = dir + "/tiny.yaml";
  // 20 steps of a global batch of 8 sequences: 4 per rank with two ranks.
  std::ofstream(cfg) << testing::tiny_config(dir + "/run", {"train.max_steps=20", "train.log_every=1",
                                                            "data.val_tokens=4096", "train.threads=1"})
                            .text;
  const char* build = std::getenv("LINATTN_BUILD_DIR");
  std::string bin = std::string(build ? build : "build") + "/linattn-train";
  std::string single = bin + " " + cfg + " --out " + dir + "/one > " + dir + "/one.log 2>&1";
  // --oversubscribe: two ranks on a machine that MPI may count as fewer slots; root is allowed in CI.
  std::string mpi = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe " + bin +
                    " " + cfg + " --out " + dir + "/two > " + dir + "/two.log 2>&1";
  ASSERT_EQ(std::system(single.c_str()), 0) << single;
  ASSERT_EQ(std::system(mpi.c_str()), 0) << mpi;

  std::vector<double> one = logged_losses(dir + "/one/metrics.jsonl"), two = logged_losses(dir + "/two/metrics.jsonl");
  ASSERT_EQ(one.size(), 20u);
  ASSERT_EQ(two.size(), 20u);
  for (size_t i = 0; i < one.size(); ++i)
    EXPECT_NEAR(two[i], one[i], 1e-5 * std::abs(one[i])) << "step " << i + 1;

  // Final weights: equal to relative 1e-5 (the reductions run in a different order).
  H5File a(latest_checkpoint(dir + "/one"), H5File::Mode::read), b(latest_checkpoint(dir + "/two"), H5File::Mode::read);
  int compared = 0;
  for (const std::string& name : a.dataset_names()) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    SCOPED_TRACE(name);
    EXPECT_CLOSE(b.read(name, DType::f64), a.read(name, DType::f64), 1e-5);
    ++compared;
  }
  EXPECT_GT(compared, 10);
  fs::remove_all(dir);
}

TEST(DataParallel, GlobalBatchNotDivisibleByRanksIsAClearError) {
#ifndef LINATTN_MPI
  GTEST_SKIP() << "built without MPI";
#endif
  std::string dir = (fs::temp_directory_path() / ("linattn-mpi-bad-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  std::string cfg = dir + "/tiny.yaml";
  std::ofstream(cfg) << testing::tiny_config(dir + "/run", {"train.batch_size=3", "train.threads=1"}).text;
  const char* build = std::getenv("LINATTN_BUILD_DIR");
  std::string bin = std::string(build ? build : "build") + "/linattn-train";
  std::string mpi = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe " + bin +
                    " " + cfg + " > " + dir + "/log 2>&1";
  EXPECT_NE(std::system(mpi.c_str()), 0);
  std::ifstream in(dir + "/log");
  std::string log((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(log.find("must be divisible by the number of ranks, 2"), std::string::npos) << log;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace linattn
