// Documents in one call (kernels/op_types.h's Sequences): attention, the short convolution and RoPE
// called once over a batch with its document offsets give the bits of the calls that autograd made
// before, one per segment part (autograd/segments.h) on views of the same buffers. Shared by the CPU
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
struct Layout {
  const char* name;
  std::vector<int64_t> offsets;  // empty: the rows
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
          {"a row of documents beside a whole row", {0, 30, 95, 100, 200}}};
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
    const ops::Segments segments{layout.offsets};
    std::map<std::string, Tensor> parts, one;
    body(false, segments, parts);
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
      backend::attention_backward(device, dq, dk, dv, q, k, v, o, lse, dO, window, scale, seqs);
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
                                    window, scale, Sequences{});
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

}  // namespace linattn::testing::documents
