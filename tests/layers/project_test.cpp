// Parameters::joined and project() (layers/modules.h): matrices declared one after another and laid
// out back to back are one joined parameter, and project() makes one product of them (ops::linears)
// with the results of one linear each; where padding parts them, project() takes one linear each.
#include <vector>

#include "layers/modules.h"
#include "recompute_testing.h"

namespace linattn {
namespace {

using testing::random_tensor;

// Linear layers [3, in], [5, in], [2, in] declared one after another, drawn at random.
struct Three {
  Parameters p;
  std::vector<Linear> layers;
  explicit Three(DType dtype, int64_t in = 16) {
    for (int64_t rows : {3, 5, 2}) layers.emplace_back(p, "w" + std::to_string(layers.size()), in, rows, 0.5);
    p.allocate(dtype);
    p.initialize(7);
  }
};

// Outputs, dx and the flat gradient of <outputs, upstream> through project() or one linear each.
std::vector<Tensor> run(Three& m, const Tensor& x, const std::vector<Tensor>& upstream, bool projected) {
  m.p.zero_grad();
  Variable vx(x, true);
  std::vector<Variable> ys;
  if (projected) {
    ys = project(m.p, vx, {&m.layers[0], &m.layers[1], &m.layers[2]});
  } else {
    for (const Linear& l : m.layers) ys.push_back(l(m.p, vx));
  }
  std::vector<Tensor> result;
  for (const Variable& y : ys) result.push_back(y.value().clone());
  backward(ys, upstream);
  result.push_back(vx.grad().clone());
  result.push_back(m.p.grads().all().clone());
  return result;
}

TEST(Project, JoinedViewsMatricesBackToBack) {
  Three dense(DType::f32);
  const Variable j = dense.p.joined(0, 3);
  ASSERT_TRUE(j.defined());
  EXPECT_EQ(j.shape(), Shape({10, 16}));
  EXPECT_EQ(j.value().raw(), dense.p[0].value().raw());
  EXPECT_EQ(j.grad().raw(), dense.p[0].grad().raw());
  EXPECT_TRUE(j.is_parameter());
  // in = 8: [3, 8] and [5, 8] are 24 and 40 elements, each padded to a multiple of 16
  Three padded(DType::f32, 8);
  EXPECT_FALSE(padded.p.joined(0, 3).defined());
  EXPECT_FALSE(padded.p.joined(1, 2).defined());
  EXPECT_TRUE(padded.p.joined(2, 1).defined()) << "one matrix is its own block";
}

TEST(Project, OneProductOrOneLinearEachGiveTheSameResults) {
  for (int64_t in : {16, 8}) {  // joined; padded apart
    SCOPED_TRACE("in " + std::to_string(in));
    Three m(DType::f64, in);
    Rng rng(4);
    const Tensor x = random_tensor({5, in}, rng);
    const std::vector<Tensor> upstream = {random_tensor({5, 3}, rng), random_tensor({5, 5}, rng),
                                          random_tensor({5, 2}, rng)};
    const std::vector<Tensor> got = run(m, x, upstream, true), want = run(m, x, upstream, false);
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE(std::to_string(i));
      EXPECT_CLOSE(got[i], want[i], 1e-13);
    }
  }
}

}  // namespace
}  // namespace linattn
