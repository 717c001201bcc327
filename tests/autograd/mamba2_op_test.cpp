// ops::mamba2 on the tape: the gradients of x, the time step (through its softplus), A_log (through
// A = -exp(A_log)), B, C, D (the skip) and the initial state, against float64 finite differences,
// with random upstream gradients on o and the final state; documents of a batch run alone; errors;
// the CUDA entries of the build.
#include "autograd/mamba2.h"

#include "autograd/mixer_ops.h"
#include "gradcheck.h"

namespace linattn {
namespace {

using testing::error_of;
using testing::random_tensor;

// Analytic gradients of <o, Ro> + <ht, Rh> through the tape against central differences, for the
// inputs x, dt, A_log, B, C, D, h0 in that order.
void expect_gradients_match(const ops::MixerOptions& opt, const std::vector<Tensor>& inputs, Rng& rng) {
  auto run = [&](const std::vector<Variable>& v) { return ops::mamba2(v[0], v[1], v[2], v[3], v[4], v[5], v[6], opt); };
  std::vector<Variable> vars;
  for (const Tensor& t : inputs) vars.emplace_back(t, true);
  ops::MixerOutput out = run(vars);
  Tensor ro = random_tensor(out.o.shape(), rng), rh = random_tensor(out.ht.shape(), rng);
  backward({out.o, out.ht}, {ro, rh});
  auto loss = [&] {
    NoGrad no_grad;
    std::vector<Variable> plain;
    for (const Tensor& t : inputs) plain.emplace_back(t, false);
    ops::MixerOutput o = run(plain);
    return testing::dot(o.o.value(), ro) + testing::dot(o.ht.value(), rh);
  };
  const char* names[] = {"x", "dt", "A_log", "B", "C", "D", "h0"};
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(std::string("input ") + names[i] + " " + inputs[i].str());
    Tensor numeric = testing::finite_difference(loss, inputs[i]);
    EXPECT_GT(testing::max_abs(numeric), 0.0);
    EXPECT_CLOSE(vars[i].grad(), numeric, testing::kGradTolerance);
  }
}

std::vector<Tensor> random_inputs(int64_t B, int64_t T, int64_t H, int64_t G, int64_t N, int64_t P, Rng& rng) {
  return {random_tensor({B, T, H, P}, rng), random_tensor({B, T, H}, rng), random_tensor({H}, rng),
          random_tensor({B, T, G, N}, rng), random_tensor({B, T, G, N}, rng), random_tensor({H}, rng),
          random_tensor({B, H, N, P}, rng)};
}

TEST(Mamba2Op, GradientsInBothFormsAndGroupings) {
  for (ops::MixerForm form : {ops::MixerForm::chunk, ops::MixerForm::recurrent})
    for (int64_t G : {1, 2}) {
      SCOPED_TRACE(std::string(form == ops::MixerForm::chunk ? "chunk" : "recurrent") + ", G " + std::to_string(G));
      Rng rng(3 + G);
      ops::MixerOptions opt;
      opt.form = form;
      opt.chunk_size = 4;
      expect_gradients_match(opt, random_inputs(2, 9, 4, G, 3, 2, rng), rng);
    }
}

// Two documents in one row give what each gives alone (the second from a fresh state).
TEST(Mamba2Op, DocumentsOfARowRunAlone) {
  Rng rng(8);
  const int64_t T = 10, cut = 4;
  std::vector<Tensor> in = random_inputs(1, T, 2, 1, 3, 2, rng);
  ops::Segments segments{{0, cut, T}};
  ops::MixerOptions opt;
  opt.chunk_size = 3;
  opt.segments = &segments;
  NoGrad no_grad;
  auto var = [](const Tensor& t) { return Variable(t); };
  ops::MixerOutput whole = ops::mamba2(var(in[0]), var(in[1]), var(in[2]), var(in[3]), var(in[4]), var(in[5]), {}, opt);
  opt.segments = nullptr;
  auto part = [&](const Tensor& t, int64_t t0, int64_t n) {  // positions [t0, t0 + n) of a [1, T, ...] tensor
    Shape s = t.shape();
    s[1] = n;
    return Variable(t.view_at(t0 * (t.numel() / T), s).clone());
  };
  for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, cut}, {cut, T - cut}}) {
    ops::MixerOutput alone = ops::mamba2(part(in[0], t0, n), part(in[1], t0, n), var(in[2]), part(in[3], t0, n),
                                         part(in[4], t0, n), var(in[5]), {}, opt);
    EXPECT_CLOSE(part(whole.o.value(), t0, n).value(), alone.o.value(), 1e-12);
    if (t0 == cut) EXPECT_CLOSE(whole.ht.value(), alone.ht.value(), 1e-12);
  }
}

TEST(Mamba2Op, BadInputGetsAClearError) {
  Rng rng(2);
  std::vector<Tensor> in = random_inputs(1, 5, 4, 2, 3, 2, rng);
  auto call = [&](const std::vector<Tensor>& t) {
    std::vector<Variable> v(t.begin(), t.end());
    return error_of([&] { ops::mamba2(v[0], v[1], v[2], v[3], v[4], v[5], v[6]); });
  };
  std::vector<Tensor> three_groups = in;
  three_groups[3] = three_groups[4] = random_tensor({1, 5, 3, 3}, rng);
  EXPECT_NE(call(three_groups).find("mamba2: the 4 heads of x do not split into the 3 groups of B and C"),
            std::string::npos);
  std::vector<Tensor> bad_dt = in;
  bad_dt[1] = random_tensor({1, 5, 2}, rng);
  EXPECT_NE(call(bad_dt).find("mamba2: dt should be [B, T, H] = [1, 5, 4]"), std::string::npos);
  std::vector<Tensor> nan_dt = in;
  nan_dt[1].data<double>()[3] = std::nan("");
  EXPECT_NE(call(nan_dt).find("mamba2: dt"), std::string::npos);
}

// Mamba2's CUDA entries are in the table of a CUDA build (kernels/cuda/mamba2.h); a CPU-only build
// has none.
TEST(Mamba2Op, HasItsCudaKernelsInACudaBuild) {
#ifdef LINATTN_CUDA
  EXPECT_EQ(ops::mamba2_op.missing_kernels(Device::cuda), "");
#else
  EXPECT_EQ(ops::mamba2_op.missing_kernels(Device::cuda), "mamba2_forward, mamba2_backward, mamba2_saved_size");
#endif
}

}  // namespace
}  // namespace linattn
