#include "kernels/cpu/sequence_calls.h"

#include <vector>

#include "kernels/sequences.h"

namespace linattn::cpu {

namespace {

// `rows` consecutive sequences of the batch's [B, T] positions from `start`, each `len` long (several
// only when they are whole rows), the first of them sequence `first`.
struct Call {
  int64_t start, rows, len, first;
};

std::vector<Call> calls_of(const backend::MixerArgs& r) {
  std::vector<Call> calls;
  for (int64_t s = 0; s < sequence_count(r.seqs, r.B); ++s) {
    const Span seq = sequence(r.seqs, s, r.T);
    if (seq.len == 0) continue;  // a table's padding (kernels/sequences.h)
    Call* prev = calls.empty() ? nullptr : &calls.back();
    if (seq.len == r.T && prev && prev->len == r.T)
      ++prev->rows;  // whole rows in a row: one call
    else
      calls.push_back({seq.start, 1, seq.len, s});
  }
  return calls;
}

// A [B, T, ...] tensor's positions in call c, as a [rows, len, ...] view; none when x is none.
Tensor positions(const Tensor& x, const Call& c) {
  if (!x.defined()) return x;
  Shape s = x.shape();
  const int64_t n = s[0] * s[1];
  const int64_t per = n ? x.numel() / n : 0;
  s[0] = c.rows, s[1] = c.len;
  return x.view_at(c.start * per, s);
}

// Rows row .. row + rows - 1 of a [B, ...] state; none when row is -1 (kernels/sequences.h) or x none.
Tensor state_rows(const Tensor& x, int64_t row, int64_t rows) {
  if (row < 0 || !x.defined()) return Tensor();
  Shape s = x.shape();
  const int64_t per = s[0] ? x.numel() / s[0] : 0;
  s[0] = rows;
  return x.view_at(row * per, s);
}

// Call c's share of the batch's arguments, its share of `saved` not cut yet.
backend::MixerArgs call_args(const backend::MixerArgs& a, const Call& c) {
  backend::MixerArgs r = a;
  r.B = c.rows, r.T = c.len, r.seqs = {};
  for (Tensor* x : {&r.o, &r.q, &r.k, &r.v, &r.gate, &r.decay, &r.dq, &r.dk, &r.dv, &r.dgate, &r.ddecay, &r.dO})
    *x = positions(*x, c);
  // the call's first sequence starts its rows, its last ends them
  const int64_t in = initial_state_row(a.seqs, c.first, a.T), out = final_state_row(a.seqs, c.first + c.rows - 1, a.T);
  for (Tensor* x : {&r.h0, &r.z0, &r.dh0, &r.dz0}) *x = state_rows(*x, in, c.rows);
  for (Tensor* x : {&r.ht, &r.zt, &r.dht, &r.dzt}) *x = state_rows(*x, out < 0 ? -1 : out - (c.rows - 1), c.rows);
  return r;
}

}  // namespace

void call_per_sequence(const backend::MixerArgs& r, MixerCall call, MixerSavedSize saved_size) {
  if (!r.seqs.count) return call(r);
  int64_t at = 0;
  for (const Call& c : calls_of(r)) {
    backend::MixerArgs part = call_args(r, c);
    if (r.saved.defined()) {
      const int64_t n = saved_size(part);
      part.saved = r.saved.view_at(at, {n});
      at += n;
    }
    call(part);
  }
}

int64_t saved_size_per_sequence(const backend::MixerArgs& r, MixerSavedSize saved_size) {
  if (!r.seqs.count) return saved_size(r);
  int64_t n = 0;
  for (const Call& c : calls_of(r)) n += saved_size(call_args(r, c));
  return n;
}

}  // namespace linattn::cpu
