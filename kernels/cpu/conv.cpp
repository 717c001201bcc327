#include "kernels/cpu/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/sequences.h"

namespace linattn::cpu {

namespace {

// Small tensors (decoding, the gradient checks) stay on one thread.
inline bool worth_threads(int64_t work) { return work > (1 << 16); }

constexpr int64_t kChannelBlock = 16;  // the channels one task of the weight gradient owns

}  // namespace

template <class T>
void short_conv_forward(T* y, const T* x, const T* w, const T* bias, int64_t B, int64_t T_, int64_t C, int64_t W,
                        Sequences seqs) {
#pragma omp parallel for if (worth_threads(B * T_ * C * W))
  for (int64_t t = 0; t < B * T_; ++t) {
    const int64_t first = sequence(seqs, sequence_of(seqs, t, T_), T_).start;  // no tap reads before it
    T* yt = y + t * C;
    for (int64_t c = 0; c < C; ++c) yt[c] = bias ? bias[c] : T(0);
    for (int64_t i = 0; i < W; ++i) {
      const int64_t s = t - (W - 1) + i;
      if (s < first) continue;
      const T* xs = x + s * C;
      for (int64_t c = 0; c < C; ++c) yt[c] += w[c * W + i] * xs[c];
    }
  }
}

template <class T>
void short_conv_backward(T* dx, T* dw, T* dbias, const T* x, const T* w, const T* dy, int64_t B, int64_t T_,
                         int64_t C, int64_t W, Sequences seqs) {
  // forward: y[t] += w[i] x[t - (W-1) + i]  =>  dx[s] += w[i] dy[s + (W-1) - i], dw[i] += dy[t] x[t - (W-1) + i]
  const bool parallel = worth_threads(B * T_ * C * W);
#pragma omp parallel for if (parallel)
  for (int64_t s = 0; s < B * T_; ++s) {
    const Span seq = sequence(seqs, sequence_of(seqs, s, T_), T_);
    T* dxs = dx + s * C;
    for (int64_t i = 0; i < W; ++i) {
      const int64_t t = s + (W - 1) - i;  // the output that read x[s] through tap i
      if (t >= seq.start + seq.len) continue;
      const T* dyt = dy + t * C;
      for (int64_t c = 0; c < C; ++c) dxs[c] += w[c * W + i] * dyt[c];
    }
  }
  // dw and dbias: a task per block of channels adds the positions into them one by one, in order, so
  // that the sums have the same bits however the batch is split into calls (one per document or one).
#pragma omp parallel for if (parallel) schedule(dynamic)
  for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
    const int64_t c1 = std::min(c0 + kChannelBlock, C), n = c1 - c0;
    std::vector<T> acc(n * (W + 1));  // [n, W] taps, then [n] bias
    for (int64_t c = c0; c < c1; ++c) {
      std::copy_n(dw + c * W, W, acc.begin() + (c - c0) * W);
      acc[n * W + c - c0] = dbias ? dbias[c] : T(0);
    }
    for (int64_t sq = 0; sq < sequence_count(seqs, B); ++sq) {
      const Span seq = sequence(seqs, sq, T_);
      for (int64_t t = seq.start; t < seq.start + seq.len; ++t) {
        const T* dyt = dy + t * C;
        for (int64_t c = c0; c < c1; ++c) acc[n * W + c - c0] += dyt[c];
        for (int64_t i = 0; i < W; ++i) {
          const int64_t s = t - (W - 1) + i;
          if (s < seq.start) continue;
          const T* xs = x + s * C;
          for (int64_t c = c0; c < c1; ++c) acc[(c - c0) * W + i] += dyt[c] * xs[c];
        }
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      std::copy_n(acc.begin() + (c - c0) * W, W, dw + c * W);
      if (dbias) dbias[c] = acc[n * W + c - c0];
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
