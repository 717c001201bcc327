// The CPU column's Mamba2 entries (kernels/backend.def). MixerArgs (kernels/backend.h) holds q = C,
// k = B, v = x, gate = the time step before its softplus, rate = A_log, skip = D; around the SSD
// scan of kernels/cpu/mamba2.h these entries do the elementwise rest of the mixer:
//   dt = softplus(gate)   A = -exp(A_log)   o = SSD(x, dt, A, B, C, h0) + D x
// and its backward, by the chain rule:
//   dx += D dO (and the scan's dx)          dD_h += sum over (b, t, p) of x dO
//   dgate += ddt sigmoid(gate)              dA_log += dA A     (d(-exp(A_log)) = A dA_log)
// where ddt and dA are the scan's gradients with respect to dt and A.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/entries.h"
#include "kernels/cpu/mamba2.h"
#include "kernels/cpu/sequence_calls.h"

namespace linattn::cpu::entry {

namespace {

template <class T>
T* ptr(In t) {
  return t.defined() ? t.data<T>() : nullptr;
}

Mamba2Dims dims(const MixerArgs& r) { return {r.B, r.T, r.H, r.G ? r.G : r.H, r.Dk, r.Dv}; }

// softplus(x) = log(1 + e^x), without overflow for large x.
template <class T>
T softplus(T x) {
  return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
}

// dt = softplus(gate) [B, T, H] and A = -exp(A_log) [H].
template <class T>
void time_steps(const MixerArgs& r, std::vector<T>& dt, std::vector<T>& A) {
  const T* gate = r.gate.data<T>();
  dt.resize(size_t(r.B * r.T * r.H));
  for (size_t i = 0; i < dt.size(); ++i) dt[i] = softplus(gate[i]);
  A.resize(size_t(r.H));
  for (int64_t h = 0; h < r.H; ++h) A[h] = -std::exp(r.rate.data<T>()[h]);
}

}  // namespace

static void mamba2_forward_rows(const MixerArgs& r) {
  dispatch_float(r.v.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> dt, A;
    time_steps(r, dt, A);
    const Mamba2Forward<T> a{r.o.data<T>(), ptr<T>(r.ht), ptr<T>(r.saved), r.v.data<T>(), dt.data(), A.data(),
                             r.k.data<T>(), r.q.data<T>(), ptr<T>(r.h0), dims(r), r.chunk_size};
    if (r.chunk)
      mamba2_chunk_forward(a);
    else
      mamba2_recurrent_forward(a);
    // o += D x, per head: o, x [B, T, H, P]
    T* o = r.o.data<T>();
    const T *x = r.v.data<T>(), *D = r.skip.data<T>();
    const int64_t rows = r.B * r.T, H = r.H, P = r.Dv;
#pragma omp parallel for if (rows * H * P > (1 << 16))
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t p = 0; p < P; ++p) o[(i * H + h) * P + p] += D[h] * x[(i * H + h) * P + p];
  });
}

static void mamba2_backward_rows(const MixerArgs& r) {
  dispatch_float(r.v.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> dt, A;
    time_steps(r, dt, A);
    std::vector<T> ddt(dt.size(), T(0)), dA(A.size(), T(0));
    const Mamba2Backward<T> a{r.dv.data<T>(), ddt.data(),     dA.data(),        r.dk.data<T>(), r.dq.data<T>(),
                              ptr<T>(r.dh0),  ptr<T>(r.saved), r.v.data<T>(),   dt.data(),      A.data(),
                              r.k.data<T>(),  r.q.data<T>(),  ptr<T>(r.h0),     r.dO.data<T>(), ptr<T>(r.dht),
                              dims(r),        r.chunk_size};
    if (r.chunk)
      mamba2_chunk_backward(a);
    else
      mamba2_recurrent_backward(a);
    // forward: o += D x  =>  dx += D dO, dD += sum x dO
    const T *x = r.v.data<T>(), *dO = r.dO.data<T>(), *D = r.skip.data<T>();
    T *dx = r.dv.data<T>(), *dD = r.dskip.data<T>();
    const int64_t rows = r.B * r.T, H = r.H, P = r.Dv;
    std::vector<double> sums(size_t(H), 0.0);  // one pass over the tensors, each head's sum in token order
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t p = 0; p < P; ++p) {
          const int64_t j = (i * H + h) * P + p;
          dx[j] += D[h] * dO[j];
          sums[size_t(h)] += double(x[j]) * double(dO[j]);
        }
    for (int64_t h = 0; h < H; ++h) dD[h] += T(sums[size_t(h)]);
    // forward: dt = softplus(gate)  =>  dgate += ddt sigmoid(gate); A = -exp(A_log)  =>  dA_log += dA A
    const T* gate = r.gate.data<T>();
    T* dgate = r.dgate.data<T>();
    for (size_t i = 0; i < ddt.size(); ++i) dgate[i] += ddt[i] / (T(1) + std::exp(-gate[i]));
    for (int64_t h = 0; h < H; ++h) r.drate.data<T>()[h] += dA[h] * A[h];
  });
}

static int64_t mamba2_saved_size_rows(const MixerArgs& r) { return mamba2_chunk_saved_size(dims(r), r.chunk_size); }

// The entries: the kernels above once per document (kernels/cpu/sequence_calls.h). The backward
// reads float32 (or float64) and adds into the gradients (backend::for_float32_adding_kernels).
void mamba2_forward(const MixerArgs& r) { call_per_sequence(r, mamba2_forward_rows, mamba2_saved_size_rows); }
void mamba2_backward(const MixerArgs& r) {
  call_per_sequence(backend::for_float32_adding_kernels(r), mamba2_backward_rows, mamba2_saved_size_rows);
}
int64_t mamba2_saved_size(const MixerArgs& r) { return saved_size_per_sequence(r, mamba2_saved_size_rows); }

}  // namespace linattn::cpu::entry
