// train.log_grad_norms: before a progress line the trainer prints every parameter's gradient norm
// and its share of the step's total. The figures must be the gradients the step computed (before
// clipping), one line per parameter in the model's order, their squares summing to the total.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "train/trainer.h"
#include "train_testing.h"

namespace linattn {
namespace {

namespace fs = std::filesystem;

struct Printed {
  std::string name;
  double norm = 0, percent = 0;
};

// The block that follows "grad norms step <step> (total T):", and T.
std::vector<Printed> printed_norms(const std::string& out, int64_t step, double& total) {
  const std::string head = "grad norms step " + std::to_string(step) + " (total ";
  const size_t at = out.find(head);
  if (at == std::string::npos) return {};
  total = std::stod(out.substr(at + head.size()));
  std::istringstream lines(out.substr(out.find('\n', at) + 1));
  std::vector<Printed> rows;
  std::string line;
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
    Printed p;
    std::istringstream fields(line);
    std::string percent;
    fields >> p.name >> p.norm >> percent;
    p.percent = std::stod(percent);
    rows.push_back(p);
  }
  return rows;
}

TEST(GradNorms, EachParameterNormIsItsGradientsAndTheSquaresSumToTheTotal) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-grad-norms-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  // No clipping, so the gradients left in the buffers after the last step are the ones it printed.
  Config c = testing::tiny_config_on(testing::corpus_shards(), dir,
                                     {"train.max_steps=2", "train.log_every=2", "train.log_grad_norms=true",
                                      "train.grad_clip=0"});
  Trainer trainer(c);
  ::testing::internal::CaptureStdout();
  trainer.run();
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  fs::remove_all(dir);

  // Step 1 (always logged) and step 2 (log_every), not between.
  double total1 = 0, total2 = 0;
  EXPECT_FALSE(printed_norms(out, 1, total1).empty()) << out;
  const std::vector<Printed> rows = printed_norms(out, 2, total2);
  const Parameters& params = trainer.model().params();
  ASSERT_EQ(rows.size(), params.size()) << out;
  double sum_squares = 0, percent = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Tensor g = params.grads()[int(i)].to(DType::f64);
    double s = 0;
    for (int64_t j = 0; j < g.numel(); ++j) s += g.data<double>()[j] * g.data<double>()[j];
    EXPECT_EQ(rows[i].name, params.name(int(i)));
    // %.6g prints six significant digits: a relative 1e-5 bar.
    EXPECT_NEAR(rows[i].norm, std::sqrt(s), 1e-5 * std::sqrt(s)) << rows[i].name;
    sum_squares += rows[i].norm * rows[i].norm;
    percent += rows[i].percent;
  }
  EXPECT_NEAR(std::sqrt(sum_squares), total2, 1e-5 * total2);
  // Each share is printed to 0.1%: the sum is 100 within half of that per line.
  EXPECT_NEAR(percent, 100.0, 0.05 * double(rows.size()));
  // The total is the progress line's gradient norm (printed to three decimals).
  const std::string step2 = out.substr(out.find("step      2 |"));
  EXPECT_NEAR(std::stod(step2.substr(step2.find("grad norm ") + 10)), total2, 1e-3) << step2;
}

TEST(GradNorms, OffByDefault) {
  const std::string dir = (fs::temp_directory_path() / ("linattn-grad-norms-off-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  Config c = testing::tiny_config_on(testing::corpus_shards(), dir, {"train.max_steps=1"});
  Trainer trainer(c);
  ::testing::internal::CaptureStdout();
  trainer.run();
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  fs::remove_all(dir);
  EXPECT_EQ(out.find("grad norms"), std::string::npos) << out;
  EXPECT_NE(out.find("step      1 |"), std::string::npos) << out;
}

}  // namespace
}  // namespace linattn
