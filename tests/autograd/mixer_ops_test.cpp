// The table of mixer ops (autograd/mixer_ops.h): every op's call, on its own random problem with all
// its optional inputs, has the gradients of central finite differences of itself, for every output
// and form (the chunk form at a chunk that does not divide T). This checks that each descriptor
// wires its inputs to the op, and the backward of the step that maps mamba2's file inputs (dt after
// its softplus, A) to the op's (the time step before its softplus, A_log).
#include <algorithm>

#include "autograd/mixer_ops.h"
#include "gradcheck.h"

namespace linattn {
namespace {

TEST(MixerOpTable, EveryOpsGradientsMatchFiniteDifferences) {
  const ops::OpSizes sizes{{"B", 1}, {"T", 7}, {"H", 2}, {"Hkv", 1}, {"G", 1}, {"dk", 3}, {"dv", 2}};
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) {
    Rng rng(11);
    const std::map<std::string, Tensor> problem = ops::random_inputs(*op, sizes, rng, /*with_optional=*/true);
    std::vector<std::string> names;
    std::vector<Tensor> values;
    for (const auto& [name, t] : problem) names.push_back(name), values.push_back(t);
    ops::OpCall call = ops::default_call(*op);
    // The forms that use the most: the normalized one (its z0 is among the optional inputs), a
    // window shorter than T.
    if (call.number.count("normalize")) call.number["normalize"] = 1;
    if (call.number.count("window_size")) call.number["window_size"] = 3;
    call.options.chunk_size = 4;
    std::vector<ops::MixerForm> forms{ops::MixerForm::chunk};
    if (op->recurrent) forms.push_back(ops::MixerForm::recurrent);
    for (ops::MixerForm form : forms)
      for (const char* output : {"o", "ht", "zt"}) {
        call.options.form = form;
        auto f = [&](const std::vector<Variable>& in) {
          ops::OpCall c = call;
          for (size_t i = 0; i < names.size(); ++i) c.in[names[i]] = in[i];
          const std::map<std::string, Variable> out = op->run(c);
          return out.count(output) ? out.at(output) : Variable();
        };
        if (!f(std::vector<Variable>(values.begin(), values.end())).defined()) continue;
        SCOPED_TRACE(op->name + (form == ops::MixerForm::chunk ? " chunk " : " recurrent ") + output);
        // An output need not depend on every input (ht does not on q), so the numeric gradient
        // must be nonzero for some input only.
        const auto grads = testing::tape_and_numeric_gradients(f, values, rng);
        double largest = 0;
        for (size_t i = 0; i < grads.size(); ++i) {
          SCOPED_TRACE("input " + names[i]);
          largest = std::max(largest, testing::max_abs(grads[i].second));
          EXPECT_CLOSE(grads[i].first, grads[i].second, testing::kGradTolerance);
        }
        EXPECT_GT(largest, 0.0) << "every numeric gradient is zero: the check would prove nothing";
      }
  }
}

}  // namespace
}  // namespace linattn
