#include "kernels/cpu/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/sequences.h"

namespace linattn::cpu {

namespace {

// Small tensors (decoding, the gradient checks) stay on one thread.
inline bool worth_threads(int64_t work) { return work > (1 << 16); }

constexpr int64_t kChannelBlock = 16;  // the channels one task of the weight gradient owns

// w [C, W] as [W, C], so that the loops over the channels read a tap's weights contiguously (and
// vectorize; the products and their order are the same).
template <class T>
std::vector<T> taps_by_column(const T* w, int64_t C, int64_t W) {
  std::vector<T> taps(size_t(W * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < W; ++i) taps[size_t(i * C + c)] = w[c * W + i];
  return taps;
}

}  // namespace

template <class T>
void short_conv_forward(T* y, const T* x, const T* w, const T* bias, int64_t B, int64_t T_, int64_t C, int64_t W,
                        Sequences seqs) {
  const std::vector<T> taps = taps_by_column(w, C, W);
#pragma omp parallel for if (worth_threads(B * T_ * C * W))
  for (int64_t t = 0; t < B * T_; ++t) {
    const int64_t first = sequence(seqs, sequence_of(seqs, t, T_), T_).start;  // no tap reads before it
    T* yt = y + t * C;
    for (int64_t c = 0; c < C; ++c) yt[c] = bias ? bias[c] : T(0);
    for (int64_t i = 0; i < W; ++i) {
      const int64_t s = t - (W - 1) + i;
      if (s < first) continue;
      const T *xs = x + s * C, *tap = taps.data() + i * C;
      for (int64_t c = 0; c < C; ++c) yt[c] += tap[c] * xs[c];
    }
  }
}

template <class T>
void short_conv_backward(T* dx, T* dw, T* dbias, const T* x, const T* w, const T* dy, int64_t B, int64_t T_,
                         int64_t C, int64_t W, Sequences seqs) {
  // forward: y[t] += w[i] x[t - (W-1) + i]  =>  dx[s] += w[i] dy[s + (W-1) - i], dw[i] += dy[t] x[t - (W-1) + i]
  const bool parallel = worth_threads(B * T_ * C * W);
  const std::vector<T> taps = taps_by_column(w, C, W);
#pragma omp parallel for if (parallel)
  for (int64_t s = 0; s < B * T_; ++s) {
    const Span seq = sequence(seqs, sequence_of(seqs, s, T_), T_);
    T* dxs = dx + s * C;
    for (int64_t i = 0; i < W; ++i) {
      const int64_t t = s + (W - 1) - i;  // the output that read x[s] through tap i
      if (t >= seq.start + seq.len) continue;
      const T *dyt = dy + t * C, *tap = taps.data() + i * C;
      for (int64_t c = 0; c < C; ++c) dxs[c] += tap[c] * dyt[c];
    }
  }
  // dw and dbias: a task per block of channels adds the positions into them one by one, in order, so
  // that the sums have the same bits however the batch is split into calls (one per document or one).
#pragma omp parallel for if (parallel) schedule(dynamic)
  for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
    const int64_t c1 = std::min(c0 + kChannelBlock, C), n = c1 - c0;
    std::vector<T> acc((W + 1) * n);  // [W, n] taps, then [n] bias
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t i = 0; i < W; ++i) acc[i * n + c - c0] = dw[c * W + i];
      acc[W * n + c - c0] = dbias ? dbias[c] : T(0);
    }
    for (int64_t sq = 0; sq < sequence_count(seqs, B); ++sq) {
      const Span seq = sequence(seqs, sq, T_);
      for (int64_t t = seq.start; t < seq.start + seq.len; ++t) {
        const T* dyt = dy + t * C + c0;
        T* bias_acc = acc.data() + W * n;
        for (int64_t c = 0; c < n; ++c) bias_acc[c] += dyt[c];
        for (int64_t i = 0; i < W; ++i) {
          const int64_t s = t - (W - 1) + i;
          if (s < seq.start) continue;
          const T* xs = x + s * C + c0;
          T* tap_acc = acc.data() + i * n;
          for (int64_t c = 0; c < n; ++c) tap_acc[c] += dyt[c] * xs[c];
        }
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t i = 0; i < W; ++i) dw[c * W + i] = acc[i * n + c - c0];
      if (dbias) dbias[c] = acc[W * n + c - c0];
    }
  }
}

template void short_conv_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                        int64_t, Sequences);
template void short_conv_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t, int64_t, Sequences);
template void short_conv_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                         int64_t, int64_t, int64_t, Sequences);
template void short_conv_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                          int64_t, int64_t, int64_t, int64_t, Sequences);

}  // namespace linattn::cpu
