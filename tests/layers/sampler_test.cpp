// Choosing tokens from logits: greedy at temperature 0, top-k and top-p cut the candidates, the
// draws follow the softmax, and a seed fixes them.
#include "layers/sampler.h"

#include "testing.h"

namespace linattn {
namespace {

Tensor row(const std::vector<double>& logits) {
  Tensor t = Tensor::empty({1, int64_t(logits.size())}, DType::f64);
  std::copy(logits.begin(), logits.end(), t.data<double>());
  return t;
}

// How often each token is drawn in n draws.
std::vector<int> counts(const Tensor& logits, const SamplingOptions& o, int n, uint64_t seed = 3) {
  Rng rng(seed);
  std::vector<int> c(size_t(logits.shape()[1]));
  for (int i = 0; i < n; ++i) c[size_t(sample_tokens(logits, o, rng)[0])]++;
  return c;
}

TEST(Sampler, TemperatureZeroIsGreedyPerRow) {
  Tensor logits = Tensor::empty({2, 4}, DType::f32);
  const float v[] = {0.1f, 2.0f, -1.0f, 1.9f, 3.0f, 0.0f, 3.0f, -2.0f};
  std::copy(v, v + 8, logits.data<float>());
  Rng rng(1);
  SamplingOptions o;
  o.temperature = 0;
  EXPECT_EQ(sample_tokens(logits, o, rng), (std::vector<int32_t>{1, 0}));  // a tie goes to the lower id
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  // p = softmax([0, log 2, log 3, -inf-ish] / 1) = 1/6, 2/6, 3/6; 60000 draws: each count within
  // 5 standard deviations (sqrt(n p (1-p)) < 125) of n p.
  Tensor logits = row({0.0, std::log(2.0), std::log(3.0), -100.0});
  std::vector<int> c = counts(logits, SamplingOptions{}, 60000);
  EXPECT_NEAR(c[0], 10000, 600);
  EXPECT_NEAR(c[1], 20000, 600);
  EXPECT_NEAR(c[2], 30000, 600);
  EXPECT_EQ(c[3], 0);
  // Temperature 0.5 squares the odds: 1 : 4 : 9.
  SamplingOptions cold;
  cold.temperature = 0.5;
  c = counts(logits, cold, 14000);
  EXPECT_NEAR(c[0], 1000, 200);
  EXPECT_NEAR(c[2], 9000, 400);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  SamplingOptions o;
  o.top_k = 2;
  std::vector<int> c = counts(row({0.0, 1.0, 0.5, 0.9}), o, 3000);
  EXPECT_EQ(c[0] + c[2], 0);
  EXPECT_GT(c[1], 0);
  EXPECT_GT(c[3], 0);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // p = 0.5, 0.3, 0.2: top_p 0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8); top_p 0.5 keeps {0} only.
  Tensor logits = row({std::log(0.5), std::log(0.3), std::log(0.2)});
  SamplingOptions o;
  o.top_p = 0.7;
  std::vector<int> c = counts(logits, o, 4000);
  EXPECT_EQ(c[2], 0);
  EXPECT_NEAR(c[0], 2500, 200);  // renormalized: 0.5 / 0.8
  o.top_p = 0.5;
  c = counts(logits, o, 100);
  EXPECT_EQ(c[0], 100);
}

TEST(Sampler, TheSameSeedGivesTheSameTokens) {
  Rng a(42), b(42), other(43);
  Tensor logits = row({0.3, 0.1, 0.2, 0.25, 0.0, 0.15});
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 50; ++i) {
    x.push_back(sample_tokens(logits, SamplingOptions{}, a)[0]);
    y.push_back(sample_tokens(logits, SamplingOptions{}, b)[0]);
    z.push_back(sample_tokens(logits, SamplingOptions{}, other)[0]);
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampler, SettingsOutOfRangeNameTheFlag) {
  SamplingOptions o;
  o.temperature = -1;
  EXPECT_NE(testing::error_of([&] { check_sampling(o); }).find("--temperature -1 must be >= 0"), std::string::npos);
  o = {};
  o.top_p = 0;
  EXPECT_NE(testing::error_of([&] { check_sampling(o); }).find("--top-p 0 must be in (0, 1]"), std::string::npos);
  o.top_p = 1.5;
  EXPECT_NE(testing::error_of([&] { check_sampling(o); }).find("--top-p"), std::string::npos);
  o = {};
  o.top_k = -2;
  EXPECT_NE(testing::error_of([&] { check_sampling(o); }).find("--top-k"), std::string::npos);
}

}  // namespace
}  // namespace linattn
