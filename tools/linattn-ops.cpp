// linattn-ops: runs one token mixer on inputs from an HDF5 file and writes its outputs and
// gradients to another, so the kernels can be checked against any other implementation.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "autograd/mixers.h"
#include "core/hdf5.h"
#include "core/memory.h"
#include "tools/cli.h"

namespace {

using namespace linattn;

#ifdef LINATTN_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

const char* kDescription = R"(Runs the token mixer OP forward and backward on the inputs in IN.h5 and writes the outputs and
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
           dq, dk, dv, dg, dbeta, da, dh0, dz0)";

struct Options {
  std::string op, in, out;
  DType dtype = DType::f64;
  bool dtype_given = false;
  Device device = Device::cpu;
  ops::MixerOptions mixer;
};

// How the inputs are read and where the op runs: the file's float64 values rounded to `read`, then
// computed in `dtype` on `device`.
struct Run {
  DType read, dtype;
  Device device;
};

// The CUDA results against the CPU's, relative to the largest entry of the CPU's array. Basis: the
// CUDA kernels compute in float32 (relative rounding 6e-8 per operation) over sums of up to a few
// thousand terms in another order than the CPU; a wrong index, sign or scale moves results by 1e-2
// or more.
constexpr double kCudaTolerance = 1e-4;

// The largest dataset read: 2^32 values (32 GiB in float64), far beyond what a conformance check needs;
// bounding it turns a corrupt or mistyped shape into an error naming the dataset instead of bad_alloc.
constexpr int64_t kMaxValues = int64_t(1) << 32;

// Reads a dataset (float64 in the file) as how.read, then to how.dtype on how.device, checking its
// shape when one is given.
Tensor read_input(const H5File& f, const std::string& name, const Run& how, const Shape* expected,
                  const std::string& needs) {
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
  Tensor t = f.read(name, how.read);
  if (how.dtype != how.read) t = t.to(how.dtype);
  return how.device == Device::cpu ? t : t.to(how.device);
}

Variable input(const H5File& f, const std::string& name, const Run& how, const Shape* expected,
               const std::string& needs) {
  return Variable(read_input(f, name, how, expected, needs), true);
}

Variable optional_input(const H5File& f, const std::string& name, const Run& how, const Shape& expected) {
  if (!f.has(name)) return {};
  return input(f, name, how, &expected, "");
}

// What one run of the op gives: its outputs (o, ht, zt) and the gradient of every input given
// (dq, dk, ...), on the host in float64, in the order OUT.h5 holds them.
struct Results {
  std::vector<std::pair<std::string, Tensor>> arrays;
  int64_t B, T, H, dk;
};

Results compute(const Options& o, const Run& how) {
  H5File in(o.in, H5File::Mode::read);
  const std::string needs = o.op == "gla"              ? "gla needs q, k, v, g"
                            : o.op == "deltanet"       ? "deltanet needs q, k, v, beta"
                            : o.op == "gated_deltanet" ? "gated_deltanet needs q, k, v, beta, a"
                                                       : o.op + " needs q, k, v";
  Variable q = input(in, "q", how, nullptr, needs);
  LINATTN_REQUIRE(q.shape().ndim() == 4, o.in, ": dataset 'q' has shape ", q.shape().str(), ", expected [B, T, H, dk]");
  const int64_t B = q.shape()[0], T = q.shape()[1], H = q.shape()[2], dk = q.shape()[3];
  ops::MixerOptions mixer = o.mixer;
  if (auto s = in.attr_double("scale")) mixer.scale = *s;

  std::map<std::string, Variable> inputs{{"q", q}};
  Variable out_o, out_ht, out_zt;
  if (o.op == "attention") {
    Variable k = input(in, "k", how, nullptr, needs), v = input(in, "v", how, nullptr, needs);
    const int64_t window = in.attr_int("window_size").value_or(0);
    LINATTN_REQUIRE(window >= 0, o.in, ": attribute window_size is ", window, ", expected 0 (global) or a positive "
                    "window length");
    out_o = ops::attention(q, k, v, window, mixer.scale);
    inputs["k"] = k;
    inputs["v"] = v;
  } else {
    Shape qk{B, T, H, dk};
    Variable k = input(in, "k", how, &qk, needs);
    Variable v = input(in, "v", how, nullptr, needs);
    LINATTN_REQUIRE(v.shape().ndim() == 4 && v.shape()[0] == B && v.shape()[1] == T && v.shape()[2] == H, o.in,
                    ": dataset 'v' has shape ", v.shape().str(), ", expected [", B, ", ", T, ", ", H, ", dv]");
    const int64_t dv = v.shape()[3];
    Variable h0 = optional_input(in, "h0", how, {B, H, dk, dv});
    inputs["k"] = k;
    inputs["v"] = v;
    if (h0.defined()) inputs["h0"] = h0;
    ops::MixerOutput r;
    if (o.op == "linear_attn") {
      std::string fm = in.attr_string("feature_map").value_or("identity");
      LINATTN_REQUIRE(fm == "identity" || fm == "elu1" || fm == "relu", o.in, ": attribute feature_map is '", fm,
                    "', expected identity, elu1 or relu");
      FeatureMap phi = fm == "elu1" ? FeatureMap::elu1 : fm == "relu" ? FeatureMap::relu : FeatureMap::identity;
      const bool normalize = in.attr_int("normalize").value_or(0) != 0;
      Variable z0 = optional_input(in, "z0", how, {B, H, dk});
      LINATTN_CHECK(!z0.defined() || normalize, o.in, ": dataset 'z0' is the normalizer state of the normalized form; "
                    "set the attribute normalize = 1 or drop z0");
      if (z0.defined()) inputs["z0"] = z0;
      r = ops::linear_attention(q, k, v, h0, phi, normalize, mixer, z0);
    } else if (o.op == "gla") {
      Variable g = input(in, "g", how, &qk, needs);
      inputs["g"] = g;
      r = ops::gla(q, k, v, g, h0, mixer);
    } else {
      Shape bth{B, T, H};
      Variable beta = input(in, "beta", how, &bth, needs);
      inputs["beta"] = beta;
      if (o.op == "deltanet") {
        r = ops::deltanet(q, k, v, beta, h0, mixer);
      } else {
        Variable a = input(in, "a", how, &bth, needs);
        inputs["a"] = a;
        r = ops::gated_deltanet(q, k, v, beta, a, h0, mixer);
      }
    }
    out_o = r.o;
    out_ht = r.ht;
    out_zt = r.zt;
  }

  std::vector<Variable> outputs{out_o};
  std::vector<Tensor> grads{in.has("do") ? read_input(in, "do", how, &out_o.shape(), "")
                                         : Tensor::zeros(out_o.shape(), how.dtype, how.device)};
  if (out_ht.defined()) {
    outputs.push_back(out_ht);
    grads.push_back(in.has("dht") ? read_input(in, "dht", how, &out_ht.shape(), "")
                                  : Tensor::zeros(out_ht.shape(), how.dtype, how.device));
  }
  if (out_zt.defined()) {
    outputs.push_back(out_zt);
    grads.push_back(in.has("dzt") ? read_input(in, "dzt", how, &out_zt.shape(), "")
                                  : Tensor::zeros(out_zt.shape(), how.dtype, how.device));
  }
  backward(outputs, grads);

  auto host = [](const Tensor& t) { return (t.device() == Device::cpu ? t : t.to(Device::cpu)).to(DType::f64); };
  Results r{{}, B, T, H, dk};
  r.arrays.emplace_back("o", host(out_o.value()));
  if (out_ht.defined()) r.arrays.emplace_back("ht", host(out_ht.value()));
  if (out_zt.defined()) r.arrays.emplace_back("zt", host(out_zt.value()));
  for (auto& [name, var] : inputs)
    r.arrays.emplace_back("d" + name, var.grad().defined() ? host(var.grad()) : Tensor::zeros(var.shape(), DType::f64));
  return r;
}

// The CUDA results against the CPU's, one line per array; true when all are within the tolerance.
bool compare(const Options& o, const Results& cuda, const Results& cpu) {
  int bad = 0;
  for (size_t i = 0; i < cuda.arrays.size(); ++i) {
    const auto& [name, got] = cuda.arrays[i];
    const Tensor& want = cpu.arrays[i].second;
    double max_abs = 0, scale = 0;
    for (int64_t j = 0; j < got.numel(); ++j) {
      const double a = got.data<double>()[j], b = want.data<double>()[j];
      max_abs = std::isnan(a - b) ? INFINITY : std::max(max_abs, std::abs(a - b));
      scale = std::max(scale, std::abs(b));
    }
    const double relative = max_abs / std::max(scale, 1e-300);
    const bool ok = relative <= kCudaTolerance;
    bad += !ok;
    std::printf("  %-5s max abs error %.3g, relative %.3g: %s\n", name.c_str(), max_abs, relative,
                ok ? "ok" : "BEYOND THE TOLERANCE");
  }
  std::printf("linattn-ops %s --device cuda: %s (tolerance %g of each array's largest entry)\n", o.op.c_str(),
              bad ? (std::to_string(bad) + " of " + std::to_string(cuda.arrays.size()) +
                     " arrays differ from the CPU kernels").c_str()
                  : "every array matches the CPU kernels",
              kCudaTolerance);
  return bad == 0;
}

int run(const Options& o) {
  const char* form = o.mixer.form == ops::MixerForm::chunk ? "chunk" : "recurrent";
  int status = 0;
  Results r;
  if (o.device == Device::cuda) {
    if (!cuda_available())
      throw Error(std::string("--device cuda: no CUDA device here (this build ") +
                  (kBuiltWithCuda ? "has the CUDA backend" : "has no CUDA backend: configure with -DLINATTN_CUDA=ON") +
                  "); run it on a machine with an NVIDIA GPU, or leave out --device cuda to run the CPU kernels");
    if (std::string missing = ops::missing_kernels(o.op, Device::cuda); !missing.empty()) {
      std::printf("linattn-ops %s --device cuda: skipped: no CUDA kernel yet (backend entries %s); nothing written\n",
                  o.op.c_str(), missing.c_str());
      return 0;
    }
    r = compute(o, {DType::f32, DType::f32, Device::cuda});
    status = compare(o, r, compute(o, {DType::f32, DType::f64, Device::cpu})) ? 0 : 1;
  } else {
    r = compute(o, {o.dtype, o.dtype, Device::cpu});
  }
  const DType dtype = o.device == Device::cuda ? DType::f32 : o.dtype;
  H5File out(o.out, H5File::Mode::create);
  for (const auto& [name, t] : r.arrays) out.write(name, t);
  out.set_attr("op", o.op);
  out.set_attr("dtype", std::string(dtype_name(dtype)));
  out.set_attr("form", std::string(form));
  out.set_attr("device", std::string(device_name(o.device)));
  std::printf("linattn-ops %s: wrote %s (B=%ld T=%ld H=%ld dk=%ld, %s, %s, %s)\n", o.op.c_str(), o.out.c_str(),
              long(r.B), long(r.T), long(r.H), long(r.dk), dtype_name(dtype), form, device_name(o.device));
  return status;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string dtype, device = "cpu", form = "chunk";
  CLI::App app(kDescription, "linattn-ops");
  app.add_option("OP", o.op, "the token mixer")
      ->check(cli::one_of({"linear_attn", "gla", "deltanet", "gated_deltanet", "attention"}));
  app.add_option("IN.h5", o.in, "the inputs");
  app.add_option("OUT.h5", o.out, "where the outputs and gradients go");
  app.add_option("--dtype", dtype, "compute in float32 or float64 (default f64)")
      ->type_name("f32|f64")
      ->check(cli::one_of({"f32", "f64"}));
  app.add_option("--form", form, "the chunkwise training kernels or the step-by-step recurrence (default chunk)")
      ->type_name("chunk|recurrent")
      ->check(cli::one_of({"chunk", "recurrent"}));
  // The bound of the config's model.chunk_size: a chunk's C x C blocks stay small.
  app.add_option("--chunk-size", o.mixer.chunk_size, "chunk length of the chunk form, 1 to 256 (default 64)")
      ->type_name("N")
      ->check(cli::whole_number(1, 256));
  app.add_option("--device", device,
                 "where the kernels run (default cpu). cuda: the CUDA kernels, float32, checked against the CPU "
                 "kernels in float64 on the same float32 inputs: one line per array (max abs and relative error, "
                 "tolerance 1e-4 of its largest entry), exit status 1 when one is beyond; OUT.h5 holds the CUDA "
                 "results. An OP without a CUDA kernel yet is reported as skipped (exit status 0, nothing "
                 "written); without a GPU it is an error.")
      ->type_name("cpu|cuda")
      ->check(cli::one_of({"cpu", "cuda"}));
  cli::parse(app, argc, argv, 2);
  if (o.out.empty()) cli::usage_error("linattn-ops", "give OP IN.h5 OUT.h5", 2);
  o.dtype_given = !dtype.empty();
  o.dtype = dtype == "f32" ? DType::f32 : DType::f64;
  o.device = device == "cuda" ? Device::cuda : Device::cpu;
  o.mixer.form = form == "chunk" ? ops::MixerForm::chunk : ops::MixerForm::recurrent;
  if (o.device == Device::cuda && o.dtype_given && o.dtype != DType::f32)
    cli::usage_error("linattn-ops", "--device cuda computes in float32 (the CUDA kernels' type): use --dtype f32 or "
                     "leave --dtype out", 2);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linattn-ops: error: %s\n", error_message(e).c_str());
    return 1;
  }
}
