// linattn-ops: runs one token mixer on inputs from an HDF5 file and writes its outputs and
// gradients to another, so the kernels can be checked against any other implementation.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/mixers.h"
#include "core/hdf5.h"

namespace {

using namespace linattn;

const char* kUsage = R"(usage: linattn-ops OP IN.h5 OUT.h5 [--dtype f32|f64] [--form chunk|recurrent] [--chunk-size N]

Runs the token mixer OP forward and backward on the inputs in IN.h5 and writes the outputs and
gradients to OUT.h5 (as float64), for checking linattn against another implementation.

OP:        linear_attn | gla | deltanet | gated_deltanet | attention
IN.h5:     float64 datasets (layout [B, T, H, D], states [B, H, dk, dv]):
             q, k, v                 all ops (attention: k and v may have fewer heads)
             g    [B, T, H, dk]      gla (log-gate, <= 0)
             beta [B, T, H]          deltanet, gated_deltanet (in [0, 1])
             a    [B, T, H]          gated_deltanet (log-decay, <= 0)
             h0   [B, H, dk, dv]     optional initial state (linear mixers)
             z0   [B, H, dk]         optional initial normalizer state (linear_attn with normalize)
             do                      optional upstream gradient of o (default zeros)
             dht  [B, H, dk, dv]     optional upstream gradient of the final state (linear mixers)
             dzt  [B, H, dk]         optional upstream gradient of the final normalizer (normalize)
           optional attributes: scale (float, default dk^-1/2), feature_map (string: identity,
           elu1, relu; linear_attn, default identity), normalize (int; linear_attn),
           window_size (int; attention, 0 or absent = global)
OUT.h5:    o, ht (linear mixers), zt (normalize), and the gradient of every input given:
           dq, dk, dv, dg, dbeta, da, dh0, dz0
options:
  --dtype f32|f64          compute in float32 or float64 (default f64)
  --form chunk|recurrent   the chunkwise training kernels or the step-by-step recurrence (default chunk)
  --chunk-size N           chunk length of the chunk form, 1 to 256 (default 64)
)";

struct Options {
  std::string op, in, out;
  DType dtype = DType::f64;
  ops::MixerOptions mixer;
};

// The largest dataset read: 2^32 values (32 GiB in float64), far beyond what a conformance check needs;
// bounding it turns a corrupt or mistyped shape into an error naming the dataset instead of bad_alloc.
constexpr int64_t kMaxValues = int64_t(1) << 32;

// Reads a dataset (float64 in the file) as the compute dtype, checking its shape when one is given.
Variable input(const H5File& f, const std::string& name, DType dtype, const Shape* expected, const std::string& needs) {
  LINATTN_REQUIRE(f.has(name), f.path(), ": missing dataset '", name, "' (", needs, ")");
  Shape s = f.shape(name);
  int64_t values = 1;
  for (int d = 0; d < s.ndim(); ++d) {
    LINATTN_REQUIRE(s[d] >= 1 && s[d] <= kMaxValues / values, f.path(), ": dataset '", name, "' has shape ", s.str(),
                    ": every size must be at least 1 and all of them together at most ", kMaxValues, " values");
    values *= s[d];
  }
  if (expected)
    LINATTN_REQUIRE(s == *expected, f.path(), ": dataset '", name, "' has shape ", s.str(), ", expected ",
                    expected->str());
  return Variable(f.read(name, dtype), true);
}

Variable optional_input(const H5File& f, const std::string& name, DType dtype, const Shape& expected) {
  if (!f.has(name)) return {};
  return input(f, name, dtype, &expected, "");
}

int run(const Options& o) {
  H5File in(o.in, H5File::Mode::read);
  const std::string needs = o.op == "gla"              ? "gla needs q, k, v, g"
                            : o.op == "deltanet"       ? "deltanet needs q, k, v, beta"
                            : o.op == "gated_deltanet" ? "gated_deltanet needs q, k, v, beta, a"
                                                       : o.op + " needs q, k, v";
  Variable q = input(in, "q", o.dtype, nullptr, needs);
  LINATTN_REQUIRE(q.shape().ndim() == 4, o.in, ": dataset 'q' has shape ", q.shape().str(), ", expected [B, T, H, dk]");
  const int64_t B = q.shape()[0], T = q.shape()[1], H = q.shape()[2], dk = q.shape()[3];
  ops::MixerOptions mixer = o.mixer;
  if (auto s = in.attr_double("scale")) mixer.scale = *s;

  std::map<std::string, Variable> inputs{{"q", q}};
  Variable out_o, out_ht, out_zt;
  if (o.op == "attention") {
    Variable k = input(in, "k", o.dtype, nullptr, needs), v = input(in, "v", o.dtype, nullptr, needs);
    const int64_t window = in.attr_int("window_size").value_or(0);
    LINATTN_REQUIRE(window >= 0, o.in, ": attribute window_size is ", window, ", expected 0 (global) or a positive "
                    "window length");
    out_o = ops::attention(q, k, v, window, mixer.scale);
    inputs["k"] = k;
    inputs["v"] = v;
  } else {
    Shape qk{B, T, H, dk};
    Variable k = input(in, "k", o.dtype, &qk, needs);
    Variable v = input(in, "v", o.dtype, nullptr, needs);
    LINATTN_REQUIRE(v.shape().ndim() == 4 && v.shape()[0] == B && v.shape()[1] == T && v.shape()[2] == H, o.in,
                    ": dataset 'v' has shape ", v.shape().str(), ", expected [", B, ", ", T, ", ", H, ", dv]");
    const int64_t dv = v.shape()[3];
    Variable h0 = optional_input(in, "h0", o.dtype, {B, H, dk, dv});
    inputs["k"] = k;
    inputs["v"] = v;
    if (h0.defined()) inputs["h0"] = h0;
    ops::MixerOutput r;
    if (o.op == "linear_attn") {
      std::string fm = in.attr_string("feature_map").value_or("identity");
      LINATTN_REQUIRE(fm == "identity" || fm == "elu1" || fm == "relu", o.in, ": attribute feature_map is '", fm,
                    "', expected identity, elu1 or relu");
      cpu::FeatureMap phi = fm == "elu1" ? cpu::FeatureMap::elu1 : fm == "relu" ? cpu::FeatureMap::relu
                                                                                : cpu::FeatureMap::identity;
      const bool normalize = in.attr_int("normalize").value_or(0) != 0;
      Variable z0 = optional_input(in, "z0", o.dtype, {B, H, dk});
      LINATTN_CHECK(!z0.defined() || normalize, o.in, ": dataset 'z0' is the normalizer state of the normalized form; "
                    "set the attribute normalize = 1 or drop z0");
      if (z0.defined()) inputs["z0"] = z0;
      r = ops::linear_attention(q, k, v, h0, phi, normalize, mixer, z0);
    } else if (o.op == "gla") {
      Variable g = input(in, "g", o.dtype, &qk, needs);
      inputs["g"] = g;
      r = ops::gla(q, k, v, g, h0, mixer);
    } else {
      Shape bth{B, T, H};
      Variable beta = input(in, "beta", o.dtype, &bth, needs);
      inputs["beta"] = beta;
      if (o.op == "deltanet") {
        r = ops::deltanet(q, k, v, beta, h0, mixer);
      } else {
        Variable a = input(in, "a", o.dtype, &bth, needs);
        inputs["a"] = a;
        r = ops::gated_deltanet(q, k, v, beta, a, h0, mixer);
      }
    }
    out_o = r.o;
    out_ht = r.ht;
    out_zt = r.zt;
  }

  std::vector<Variable> outputs{out_o};
  std::vector<Tensor> grads{in.has("do") ? input(in, "do", o.dtype, &out_o.shape(), "").value()
                                         : Tensor::zeros(out_o.shape(), o.dtype)};
  if (out_ht.defined()) {
    outputs.push_back(out_ht);
    grads.push_back(in.has("dht") ? input(in, "dht", o.dtype, &out_ht.shape(), "").value()
                                  : Tensor::zeros(out_ht.shape(), o.dtype));
  }
  if (out_zt.defined()) {
    outputs.push_back(out_zt);
    grads.push_back(in.has("dzt") ? input(in, "dzt", o.dtype, &out_zt.shape(), "").value()
                                  : Tensor::zeros(out_zt.shape(), o.dtype));
  }
  backward(outputs, grads);

  H5File out(o.out, H5File::Mode::create);
  out.write("o", out_o.value().to(DType::f64));
  if (out_ht.defined()) out.write("ht", out_ht.value().to(DType::f64));
  if (out_zt.defined()) out.write("zt", out_zt.value().to(DType::f64));
  for (auto& [name, var] : inputs) {
    Tensor g = var.grad().defined() ? var.grad() : Tensor::zeros(var.shape(), o.dtype);
    out.write("d" + name, g.to(DType::f64));
  }
  out.set_attr("op", o.op);
  out.set_attr("dtype", std::string(dtype_name(o.dtype)));
  out.set_attr("form", std::string(mixer.form == ops::MixerForm::chunk ? "chunk" : "recurrent"));
  std::printf("linattn-ops %s: wrote %s (B=%ld T=%ld H=%ld dk=%ld, %s, %s)\n", o.op.c_str(), o.out.c_str(), long(B),
              long(T), long(H), long(dk), dtype_name(o.dtype),
              mixer.form == ops::MixerForm::chunk ? "chunk" : "recurrent");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "linattn-ops: error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--dtype") {
      std::string d = value();
      if (d != "f32" && d != "f64") {
        std::fprintf(stderr, "linattn-ops: error: --dtype must be f32 or f64, got '%s'\n", d.c_str());
        return 2;
      }
      o.dtype = d == "f32" ? DType::f32 : DType::f64;
    } else if (a == "--form") {
      std::string f = value();
      if (f != "chunk" && f != "recurrent") {
        std::fprintf(stderr, "linattn-ops: error: --form must be chunk or recurrent, got '%s'\n", f.c_str());
        return 2;
      }
      o.mixer.form = f == "chunk" ? ops::MixerForm::chunk : ops::MixerForm::recurrent;
    } else if (a == "--chunk-size") {
      // The bound of the config's model.chunk_size: a chunk's C x C blocks stay small.
      const std::string v = value();
      char* end = nullptr;
      errno = 0;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || n < 1 || n > 256) {
        std::fprintf(stderr, "linattn-ops: error: --chunk-size '%s' is not an integer in [1, 256]\n", v.c_str());
        return 2;
      }
      o.mixer.chunk_size = n;
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "linattn-ops: error: unknown option '%s' (see linattn-ops --help)\n", a.c_str());
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 3) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  o.op = positional[0];
  o.in = positional[1];
  o.out = positional[2];
  const std::vector<std::string> known{"linear_attn", "gla", "deltanet", "gated_deltanet", "attention"};
  if (std::find(known.begin(), known.end(), o.op) == known.end()) {
    std::fprintf(stderr, "linattn-ops: error: unknown op '%s' (linear_attn, gla, deltanet, gated_deltanet, attention)\n",
                 o.op.c_str());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-ops: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
