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

#include "autograd/mixer_ops.h"
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

// What --help says before the options: the files, then every op of the table (autograd/mixer_ops.h)
// with its inputs and attributes.
std::string description() {
  std::string d =
      "Runs the token mixer OP forward and backward on the inputs in IN.h5 and writes the outputs and\n"
      "gradients to OUT.h5 (as float64), for checking linattn against another implementation.\n\n"
      "IN.h5:  float64 datasets, one per input of OP below ([B, T, H, D] layout; ? = optional), and optionally\n"
      "        the upstream gradients do (of o), dht (of the final state ht), dzt (of zt; default zeros);\n"
      "        optional attributes: scale (float, default dk^-1/2) and OP's own below\n"
      "OUT.h5: o, ht and zt where OP has them, and the gradient of every input given, d + its name\n\nOP:";
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) {
    d += "\n  " + op->name + ": " + op->summary;
    for (const ops::OpInput& in : op->inputs) {
      std::string shape;
      for (const std::string& s : in.shape) shape += (shape.empty() ? "" : ", ") + s;
      d += "\n    " + in.name + (in.required ? "" : "?") + " [" + shape + "]: " + in.doc;
    }
    for (const ops::OpAttribute& a : op->attributes) {
      std::string values;
      for (const std::string& c : a.choices) values += (values.empty() ? "" : "|") + c;
      d += "\n    attribute " + a.name + " (" + (values.empty() ? "int" : values) + "): " + a.doc;
    }
  }
  return d;
}

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

// The file's datasets bound to the op's size symbols (B, T, H, dk, ...), in the order first seen.
struct Sizes {
  std::vector<std::pair<std::string, int64_t>> bound;
  const int64_t* find(const std::string& symbol) const {
    for (const auto& [name, size] : bound)
      if (name == symbol) return &size;
    return nullptr;
  }
  // "[2, 37, 2, dk]": the bound sizes, the symbols of the others.
  std::string expected(const std::vector<std::string>& symbols) const {
    std::string s;
    for (const std::string& symbol : symbols) {
      const int64_t* size = find(symbol);
      s += (s.empty() ? "" : ", ") + (size ? std::to_string(*size) : symbol);
    }
    return "[" + s + "]";
  }
};

// Checks that dataset `name` has a shape the values of which fit in memory and, when symbols are
// given, that it matches them (binding those not yet bound).
void check_shape(const H5File& f, const std::string& name, const std::vector<std::string>* symbols, Sizes& sizes) {
  const Shape s = f.shape(name);
  int64_t values = 1;
  for (int d = 0; d < s.ndim(); ++d) {
    LINATTN_REQUIRE(s[d] >= 1 && s[d] <= kMaxValues / values, f.path(), ": dataset '", name, "' has shape ", s.str(),
                    ": every size must be at least 1 and all of them together at most ", kMaxValues, " values");
    values *= s[d];
  }
  if (!symbols) return;
  bool fits = size_t(s.ndim()) == symbols->size();
  for (int d = 0; fits && d < s.ndim(); ++d)
    if (const int64_t* size = sizes.find((*symbols)[size_t(d)])) fits = *size == s[d];
  LINATTN_REQUIRE(fits, f.path(), ": dataset '", name, "' has shape ", s.str(), ", expected ",
                  sizes.expected(*symbols));
  for (int d = 0; d < s.ndim(); ++d)
    if (!sizes.find((*symbols)[size_t(d)])) sizes.bound.emplace_back((*symbols)[size_t(d)], s[d]);
}

// Reads a dataset (float64 in the file) as how.read, then to how.dtype on how.device.
Tensor read_input(const H5File& f, const std::string& name, const Run& how) {
  Tensor t = f.read(name, how.read);
  if (how.dtype != how.read) t = t.to(how.dtype);
  return how.device == Device::cpu ? t : t.to(how.device);
}

// The op's attributes from the file's attributes (call keeps the defaults where absent), checked.
void read_attributes(const H5File& f, const ops::MixerOpDescriptor& op, ops::OpCall& call) {
  for (const ops::OpAttribute& a : op.attributes) {
    if (a.choices.empty()) {
      const int64_t value = f.attr_int(a.name).value_or(call.number.at(a.name));
      LINATTN_REQUIRE(value >= 0, f.path(), ": attribute ", a.name, " is ", value, ", expected a whole number >= 0 (",
                      a.doc, ")");
      call.number[a.name] = value;
      continue;
    }
    const std::string value = f.attr_string(a.name).value_or(call.text.at(a.name));
    std::string expected;
    for (size_t i = 0; i < a.choices.size(); ++i)
      expected += (i == 0 ? "" : i + 1 == a.choices.size() ? " or " : ", ") + a.choices[i];
    LINATTN_REQUIRE(std::find(a.choices.begin(), a.choices.end(), value) != a.choices.end(), f.path(),
                    ": attribute ", a.name, " is '", value, "', expected ", expected);
    call.text[a.name] = value;
  }
}

// What one run of the op gives: its outputs (o, ht, zt) and the gradient of every input given
// (dq, dk, ...), on the host in float64, in the order OUT.h5 holds them.
struct Results {
  std::vector<std::pair<std::string, Tensor>> arrays;
  Sizes sizes;
};

Results compute(const Options& o, const Run& how) {
  const ops::MixerOpDescriptor& op = ops::mixer_op_named(o.op);
  H5File in(o.in, H5File::Mode::read);
  Results r;
  ops::OpCall call = ops::default_call(op);
  for (const ops::OpInput& input : op.inputs) {
    if (!input.required && !in.has(input.name)) continue;
    LINATTN_REQUIRE(in.has(input.name), in.path(), ": missing dataset '", input.name, "' (", op.needs(), ")");
    check_shape(in, input.name, &input.shape, r.sizes);
    call.in[input.name] = Variable(read_input(in, input.name, how), true);
  }
  read_attributes(in, op, call);
  call.options = o.mixer;
  if (auto s = in.attr_double("scale")) call.options.scale = *s;
  const std::map<std::string, Variable> out = op.run(call);

  // The outputs in the order o, ht, zt, each with its upstream gradient d + its name (zeros when absent).
  std::vector<std::pair<std::string, Variable>> outputs;
  for (const char* name : {"o", "ht", "zt"})
    if (auto it = out.find(name); it != out.end()) outputs.emplace_back(name, it->second);
  std::vector<Variable> values;
  std::vector<Tensor> grads;
  for (const auto& [name, v] : outputs) {
    const std::string upstream = "d" + name;
    values.push_back(v);
    if (in.has(upstream)) {
      check_shape(in, upstream, nullptr, r.sizes);
      LINATTN_REQUIRE(in.shape(upstream) == v.shape(), in.path(), ": dataset '", upstream, "' has shape ",
                      in.shape(upstream).str(), ", expected ", v.shape().str());
      grads.push_back(read_input(in, upstream, how));
    } else {
      grads.push_back(Tensor::zeros(v.shape(), how.dtype, how.device));
    }
  }
  backward(values, grads);

  auto host = [](const Tensor& t) { return (t.device() == Device::cpu ? t : t.to(Device::cpu)).to(DType::f64); };
  for (const auto& [name, v] : outputs) r.arrays.emplace_back(name, host(v.value()));
  for (const auto& [name, var] : call.in)
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
    if (std::string missing = ops::mixer_op_named(o.op).missing_kernels(Device::cuda); !missing.empty()) {
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
  std::string sizes;
  for (const auto& [symbol, size] : r.sizes.bound) sizes += (sizes.empty() ? "" : " ") + symbol + "=" + std::to_string(size);
  std::printf("linattn-ops %s: wrote %s (%s, %s, %s, %s)\n", o.op.c_str(), o.out.c_str(), sizes.c_str(),
              dtype_name(dtype), form, device_name(o.device));
  return status;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string dtype, device = "cpu", form = "chunk";
  CLI::App app(description(), "linattn-ops");
  std::vector<std::string> names;
  for (const ops::MixerOpDescriptor* op : ops::all_mixer_ops()) names.push_back(op->name);
  app.add_option("OP", o.op, "the token mixer")->check(cli::one_of(names));
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
