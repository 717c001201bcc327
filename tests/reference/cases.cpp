#include "cases.h"

#include <cmath>
#include <cstring>

#include "core/hdf5.h"
#include "core/rng.h"

namespace linattn::reference {

const std::vector<Spec>& case_specs() {
  static const std::vector<Spec> specs = [] {
    std::vector<Spec> s;
    auto add = [&](Spec spec) { s.push_back(spec); };
    add({.name = "linear_attn_identity_h0", .op = "linear_attn", .h0 = true});
    add({.name = "linear_attn_elu1", .op = "linear_attn", .feature_map = "elu1"});
    add({.name = "linear_attn_relu_h0", .op = "linear_attn", .h0 = true, .feature_map = "relu"});
    add({.name = "linear_attn_normalized_elu1", .op = "linear_attn", .feature_map = "elu1", .normalize = true});
    add({.name = "linear_attn_normalized_relu_h0", .op = "linear_attn", .h0 = true, .feature_map = "relu",
         .normalize = true});
    add({.name = "gla_h0", .op = "gla", .B = 2, .h0 = true});
    add({.name = "gla_scale", .op = "gla", .scale = 0.7});
    add({.name = "retnet_h0", .op = "gla", .H = 3, .h0 = true, .retnet = true});
    add({.name = "deltanet_h0", .op = "deltanet", .h0 = true});
    add({.name = "deltanet", .op = "deltanet", .T = 9});
    add({.name = "gated_deltanet_h0", .op = "gated_deltanet", .B = 2, .h0 = true});
    add({.name = "gated_deltanet", .op = "gated_deltanet", .T = 13, .chunk_size = 8});
    add({.name = "mamba2_h0", .op = "mamba2", .B = 2, .H = 4, .G = 2, .h0 = true});
    add({.name = "mamba2", .op = "mamba2", .T = 13, .G = 1, .chunk_size = 8});
    add({.name = "mamba2_heads_h0", .op = "mamba2", .H = 3, .h0 = true});
    add({.name = "attention", .op = "attention"});
    add({.name = "attention_gqa", .op = "attention", .H = 4, .Hkv = 2});
    add({.name = "attention_window", .op = "attention", .window = 4});
    add({.name = "attention_window_gqa", .op = "attention", .T = 13, .H = 4, .Hkv = 1, .window = 3});
    return s;
  }();
  return specs;
}

Problem random_problem(const Spec& s, uint64_t seed) {
  Rng rng(seed);
  auto uniform = [&](const Shape& shape, double lo, double hi) {
    Array x{shape, std::vector<double>(shape.numel())};
    for (double& e : x.data) e = rng.uniform(lo, hi);
    return x;
  };
  auto unit_rows = [](Array x) {  // L2-normalize along the last dim
    const int64_t D = x.shape.last();
    for (int64_t r = 0; r < x.shape.rows(); ++r) {
      double n = 0;
      for (int64_t c = 0; c < D; ++c) n += x.data[r * D + c] * x.data[r * D + c];
      for (int64_t c = 0; c < D; ++c) x.data[r * D + c] /= std::sqrt(n);
    }
    return x;
  };
  if (s.op == "mamba2") {
    const int64_t G = s.G ? s.G : s.H;
    Problem p;
    p.op = s.op;
    p.in["x"] = uniform({s.B, s.T, s.H, s.dv}, -1, 1);
    p.in["dt"] = uniform({s.B, s.T, s.H}, 0.05, 1);
    p.in["A"] = uniform({s.H}, -2, -0.2);
    p.in["B"] = uniform({s.B, s.T, G, s.dk}, -1, 1);
    p.in["C"] = uniform({s.B, s.T, G, s.dk}, -1, 1);
    p.in["do"] = uniform({s.B, s.T, s.H, s.dv}, -1, 1);
    p.in["dht"] = uniform({s.B, s.H, s.dk, s.dv}, -1, 1);
    if (s.h0) p.in["h0"] = uniform({s.B, s.H, s.dk, s.dv}, -1, 1);
    return p;
  }
  const bool delta = s.op == "deltanet" || s.op == "gated_deltanet";
  const int64_t Hkv = s.Hkv ? s.Hkv : s.H;
  Problem p;
  p.op = s.op;
  p.scale = s.scale;
  p.feature_map = s.feature_map;
  p.normalize = s.normalize;
  p.window = s.window;
  p.in["q"] = uniform({s.B, s.T, s.H, s.dk}, -1, 1);
  p.in["k"] = uniform({s.B, s.T, Hkv, s.dk}, -1, 1);
  p.in["v"] = uniform({s.B, s.T, Hkv, s.dv}, -1, 1);
  p.in["do"] = uniform({s.B, s.T, s.H, s.dv}, -1, 1);
  if (delta) {
    p.in["q"] = unit_rows(p.in["q"]);
    p.in["k"] = unit_rows(p.in["k"]);
  }
  if (s.op != "attention") p.in["dht"] = uniform({s.B, s.H, s.dk, s.dv}, -1, 1);
  if (s.h0) p.in["h0"] = uniform({s.B, s.H, s.dk, s.dv}, -1, 1);
  if (s.normalize) p.in["dzt"] = uniform({s.B, s.H, s.dk}, -1, 1);
  if (s.normalize && s.h0) p.in["z0"] = uniform({s.B, s.H, s.dk}, 0.5, 1.5);  // a sum of nonnegative features
  if (s.op == "gla") {
    p.in["g"] = uniform({s.B, s.T, s.H, s.dk}, -2, 0);
    if (s.retnet)
      for (int64_t r = 0; r < s.B * s.T * s.H; ++r)
        for (int64_t i = 0; i < s.dk; ++i)
          p.in["g"].data[r * s.dk + i] = std::log(1 - std::pow(2.0, -5.0 - double(r % s.H)));
  }
  if (delta) p.in["beta"] = uniform({s.B, s.T, s.H}, 0.05, 0.95);
  if (s.op == "gated_deltanet") p.in["a"] = uniform({s.B, s.T, s.H}, -1, 0);
  return p;
}

std::string cases_dir() { return "tests/reference/cases"; }

Tensor to_tensor(const Array& x) {
  Tensor t = Tensor::empty(x.shape, DType::f64);
  std::memcpy(t.data<double>(), x.data.data(), x.data.size() * sizeof(double));
  return t;
}

namespace {

Array to_array(const Tensor& t) {
  const double* p = t.data<double>();
  return {t.shape(), std::vector<double>(p, p + t.numel())};
}

}  // namespace

void write_case(const std::string& path, const Spec& s, const Problem& p, const Arrays* want) {
  H5File f(path, H5File::Mode::create);
  for (const auto& [name, x] : p.in) f.write(name, to_tensor(x));
  if (want)
    for (const auto& [name, x] : *want) f.write("want_" + name, to_tensor(x));
  f.set_attr("op", p.op);
  if (p.scale != 0) f.set_attr("scale", p.scale);
  if (p.op == "linear_attn") {
    f.set_attr("feature_map", p.feature_map);
    f.set_attr("normalize", int64_t(p.normalize));
  }
  if (p.op == "attention") f.set_attr("window_size", p.window);
  f.set_attr("chunk_size", s.chunk_size);
}

Case read_case(const std::string& path) {
  H5File f(path, H5File::Mode::read);
  Case c;
  c.name = path.substr(path.find_last_of('/') + 1);
  c.problem.op = f.attr_string("op").value_or("");
  c.problem.scale = f.attr_double("scale").value_or(0);
  c.problem.feature_map = f.attr_string("feature_map").value_or("identity");
  c.problem.normalize = f.attr_int("normalize").value_or(0) != 0;
  c.problem.window = f.attr_int("window_size").value_or(0);
  c.chunk_size = f.attr_int("chunk_size").value_or(64);
  for (const std::string& name : f.dataset_names()) {
    Array x = to_array(f.read(name, DType::f64));
    if (name.rfind("want_", 0) == 0)
      c.want[name.substr(5)] = std::move(x);
    else
      c.problem.in[name] = std::move(x);
  }
  return c;
}

Arrays read_arrays(const std::string& path) {
  H5File f(path, H5File::Mode::read);
  Arrays a;
  for (const std::string& name : f.dataset_names()) a[name] = to_array(f.read(name, DType::f64));
  return a;
}

}  // namespace linattn::reference
