#include "kernels/cuda/gla.h"

#include "core/error.h"

namespace linattn::cuda {

namespace {

chunk::Problem problem(const chunk::Mixer<float>& m, const float* G) {
  chunk::Problem p;
  p.B = m.B, p.T = m.len, p.H = m.H, p.Dk = m.Dk, p.W = m.Dv;
  p.q = m.q, p.k = m.k, p.v = {m.v, m.Dv}, p.G = G;
  p.scale = m.scale;
  p.precision = m.precision;
  p.seqs = m.seqs;
  return p;
}

}  // namespace

void gla_forward(const chunk::Mixer<float>& m) {
  LINATTN_CHECK(m.g, "gla: the log-gate g is required");
  chunk::Scratch scratch;
  chunk::Problem p = problem(m, nullptr);
  float* G = scratch.floats(m.B * m.len * m.H * m.Dk);
  chunk::gate_cumsum(G, m.g, p);
  p.G = G;
  float* states = scratch.floats(p.state_words());
  chunk::forward_states(states, p, m.h0);
  chunk::output({m.o, m.Dv, m.Dv, false}, p, states, m.scale, m.scale);
  if (m.final_state) chunk::state_out(m.ht, nullptr, states, true, p, m.Dv, false);
}

// The states again (forward), their gradients (backward), then dv, dq, dk and the in-chunk gate
// gradient per chunk, and what later chunks add to dg.
void gla_backward(const chunk::Mixer<float>& m) {
  LINATTN_CHECK(m.g, "gla: the log-gate g is required");
  chunk::Scratch scratch;
  chunk::Problem p = problem(m, nullptr);
  float* G = scratch.floats(m.B * m.len * m.H * m.Dk);
  chunk::gate_cumsum(G, m.g, p);
  p.G = G;
  float* states = scratch.floats(p.state_words());
  float* dstates = scratch.floats(p.state_words());
  chunk::forward_states(states, p, m.h0);
  const chunk::Rows dO{m.dO, m.Dv};
  chunk::backward_states(dstates, p, dO, m.dht);
  chunk::grad_v({m.dv, m.Dv, m.Dv, !m.write}, p, dO, dstates);
  float* dg_chunks = m.dg ? scratch.floats(p.tiles() * m.H * m.Dk) : nullptr;
  chunk::grad_qk(m.dq, m.dk, m.dg, dg_chunks, p, dO, states, dstates, m.write);
  if (m.dg) chunk::gate_grad_finish(m.dg, dg_chunks, p, m.dht, states);
  chunk::state_out(m.dh0, nullptr, dstates, false, p, m.Dv, true);
}

}  // namespace linattn::cuda
