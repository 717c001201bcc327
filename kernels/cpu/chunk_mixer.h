// The skeleton every linear token-mixer kernel (linear attention, GLA, DeltaNet) is built on: its
// sizes and strides, the one size check, the one head-parallel loop with its per-thread scratch
// arena, recurrent-state load/store, and the one instantiation point for float and double.
// The math the chunk loops share (causal products, exponentials) is in chunk_util.h.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/chunk_util.h"

namespace linattn::cpu {

// Sizes of one mixer call on [B, T, H, D] activations: q, k [B, T, H, Dk], v, o [B, T, H, Dv],
// per-token scalars (beta, a) [B, T, H], states [B, H, Dk, Dv].
struct MixerDims {
  int64_t B, T, H, Dk, Dv;
  int64_t ldk() const { return H * Dk; }  // stride between the tokens of q, k
  int64_t ldv() const { return H * Dv; }  // stride between the tokens of v, o
  // Row index of (b, t, h): the token's q row starts at row * Dk, its v row at row * Dv, its scalar at row.
  int64_t row(int64_t b, int64_t t, int64_t h) const { return (b * T + t) * H + h; }
  int64_t chunks(int64_t C) const { return (T + C - 1) / C; }
};

// The check every entry point makes (the kernels trust their inputs otherwise: the autograd ops
// validate values). `op` names the kernel in the message; chunk_size 1 for the recurrent forms.
inline void check_mixer(const MixerDims& d, int64_t chunk_size, const char* op) {
  LINATTN_CHECK(d.B >= 0 && d.T >= 0 && d.H >= 0 && d.Dk > 0 && d.Dv > 0, op, ": bad sizes B=", d.B, " T=", d.T,
                " H=", d.H, " Dk=", d.Dk, " Dv=", d.Dv);
  LINATTN_CHECK(chunk_size >= 1, op, ": chunk_size must be >= 1, got ", chunk_size,
                " (set the mixer's chunk_size to 16, 32 or 64)");
}

// Per-thread scratch: one buffer carved into named slices, each pointer next to its element count,
// so the total can never drift from what is handed out. The buffer grows only on the first carve of
// a call; later carves with the same slices reuse it (contents are not cleared).
template <class T>
class ScratchArena {
 public:
  struct Slice {
    T*& p;
    int64_t n;
  };
  void carve(std::initializer_list<Slice> slices) {
    int64_t total = 0;
    for (const Slice& s : slices) total += padded(s.n);
    if (int64_t(buf_.size()) < total) buf_.resize(total);
    T* next = buf_.data();
    for (const Slice& s : slices) {
      s.p = next;
      next += padded(s.n);
    }
  }

 private:
  // Whole cache lines, plus one: slices of power-of-two sizes (C * C, C * Dk) would otherwise start
  // exactly 4 KiB multiples apart, where loads from one slice falsely wait on stores to another.
  static int64_t padded(int64_t n) {
    constexpr int64_t line = 64 / sizeof(T);
    return (n + line - 1) / line * line + line;
  }
  std::vector<T> buf_;
};

// Whether to spread the (batch, head) pairs over the OpenMP threads.
// float: always, even for little work: inside an active parallel region every cpu::gemm<float> runs
// single-threaded, while from a region of one thread oneDNN forks its own threads for each small
// product (a 64^3 product measured ~30x slower that way).
// double (the float64 checks, plain-loop products): only when the work pays for waking the threads.
template <class T>
bool parallel_over_heads(const MixerDims& d) {
  if constexpr (std::is_same_v<T, float>) return true;
  else return d.B * d.H > 1 && d.B * d.H * d.T * d.Dk * d.Dv >= (1 << 16);
}

// The head-parallel loop of every mixer kernel. Each thread takes a contiguous share of the B * H
// (batch, head) pairs and calls body(arena, b, h_begin, h_end) once per batch in it, with its own
// scratch arena. A kernel may step all heads of a range through the chunks together, so a chunk's rows
// of those heads, adjacent in the [B, T, H, d] layout, are read from memory in order rather than one
// head's rows 256 bytes out of every H * d * 4.
template <class T, class Body>
void for_head_runs(const MixerDims& d, Body&& body) {
#pragma omp parallel if (parallel_over_heads<T>(d))
  {
    ScratchArena<T> arena;
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num(), BH = d.B * d.H;
    const int64_t begin = BH * me / threads, end = BH * (me + 1) / threads;
    for (int64_t bh = begin; bh < end;) {
      const int64_t b = bh / d.H, h_begin = bh % d.H, h_end = std::min(d.H, h_begin + (end - bh));
      body(arena, b, h_begin, h_end);
      bh += h_end - h_begin;
    }
  }
}

// The same loop one (batch, head) pair at a time: body(arena, b, h).
template <class T, class Body>
void for_each_head(const MixerDims& d, Body&& body) {
  for_head_runs<T>(d, [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    for (int64_t h = h_begin; h < h_end; ++h) body(arena, b, h);
  });
}

// The recurrent state of (batch, head) bh as one [Dk, W] matrix: S [Dk, Dv] in the first Dv columns
// and, when W = Dv + 1, the normalizer z [Dk] in the last (linear attention's normalized form).
// load: from s [B, H, Dk, Dv] and z [B, H, Dk], either nullptr = zeros.
template <class T>
void load_state(T* Sz, const T* s, std::type_identity_t<const T*> z, int64_t bh, int64_t Dk, int64_t Dv, int64_t W) {
  for (int64_t i = 0; i < Dk; ++i) {
    T* row = Sz + i * W;
    if (s) std::copy(s + (bh * Dk + i) * Dv, s + (bh * Dk + i + 1) * Dv, row);
    else std::fill(row, row + Dv, T(0));
    if (W > Dv) row[Dv] = z ? z[bh * Dk + i] : T(0);
  }
}

// store: into s and z (either nullptr = not written), overwriting or accumulating (gradients).
// (z is not deduced, so a plain nullptr can be passed.)
template <class T>
void store_state(T* s, std::type_identity_t<T*> z, const T* Sz, int64_t bh, int64_t Dk, int64_t Dv, int64_t W,
                 bool accumulate) {
  for (int64_t i = 0; i < Dk; ++i) {
    const T* row = Sz + i * W;
    if (s) {
      T* out = s + (bh * Dk + i) * Dv;
      if (accumulate)
        for (int64_t j = 0; j < Dv; ++j) out[j] += row[j];
      else
        std::copy(row, row + Dv, out);
    }
    if (z && W > Dv) z[bh * Dk + i] = (accumulate ? z[bh * Dk + i] : T(0)) + row[Dv];
  }
}

// A row-major block of a chunk's rows: its first element and its row stride (in place in the
// [B, T, H, D] tensor, or a contiguous copy).
template <class T>
struct RowBlock {
  T* p;
  int64_t ld;
};
template <class T>
RowBlock(T*, int64_t) -> RowBlock<T>;

}  // namespace linattn::cpu

// The one instantiation point of a kernel template: float (training) and double (the gradient checks).
#define LINATTN_INSTANTIATE_FLOAT_DOUBLE(fn) \
  template decltype(fn<float>) fn<float>;    \
  template decltype(fn<double>) fn<double>;
