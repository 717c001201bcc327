#include "kernels/cuda/linear_attn.h"

#include "core/error.h"

namespace linattn::cuda {

namespace {

// The passes' view of a call whose value side is v (W columns).
chunk::Problem problem(const chunk::Mixer<float>& m, chunk::Rows v, int64_t W, float scale) {
  chunk::Problem p;
  p.B = m.B, p.T = m.len, p.H = m.H, p.Dk = m.Dk, p.W = W;
  p.q = m.q, p.k = m.k, p.v = v, p.phi = m.phi;
  p.scale = scale;
  p.precision = m.precision;
  p.seqs = m.seqs;
  return p;
}

// [a | b] of two [rows, W] and [rows] tensors, or null when both are absent.
const float* joined(chunk::Scratch& scratch, const float* a, const float* b, int64_t rows, int64_t W) {
  if (!a && !b) return nullptr;
  float* x = scratch.floats(rows * (W + 1));
  chunk::append_column(x, a, b, rows, W, 0.0f);
  return x;
}

}  // namespace

// Unnormalized: o = scale (φ(Q) S_c + A V) per chunk. Normalized: the same with scale 1 over the value
// columns [v | 1] from [h0 | z0], o = num / (den + eps) and [ht | zt] the final state.
void linear_attention_forward(const chunk::Mixer<float>& m) {
  chunk::Scratch scratch;
  const int64_t rows = m.B * m.len * m.H, W = m.normalize ? m.Dv + 1 : m.Dv;
  Floats v = m.v;
  const float* h0 = m.h0;
  if (m.normalize) {
    float* v2 = scratch.floats(rows * W);
    chunk::append_column(v2, m.v, nullptr, rows, m.Dv, 1.0f);
    v = v2;
    h0 = joined(scratch, m.h0, m.z0, m.B * m.H * m.Dk, m.Dv);
  }
  const chunk::Problem p = problem(m, {v, W}, W, m.normalize ? 1.0f : m.scale);
  float* states = scratch.floats(p.state_words());
  chunk::forward_states(states, p, h0);
  if (m.normalize) {
    float* o2 = scratch.floats(rows * W);
    chunk::output({o2, W, W, false}, p, states, 1.0f, 1.0f);
    chunk::normalized_output(m.o, o2, rows, m.Dv);
  } else {
    chunk::output({m.o, W, W, false}, p, states, m.scale, m.scale);
  }
  if (m.final_state) chunk::state_out(m.ht, m.normalize ? m.zt : nullptr, states, true, p, m.Dv, false);
}

// As GLA's backward without gates (derivations.md, "Linear attention"), then times φ'. Normalized:
// the denominator again (the forward over a column of ones from z0), then the same passes over
// [v | 1], [h0 | z0], [dht | dzt] and dO' = [dnum | dden] with scale 1.
void linear_attention_backward(const chunk::Mixer<float>& m) {
  LINATTN_CHECK(!m.normalize || m.o, "linear_attention: the normalized backward on CUDA needs the forward's output o");
  chunk::Scratch scratch;
  const int64_t rows = m.B * m.len * m.H, W = m.normalize ? m.Dv + 1 : m.Dv;
  Floats v = m.v;
  const float* dO = m.dO;
  const float* h0 = m.h0;
  const float* dht = m.dht;
  if (m.normalize) {
    float* one = scratch.floats(1);
    chunk::append_column(one, nullptr, nullptr, 1, 0, 1.0f);
    const chunk::Problem ones = problem(m, {one, 0}, 1, 1.0f);
    float* den_states = scratch.floats(ones.state_words());
    chunk::forward_states(den_states, ones, m.z0);
    float* den = scratch.floats(rows);
    chunk::output({den, 1, 1, false}, ones, den_states, 1.0f, 1.0f);
    float* v2 = scratch.floats(rows * W);
    float* dO2 = scratch.floats(rows * W);
    chunk::append_column(v2, m.v, nullptr, rows, m.Dv, 1.0f);
    chunk::normalized_grad(dO2, m.dO, m.o, den, rows, m.Dv);
    v = v2, dO = dO2;
    h0 = joined(scratch, m.h0, m.z0, m.B * m.H * m.Dk, m.Dv);
    dht = joined(scratch, m.dht, m.dzt, m.B * m.H * m.Dk, m.Dv);
  }
  const chunk::Problem p = problem(m, {v, W}, W, m.normalize ? 1.0f : m.scale);
  float* states = scratch.floats(p.state_words());
  float* dstates = scratch.floats(p.state_words());
  chunk::forward_states(states, p, h0);
  chunk::backward_states(dstates, p, {dO, W}, dht);
  chunk::grad_v({m.dv, m.Dv, m.Dv, !m.write}, p, {dO, W}, dstates);
  chunk::grad_qk(m.dq, m.dk, nullptr, nullptr, p, {dO, W}, states, dstates, m.write);
  chunk::state_out(m.dh0, m.normalize ? m.dz0 : nullptr, dstates, false, p, m.Dv, true);
}

}  // namespace linattn::cuda
