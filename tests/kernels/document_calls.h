// Documents in one call (kernels/op_types.h's Sequences): attention, the short convolution, RoPE and
// the linear mixers called once over a batch with its document offsets give the bits of the calls
// that autograd made before, one per segment part (autograd/segments.h) on views of the same buffers. Shared by the CPU
// column's test (tests/kernels/documents_test.cpp) and the CUDA column's (tests/cuda/documents_test.cpp).
//
// Each case runs both ways from the same random inputs and the same random starting values of the
// accumulated gradients, and compares every output and gradient byte for byte. The one exception is
// CUDA's convolution weight and bias gradients, sums over the whole batch whose order of additions a
// split into calls changes (kernels/cuda/conv.h): they are compared to a tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/op_support.h"
#include "autograd/segments.h"
#include "kernels/backend.h"
#include "testing.h"

namespace linattn::testing::documents {

// The batch layouts: documents never cross a row (every row start is an offset). B = 2, T = 100.
// padding: the one call's table ends in that many empty sequences (ops::Segments::stage, as the
// trainer's CUDA graphs stage every batch's), which must change no bit.
struct Layout {
  const char* name;
  std::vector<int64_t> offsets;  // empty: the rows
  int64_t padding = 0;
};
inline std::vector<Layout> layouts() {
  std::vector<int64_t> many_short;  // row 0 every 7 positions, row 1 every 3
  for (int64_t t = 0; t < 100; t += 7) many_short.push_back(t);
  for (int64_t t = 100; t < 200; t += 3) many_short.push_back(t);
  many_short.push_back(200);
  return {{"the rows", {}},
          {"one document filling each row", {0, 100, 200}},
          {"one-token documents at the starts and ends of rows", {0, 1, 2, 67, 99, 100, 101, 200}},
          {"many short documents", many_short},
          {"a row of documents beside a whole row", {0, 30, 95, 100, 200}},
          {"many short documents, the table padded with 5 empty ones", many_short, 5},
          {"one document filling each row, the table padded with 1 empty one", {0, 100, 200}, 1}};
}
inline constexpr int64_t kB = 2, kT = 100;

// One way of running a case: `one_call` with the offsets, else once per segment part.
using Body = std::function<void(bool one_call, const ops::Segments& segments, std::map<std::string, Tensor>& out)>;

// A random tensor on `device` of `dtype`, the same values for the same seed.
inline Tensor random_on(const Shape& s, uint64_t seed, DType dtype, Device device) {
  Rng rng(seed);
  Tensor t = random_tensor(s, rng, -1.0, 1.0, dtype);
  return device == Device::cpu ? t : t.to(device);
}

inline Tensor on_host(const Tensor& t) { return t.device() == Device::cpu ? t : t.to(Device::cpu); }

// Runs `body` both ways for every layout and returns what differs, a line per output and layout ("" when
// everything matches); outputs named in `summed` may differ by `tol` relative to their largest entry
// (the others must match byte for byte). The tests assert on it: EXPECT_EQ(one_call_mismatches(...), "").
inline std::string one_call_mismatches(const Body& body, const std::vector<std::string>& summed = {},
                                       double tol = 0) {
  std::string mismatches;
  for (const Layout& layout : layouts()) {
    ops::Segments segments{layout.offsets};
    std::map<std::string, Tensor> parts, one;
    body(false, segments, parts);
    if (layout.padding)
      segments.stage(Tensor::empty({int64_t(layout.offsets.size()) + layout.padding}, DType::i32, Device::cpu));
    body(true, segments, one);
    for (const auto& entry : one)
      if (!parts.count(entry.first)) mismatches += std::string(layout.name) + ": " + entry.first + ": only in the one call\n";
    for (const auto& [name, want] : parts) {
      const std::string where = std::string(layout.name) + ": " + name;
      if (!one.count(name)) {
        mismatches += where + ": missing from the one call\n";
        continue;
      }
      const Tensor got_host = on_host(one.at(name)), want_host = on_host(want);
      bool is_summed = false;
      for (const std::string& s : summed) is_summed |= s == name;
      const Error e = compare(got_host, want_host);
      if (is_summed ? !(e.relative <= tol)
                    : got_host.nbytes() != want_host.nbytes() ||
                          std::memcmp(got_host.raw(), want_host.raw(), want_host.nbytes()) != 0)
        mismatches += where + " of the one call differs from the per-part calls': " + e.str() +
                      (is_summed ? ", tolerance " + std::to_string(tol) : std::string(", bits differ")) + "\n";
    }
  }
  return mismatches;
}

using ops::detail::positions;

// Attention forward and backward: q [B, T, H, d], k, v [B, T, Hkv, d].
inline Body attention_body(Device device, DType dtype, int64_t H, int64_t Hkv, int64_t d, int64_t window) {
  return [=](bool one_call, const ops::Segments& segments, std::map<std::string, Tensor>& out) {
    const Shape qs{kB, kT, H, d}, ks{kB, kT, Hkv, d};
    const double scale = 1 / std::sqrt(double(d));
    Tensor q = random_on(qs, 1, dtype, device), k = random_on(ks, 2, dtype, device), v = random_on(ks, 3, dtype, device);
    Tensor o = Tensor::zeros(qs, dtype, device), lse = Tensor::zeros({kB, H, kT}, dtype, device);
    Tensor dq = random_on(qs, 4, dtype, device), dk = random_on(ks, 5, dtype, device), dv = random_on(ks, 6, dtype, device);
    Tensor dO = random_on(qs, 7, dtype, device);
    if (one_call) {
      Tensor table;
      const Sequences seqs = segments.sequences(device, table);
      backend::attention_forward(device, o, lse, q, k, v, window, scale, seqs);
      backend::attention_backward(device, dq, dk, dv, q, k, v, o, lse, dO, window, scale, seqs, false);
    } else {
      const auto parts = ops::segment_parts(segments, kB, kT);
      // a part's log-sum-exps [rows, H, len] from element start * H, as autograd kept them
      auto lse_of = [&](const ops::SegmentPart& p) { return lse.view_at(p.start * H, {p.rows, H, p.len}); };
      for (const auto& p : parts)
        backend::attention_forward(device, positions(o, p), lse_of(p), positions(q, p), positions(k, p),
                                   positions(v, p), window, scale, Sequences{});
      for (const auto& p : parts)
        backend::attention_backward(device, positions(dq, p), positions(dk, p), positions(dv, p), positions(q, p),
                                    positions(k, p), positions(v, p), positions(o, p), lse_of(p), positions(dO, p),
                                    window, scale, Sequences{}, false);
    }
    out = {{"o", o}, {"lse", lse}, {"dq", dq}, {"dk", dk}, {"dv", dv}};
  };
}

// The short convolution: x [B, T, C], w [C, W], bias [C].
inline Body conv_body(Device device, DType dtype, int64_t C, int64_t W) {
  return [=](bool one_call, const ops::Segments& segments, std::map<std::string, Tensor>& out) {
    const Shape s{kB, kT, C};
    Tensor x = random_on(s, 11, dtype, device), w = random_on({C, W}, 12, dtype, device);
    Tensor bias = random_on({C}, 13, dtype, device), y = Tensor::zeros(s, dtype, device);
    Tensor dx = random_on(s, 14, dtype, device), dw = random_on({C, W}, 15, dtype, device);
    Tensor dbias = random_on({C}, 16, dtype, device), dy = random_on(s, 17, dtype, device);
    if (one_call) {
      Tensor table;
      const Sequences seqs = segments.sequences(device, table);
      backend::short_conv_forward(device, y, x, w, bias, seqs);
      backend::short_conv_backward(device, dx, dw, dbias, x, w, dy, seqs);
    } else {
      const auto parts = ops::segment_parts(segments, kB, kT);
      for (const auto& p : parts)
        backend::short_conv_forward(device, positions(y, p), positions(x, p), w, bias, Sequences{});
      for (const auto& p : parts)
        backend::short_conv_backward(device, positions(dx, p), dw, dbias, positions(x, p), w, positions(dy, p),
                                     Sequences{});
    }
    out = {{"y", y}, {"dx", dx}, {"dw", dw}, {"dbias", dbias}};
  };
}

// RoPE: x [B, T, H, d], a decoding offset that only the documents starting a row take.
inline Body rope_body(Device device, DType dtype, int64_t H, int64_t d, int64_t offset) {
  return [=](bool one_call, const ops::Segments& segments, std::map<std::string, Tensor>& out) {
    const Shape s{kB, kT, H, d};
    const double theta = 10000;
    Tensor x = random_on(s, 21, dtype, device), y = Tensor::zeros(s, dtype, device);
    Tensor dx = random_on(s, 22, dtype, device), dy = random_on(s, 23, dtype, device);
    if (one_call) {
      Tensor table;
      const Sequences seqs = segments.sequences(device, table);
      backend::rope_forward(device, y, x, offset, theta, seqs);
      backend::rope_backward(device, dx, dy, offset, theta, seqs);
    } else {
      for (const auto& p : ops::segment_parts(segments, kB, kT)) {
        backend::rope_forward(device, positions(y, p), positions(x, p), p.first ? offset : 0, theta, Sequences{});
        backend::rope_backward(device, positions(dx, p), positions(dy, p), p.first ? offset : 0, theta, Sequences{});
      }
    }
    out = {{"y", y}, {"dx", dx}};
  };
}

// ---- the linear mixers (kernels/backend.def's mixer entries) ----

enum class MixerKind { linear_attention, gla, retnet, deltanet, gated_deltanet, mamba2 };

struct MixerCase {
  const char* name;
  MixerKind kind;
  int64_t H, Dk, Dv;
  int64_t chunk;  // the chunk form's chunk size; 0: the recurrent form
  FeatureMap phi = FeatureMap::identity;  // linear attention only
  bool normalize = false;                 // linear attention only
  int64_t G = 0;                          // Mamba2: the groups sharing B and C (q, k)
};

// Every linear mixer of the registry (RetNet: GLA's kernels with a constant log-gate per head), both
// forms, linear attention's feature maps and its normalized form, Mamba2's groups; chunks of 16 and
// 64 over rows of 100 and documents of 1 to 100 tokens.
inline std::vector<MixerCase> mixer_cases() {
  using K = MixerKind;
  return {{"linear attention", K::linear_attention, 2, 16, 8, 16},
          {"linear attention, elu1, normalized", K::linear_attention, 2, 16, 8, 64, FeatureMap::elu1, true},
          {"linear attention, relu, recurrent", K::linear_attention, 1, 8, 16, 0, FeatureMap::relu},
          {"linear attention, elu1, normalized, recurrent", K::linear_attention, 1, 8, 8, 0, FeatureMap::elu1, true},
          {"GLA", K::gla, 2, 16, 8, 16},
          {"GLA, chunks of 64", K::gla, 1, 32, 16, 64},
          {"GLA, recurrent", K::gla, 2, 8, 8, 0},
          {"RetNet", K::retnet, 2, 16, 16, 16},
          {"DeltaNet", K::deltanet, 2, 16, 8, 16},
          {"DeltaNet, recurrent", K::deltanet, 1, 8, 8, 0},
          {"Gated DeltaNet", K::gated_deltanet, 2, 16, 16, 16},
          {"Gated DeltaNet, chunks of 64", K::gated_deltanet, 1, 32, 32, 64},
          {"Gated DeltaNet, recurrent", K::gated_deltanet, 2, 8, 8, 0},
          {"Mamba2", K::mamba2, 2, 8, 8, 16, FeatureMap::identity, false, 1},
          {"Mamba2, recurrent", K::mamba2, 2, 8, 8, 0, FeatureMap::identity, false, 2}};
}

// A random tensor with entries in [lo, hi].
inline Tensor random_in(const Shape& s, uint64_t seed, double lo, double hi, DType dtype, Device device) {
  Rng rng(seed);
  Tensor t = random_tensor(s, rng, lo, hi, dtype);
  return device == Device::cpu ? t : t.to(device);
}

// Random rows of unit length (the delta rule's keys, as the layers L2-normalize them).
inline Tensor random_unit_rows(const Shape& s, uint64_t seed, DType dtype, Device device) {
  Tensor t = random_in(s, seed, -1, 1, DType::f64, Device::cpu);
  double* p = t.data<double>();
  const int64_t d = s[-1];
  for (int64_t r = 0; r < t.numel() / d; ++r) {
    double n = 0;
    for (int64_t i = 0; i < d; ++i) n += p[r * d + i] * p[r * d + i];
    for (int64_t i = 0; i < d; ++i) p[r * d + i] /= std::sqrt(n);
  }
  t = t.to(dtype);
  return device == Device::cpu ? t : t.to(device);
}

// A mixer's forward and backward, with initial states and upstream gradients on the final states.
// Per part as autograd called them before: [rows, len] views of every [B, T, ...] tensor, the
// initial states of a part's rows where it begins them and the final ones where it ends them (none
// elsewhere), its own share of `saved`. wrong_initial_states: every part, not only the one that
// begins its row, takes the row's initial state (the negative control: the one call must differ).
inline Body mixer_body(Device device, DType dtype, const MixerCase& c, bool wrong_initial_states = false) {
  return [=](bool one_call, const ops::Segments& segments, std::map<std::string, Tensor>& out) {
    using K = MixerKind;
    const bool delta = c.kind == K::deltanet || c.kind == K::gated_deltanet, mamba = c.kind == K::mamba2;
    const bool gla = c.kind == K::gla || c.kind == K::retnet;
    const auto& forward = c.kind == K::linear_attention ? backend::linear_attention_forward
                          : gla                         ? backend::gla_forward
                          : delta                       ? backend::delta_rule_forward
                                                        : backend::mamba2_forward;
    const auto& backward = c.kind == K::linear_attention ? backend::linear_attention_backward
                           : gla                         ? backend::gla_backward
                           : delta                       ? backend::delta_rule_backward
                                                         : backend::mamba2_backward;
    const auto& saved_size = c.kind == K::linear_attention ? backend::linear_attention_saved_size
                             : gla                         ? backend::gla_saved_size
                             : delta                       ? backend::delta_rule_saved_size
                                                           : backend::mamba2_saved_size;
    const int64_t QH = mamba ? c.G : c.H;
    const Shape qk{kB, kT, QH, c.Dk}, vo{kB, kT, c.H, c.Dv}, st{kB, c.H, c.Dk, c.Dv}, z{kB, c.H, c.Dk},
        bth{kB, kT, c.H}, h{c.H};
    backend::MixerArgs a;
    a.B = kB, a.T = kT, a.H = c.H, a.Dk = c.Dk, a.Dv = c.Dv, a.G = mamba ? c.G : 0;
    a.scale = 1 / std::sqrt(double(c.Dk));
    a.chunk = c.chunk > 0, a.chunk_size = c.chunk > 0 ? c.chunk : 64;
    a.phi = c.phi, a.normalize = c.normalize;
    a.q = random_on(qk, 31, dtype, device);
    a.k = delta ? random_unit_rows(qk, 32, dtype, device) : random_on(qk, 32, dtype, device);
    a.v = random_on(vo, 33, dtype, device);
    if (c.kind == K::gla) a.gate = random_in(qk, 34, -3, 0, dtype, device);          // log-gates
    if (c.kind == K::retnet) a.gate = random_in(qk, 34, -0.05, -0.05, dtype, device);  // a constant decay
    if (delta) a.gate = random_in(bth, 34, 0.05, 0.95, dtype, device);                // beta
    if (c.kind == K::gated_deltanet) a.decay = random_in(bth, 35, -1, -0.01, dtype, device);
    if (mamba) {
      a.gate = random_on(bth, 34, dtype, device);  // the time step before its softplus
      a.rate = random_in(h, 35, -1, 0.5, dtype, device);  // A_log
      a.skip = random_in(h, 36, 0.5, 1.5, dtype, device);  // D
    }
    a.h0 = random_on(st, 37, dtype, device);
    if (c.normalize) a.z0 = random_in(z, 38, 0.5, 1.5, dtype, device);
    a.o = Tensor::zeros(vo, dtype, device), a.ht = Tensor::zeros(st, dtype, device);
    if (c.normalize) a.zt = Tensor::zeros(z, dtype, device);
    backend::MixerArgs b = a;  // the backward's: accumulated gradients from random values
    b.dq = random_on(qk, 41, dtype, device), b.dk = random_on(qk, 42, dtype, device);
    b.dv = random_on(vo, 43, dtype, device);
    if (a.gate.defined()) b.dgate = random_on(a.gate.shape(), 44, dtype, device);
    if (a.decay.defined()) b.ddecay = random_on(bth, 45, dtype, device);
    if (mamba) b.drate = random_on(h, 46, dtype, device), b.dskip = random_on(h, 47, dtype, device);
    b.dh0 = random_on(st, 48, dtype, device);
    if (c.normalize) b.dz0 = random_on(z, 49, dtype, device);
    b.dO = random_on(vo, 50, dtype, device), b.dht = random_on(st, 51, dtype, device);
    if (c.normalize) b.dzt = random_on(z, 52, dtype, device);
    Tensor table, saved;
    if (one_call) {
      a.seqs = b.seqs = segments.sequences(device, table);
      if (a.chunk) saved = Tensor::zeros({saved_size(device, a)}, dtype, device);
      a.saved = b.saved = saved;
      b.o = a.o, b.ht = a.ht, b.zt = a.zt;
      forward(device, a);
      backward(device, b);
    } else {
      const auto parts = ops::segment_parts(segments, kB, kT);
      auto state_rows = [](const Tensor& x, const ops::SegmentPart& p, bool take) {
        if (!take || !x.defined()) return Tensor();
        Shape s = x.shape();
        const int64_t per = x.numel() / s[0];
        s[0] = p.rows;
        return x.view_at(p.row * per, s);
      };
      auto part_args = [&](const backend::MixerArgs& x, const ops::SegmentPart& p) {
        backend::MixerArgs r = x;
        r.B = p.rows, r.T = p.len;
        for (Tensor* t : {&r.o, &r.q, &r.k, &r.v, &r.gate, &r.decay, &r.dq, &r.dk, &r.dv, &r.dgate, &r.ddecay, &r.dO})
          *t = positions(*t, p);
        for (Tensor* t : {&r.h0, &r.z0, &r.dh0, &r.dz0}) *t = state_rows(*t, p, p.first || wrong_initial_states);
        for (Tensor* t : {&r.ht, &r.zt, &r.dht, &r.dzt}) *t = state_rows(*t, p, p.last);
        return r;
      };
      std::vector<int64_t> at{0};
      for (const auto& p : parts) at.push_back(at.back() + (a.chunk ? saved_size(device, part_args(a, p)) : 0));
      if (a.chunk) saved = Tensor::zeros({at.back()}, dtype, device);
      b.o = a.o, b.ht = a.ht, b.zt = a.zt;
      for (size_t i = 0; i < parts.size(); ++i) {
        backend::MixerArgs r = part_args(a, parts[i]);
        if (a.chunk) r.saved = saved.view_at(at[i], {at[i + 1] - at[i]});
        forward(device, r);
      }
      for (size_t i = 0; i < parts.size(); ++i) {
        backend::MixerArgs r = part_args(b, parts[i]);
        if (a.chunk) r.saved = saved.view_at(at[i], {at[i + 1] - at[i]});
        backward(device, r);
      }
    }
    out = {{"o", a.o}, {"ht", a.ht}, {"dq", b.dq}, {"dk", b.dk}, {"dv", b.dv}, {"dh0", b.dh0}};
    if (b.dgate.defined()) out["dgate"] = b.dgate;
    if (c.normalize) out["zt"] = a.zt, out["dz0"] = b.dz0;
    if (b.ddecay.defined()) out["ddecay"] = b.ddecay;
    if (mamba) out["drate"] = b.drate, out["dskip"] = b.dskip;
  };
}

}  // namespace linattn::testing::documents
