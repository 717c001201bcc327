// Mamba2 (SSD): recurrent and chunkwise forward and backward. The math is in mamba2.h; each backward
// line below names the forward line it differentiates.
#include "kernels/cpu/mamba2.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/chunk_mixer.h"
#include "kernels/cpu/matmul.h"

namespace linattn::cpu {
namespace {

// The shared sizes check; `op` names the kernel in the message.
void check_dims(const Mamba2Dims& d, int64_t chunk_size, const char* op) {
  LINATTN_CHECK(d.batch >= 0 && d.T >= 0 && d.H >= 0 && d.G >= 1 && d.N > 0 && d.P > 0, op, ": bad sizes B=",
                d.batch, " T=", d.T, " H=", d.H, " G=", d.G, " N=", d.N, " P=", d.P);
  LINATTN_CHECK(d.H % d.G == 0, op, ": ", d.H, " heads do not split into ", d.G,
                " groups of B and C (set the number of groups to a divisor of the number of heads)");
  LINATTN_CHECK(chunk_size >= 1, op, ": chunk_size must be >= 1, got ", chunk_size,
                " (set the mixer's chunk_size to 16, 32 or 64)");
}

// The (batch, head) loop of chunk_mixer.h sees a head's C/B rows as its "q/k" [N] and x, y as "v" [P].
MixerDims mixer_dims(const Mamba2Dims& d) { return {d.batch, d.T, d.H, d.N, d.P}; }

// Offsets of token t of (batch b, head h): its x/y row, its dt entry, and its group's B/C row.
struct Index {
  const Mamba2Dims& d;
  int64_t group(int64_t h) const { return h / (d.H / d.G); }
  int64_t token(int64_t b, int64_t t, int64_t h) const { return (b * d.T + t) * d.H + h; }  // dt; x at * P
  int64_t bc(int64_t b, int64_t t, int64_t h) const { return ((b * d.T + t) * d.G + group(h)) * d.N; }
  int64_t ld_x() const { return d.H * d.P; }   // between the tokens of x, y
  int64_t ld_bc() const { return d.G * d.N; }  // between the tokens of B, C
};

// Where the per-head gradients of B and C go inside the head loop, and dA's per-(batch, head) partial
// sums: heads of one group (and pairs of one head) may run on different threads, so each writes its
// own slot and finish() sums them into the outputs afterwards. With G == H the per-head gradients are
// the outputs themselves.
template <class T>
class GroupGradients {
 public:
  explicit GroupGradients(const Mamba2Backward<T>& a) : a_(a), dA_parts_(a.dims.batch * a.dims.H, T(0)) {
    const Mamba2Dims& d = a.dims;
    if (d.G == d.H) {
      dB = a.dB, dC = a.dC;
    } else {
      per_head_.assign(2 * d.batch * d.T * d.H * d.N, T(0));
      dB = per_head_.data(), dC = dB + d.batch * d.T * d.H * d.N;
    }
    dA = dA_parts_.data();
  }
  T* dB;  // [B, T, H, N]
  T* dC;  // [B, T, H, N]
  T* dA;  // [B, H]

  void finish() {
    const Mamba2Dims& d = a_.dims;
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t b = 0; b < d.batch; ++b) a_.dA[h] += dA[b * d.H + h];
    if (d.G == d.H) return;
    const int64_t heads_per_group = d.H / d.G, rows = d.batch * d.T;
#pragma omp parallel for if (rows * d.H * d.N > (1 << 16))
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < d.H; ++h) {
        const int64_t in = (r * d.H + h) * d.N, out = (r * d.G + h / heads_per_group) * d.N;
        for (int64_t n = 0; n < d.N; ++n) {
          a_.dB[out + n] += dB[in + n];
          a_.dC[out + n] += dC[in + n];
        }
      }
  }

 private:
  const Mamba2Backward<T>& a_;
  std::vector<T> per_head_, dA_parts_;
};

void check_pointers(bool ok, const char* op) {
  LINATTN_CHECK(ok, op, ": a required pointer is null (only h0, ht, dh0 and dht may be)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Recurrent form.

template <class T>
void mamba2_recurrent_forward(const Mamba2Forward<T>& a) {
  const Mamba2Dims& d = a.dims;
  check_dims(d, 1, "mamba2_recurrent_forward");
  check_pointers(a.y && a.x && a.dt && a.A && a.B && a.C, "mamba2_recurrent_forward");
  const Index ix{d};
  const int64_t N = d.N, P = d.P;
  for_each_head<T>(mixer_dims(d), [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T* S;
    arena.carve({{S, N * P}});
    load_state(S, a.h0, nullptr, b * d.H + h, N, P, P);
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t tok = ix.token(b, t, h);
      const T* x = a.x + tok * P;
      const T* Bt = a.B + ix.bc(b, t, h);
      const T* Ct = a.C + ix.bc(b, t, h);
      const T dt = a.dt[tok], decay = std::exp(dt * a.A[h]);
      // S_t = exp(a_t) S_{t-1} + B_t (dt_t x_t)^T
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < P; ++j) S[i * P + j] = decay * S[i * P + j] + Bt[i] * dt * x[j];
      // y_t = S_t^T C_t
      T* y = a.y + tok * P;
      std::fill(y, y + P, T(0));
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < P; ++j) y[j] += S[i * P + j] * Ct[i];
    }
    store_state(a.ht, nullptr, S, b * d.H + h, N, P, P, false);
  });
}

template <class T>
void mamba2_recurrent_backward(const Mamba2Backward<T>& a) {
  const Mamba2Dims& d = a.dims;
  check_dims(d, 1, "mamba2_recurrent_backward");
  check_pointers(a.dx && a.ddt && a.dA && a.dB && a.dC && a.x && a.dt && a.A && a.B && a.C && a.dy,
                 "mamba2_recurrent_backward");
  const Index ix{d};
  const int64_t N = d.N, P = d.P;
  GroupGradients<T> grads(a);
  for_each_head<T>(mixer_dims(d), [&](ScratchArena<T>& arena, int64_t b, int64_t h) {
    T *states, *dS, *dv;  // states[t + 1] = S_t, states[0] = h0
    arena.carve({{states, (d.T + 1) * N * P}, {dS, N * P}, {dv, P}});
    load_state(states, a.h0, nullptr, b * d.H + h, N, P, P);
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t tok = ix.token(b, t, h);
      const T* x = a.x + tok * P;
      const T* Bt = a.B + ix.bc(b, t, h);
      const T dt = a.dt[tok], decay = std::exp(dt * a.A[h]);
      const T* prev = states + t * N * P;
      T* S = states + (t + 1) * N * P;
      for (int64_t i = 0; i < N; ++i)
        for (int64_t j = 0; j < P; ++j) S[i * P + j] = decay * prev[i * P + j] + Bt[i] * dt * x[j];
    }
    load_state(dS, a.dht, nullptr, b * d.H + h, N, P, P);
    for (int64_t t = d.T - 1; t >= 0; --t) {
      const int64_t tok = ix.token(b, t, h), bc = ix.bc(b, t, h), bch = tok * N;
      const T* x = a.x + tok * P;
      const T* dy = a.dy + tok * P;
      const T* Bt = a.B + bc;
      const T* Ct = a.C + bc;
      const T dt = a.dt[tok], decay = std::exp(dt * a.A[h]);
      const T* prev = states + t * N * P;
      const T* S = states + (t + 1) * N * P;
      // forward: y_t = S_t^T C_t  =>  dC_t += S_t dy_t,  dS_t += C_t dy_t^T
      for (int64_t i = 0; i < N; ++i) {
        T acc = 0;
        for (int64_t j = 0; j < P; ++j) {
          acc += S[i * P + j] * dy[j];
          dS[i * P + j] += Ct[i] * dy[j];
        }
        grads.dC[bch + i] += acc;
      }
      // forward: S_t = exp(a_t) S_{t-1} + B_t v_t^T, v_t = dt_t x_t
      //   =>  dB_t += dS_t v_t,  dv_t = dS_t^T B_t,  da_t = exp(a_t) <dS_t, S_{t-1}>,  dS_{t-1} = exp(a_t) dS_t
      std::fill(dv, dv + P, T(0));
      T da = 0;
      for (int64_t i = 0; i < N; ++i) {
        T dBi = 0;
        for (int64_t j = 0; j < P; ++j) {
          const T g = dS[i * P + j];
          dBi += g * dt * x[j];
          dv[j] += g * Bt[i];
          da += g * prev[i * P + j];
          dS[i * P + j] = decay * g;
        }
        grads.dB[bch + i] += dBi;
      }
      da *= decay;
      // forward: v_t = dt_t x_t, a_t = dt_t A_h  =>  dx_t += dt_t dv_t, ddt_t += x_t · dv_t + A_h da_t,
      //          dA_h += dt_t da_t
      T ddt = a.A[h] * da;
      for (int64_t j = 0; j < P; ++j) {
        a.dx[tok * P + j] += dt * dv[j];
        ddt += x[j] * dv[j];
      }
      a.ddt[tok] += ddt;
      grads.dA[b * d.H + h] += dt * da;
    }
    store_state(a.dh0, nullptr, dS, b * d.H + h, N, P, P, true);
  });
  grads.finish();
}

// ---------------------------------------------------------------------------------------------
// Chunkwise form (mamba2.h).

namespace {

// One chunk of n tokens of one head, the quantities forward and backward both need:
// l (cumulative log-decay), gamma = e^l, lambda = e^(l_n - l) [n]; V = diag(dt) X, Kl = diag(lambda) K
// [n, P] / [n, N]; D [n, n] (leading dimension C) the decay matrix, causal.
template <class T>
void chunk_decays(T* l, T* gamma, T* lambda, T* V, T* Kl, T* D, const T* dt, int64_t ld_dt, T A, const T* x,
                  int64_t ld_x, const T* K, int64_t ld_k, int64_t n, int64_t C, int64_t N, int64_t P) {
  T run = 0;
  for (int64_t i = 0; i < n; ++i) l[i] = run += dt[i * ld_dt] * A;
  for (int64_t i = 0; i < n; ++i) {
    gamma[i] = exp_nonpos(l[i]);
    lambda[i] = exp_nonpos(l[n - 1] - l[i]);
    const T dti = dt[i * ld_dt];
    const T* xi = x + i * ld_x;
#pragma omp simd
    for (int64_t j = 0; j < P; ++j) V[i * P + j] = dti * xi[j];
    const T* ki = K + i * ld_k;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) Kl[i * N + j] = lambda[i] * ki[j];
    T* Di = D + i * C;
    const T li = l[i];
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) Di[j] = exp_nonpos(li - l[j]);
    std::fill(Di + i + 1, Di + n, T(0));
  }
}

// Out = In ⊙ D on and below the diagonal (rows n, leading dimension C); zeros above stay zeros.
template <class T>
void times_decay(T* out, const T* in, const T* D, int64_t n, int64_t C) {
  for (int64_t i = 0; i < n; ++i) {
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) out[i * C + j] = in[i * C + j] * D[i * C + j];
    std::fill(out + i * C + i + 1, out + i * C + n, T(0));
  }
}

template <class T>
void scale_rows(T* M, int64_t ld, const T* s, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i)
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) M[i * ld + j] *= s[i];
}

template <class T>
T dot(const T* u, const T* v, int64_t n) {
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += u[i] * v[i];
  return acc;
}

}  // namespace

int64_t mamba2_chunk_saved_size(const Mamba2Dims& d, int64_t chunk_size) {
  check_dims(d, chunk_size, "mamba2_chunk_saved_size");
  const int64_t chunks = (d.T + chunk_size - 1) / chunk_size;
  return d.batch * d.H * (chunks + 1) * d.N * d.P;
}

template <class T>
void mamba2_chunk_forward(const Mamba2Forward<T>& a) {
  const Mamba2Dims& d = a.dims;
  check_dims(d, a.chunk_size, "mamba2_chunk_forward");
  check_pointers(a.y && a.saved && a.x && a.dt && a.A && a.B && a.C, "mamba2_chunk_forward");
  const Index ix{d};
  const int64_t C = a.chunk_size, NC = (d.T + C - 1) / C, N = d.N, P = d.P, ldx = ix.ld_x(), ldbc = ix.ld_bc();
  for_head_runs<T>(mixer_dims(d), [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    T *l, *gamma, *lambda, *V, *Kl, *D, *QK, *Pm;
    arena.carve({{l, C},            // cumulative log-decay
                 {gamma, C},        // e^l
                 {lambda, C},       // e^(l_n - l)
                 {V, C * P},        // diag(dt) X
                 {Kl, C * N},       // diag(lambda) K
                 {D, C * C},        // decay matrix
                 {QK, C * C},       // M ⊙ Q K^T of the current group
                 {Pm, C * C}});     // P = Q K^T ⊙ D
    // saved [B, H, NC + 1, N, P]: chunk c of (b, h) starts from state c and ends at state c + 1.
    auto state = [&](int64_t h, int64_t c) { return a.saved + ((b * d.H + h) * (NC + 1) + c) * N * P; };
    for (int64_t h = h_begin; h < h_end; ++h) load_state(state(h, 0), a.h0, nullptr, b * d.H + h, N, P, P);
    for (int64_t c = 0; c < NC; ++c) {
      int64_t qk_group = -1;  // the group whose Q K^T is in QK
      for (int64_t h = h_begin; h < h_end; ++h) {
        const int64_t t0 = c * C, n = std::min(C, d.T - t0), tok = ix.token(b, t0, h);
        const T* Q = a.C + ix.bc(b, t0, h);
        const T* K = a.B + ix.bc(b, t0, h);
        const T* S0 = state(h, c);
        T* y = a.y + tok * P;
        chunk_decays<T>(l, gamma, lambda, V, Kl, D, a.dt + tok, d.H, a.A[h], a.x + tok * P, ldx, K, ldbc, n, C, N, P);
        if (ix.group(h) != qk_group) {
          causal_scores(n, N, T(1), Q, ldbc, K, ldbc, QK, C);
          qk_group = ix.group(h);
        }
        times_decay(Pm, QK, D, n, C);
        // Y = diag(gamma) Q S0 + P V
        gemm<T>(false, false, n, P, N, T(1), Q, ldbc, S0, P, T(0), y, ldx);
        scale_rows(y, ldx, gamma, n, P);
        causal_times(n, P, T(1), Pm, C, V, P, T(1), y, ldx);
        // S1 = gamma_n S0 + (diag(lambda) K)^T V
        T* S1 = state(h, c + 1);
        const T gamma_n = gamma[n - 1];
#pragma omp simd
        for (int64_t i = 0; i < N * P; ++i) S1[i] = gamma_n * S0[i];
        gemm<T>(true, false, N, P, n, T(1), Kl, N, V, P, T(1), S1, P);
      }
    }
    for (int64_t h = h_begin; h < h_end; ++h) store_state(a.ht, nullptr, state(h, NC), b * d.H + h, N, P, P, false);
  });
}

template <class T>
void mamba2_chunk_backward(const Mamba2Backward<T>& a) {
  const Mamba2Dims& d = a.dims;
  check_dims(d, a.chunk_size, "mamba2_chunk_backward");
  check_pointers(a.dx && a.ddt && a.dA && a.dB && a.dC && a.saved && a.x && a.dt && a.A && a.B && a.C && a.dy,
                 "mamba2_chunk_backward");
  const Index ix{d};
  const int64_t C = a.chunk_size, NC = (d.T + C - 1) / C, N = d.N, P = d.P, ldx = ix.ld_x(), ldbc = ix.ld_bc();
  GroupGradients<T> grads(a);
  for_head_runs<T>(mixer_dims(d), [&](ScratchArena<T>& arena, int64_t b, int64_t h_begin, int64_t h_end) {
    T *l, *gamma, *lambda, *V, *Kl, *D, *QK, *Pm, *dPm, *Qg, *tmp, *dV, *dQ, *dK, *read0, *into1, *crossing,
        *dstates;
    arena.carve({{l, C},                  // cumulative log-decay
                 {gamma, C},              // e^l
                 {lambda, C},             // e^(l_n - l)
                 {V, C * P},              // diag(dt) X
                 {Kl, C * N},             // diag(lambda) K
                 {D, C * C},              // decay matrix
                 {QK, C * C},             // M ⊙ Q K^T of the current group
                 {Pm, C * C},             // P = Q K^T ⊙ D
                 {dPm, C * C},            // dP
                 {Qg, C * N},             // diag(gamma) Q
                 {tmp, C * N},            // diag(lambda) V dS1^T, then the column sums Z below
                 {dV, C * P},             // gradient wrt V
                 {dQ, C * N},             // this head's gradient wrt the chunk's C rows
                 {dK, C * N},             // ... and B rows
                 {read0, C},              // the three per-token terms of the decay's gradient (below)
                 {into1, C},
                 {crossing, C},
                 {dstates, d.H * N * P}});  // gradients wrt the states after the current chunk
    auto state = [&](int64_t h, int64_t c) { return a.saved + ((b * d.H + h) * (NC + 1) + c) * N * P; };
    for (int64_t h = h_begin; h < h_end; ++h) load_state(dstates + h * N * P, a.dht, nullptr, b * d.H + h, N, P, P);
    for (int64_t c = NC - 1; c >= 0; --c) {
      int64_t qk_group = -1;
      for (int64_t h = h_begin; h < h_end; ++h) {
        const int64_t t0 = c * C, n = std::min(C, d.T - t0), tok = ix.token(b, t0, h);
        const T* Q = a.C + ix.bc(b, t0, h);
        const T* K = a.B + ix.bc(b, t0, h);
        const T* dy = a.dy + tok * P;
        const T* S0 = state(h, c);
        T* dS = dstates + h * N * P;
        chunk_decays<T>(l, gamma, lambda, V, Kl, D, a.dt + tok, d.H, a.A[h], a.x + tok * P, ldx, K, ldbc, n, C, N, P);
        if (ix.group(h) != qk_group) {
          causal_scores(n, N, T(1), Q, ldbc, K, ldbc, QK, C);
          qk_group = ix.group(h);
        }
        times_decay(Pm, QK, D, n, C);
        // forward: Y = diag(gamma) Q S0 + P V
        //   =>  dV = P^T dY,  dP = (dY V^T) ⊙ D,  dQ = diag(gamma) dY S0^T + dP K
        causal_transposed_times(n, P, T(1), Pm, C, dy, ldx, T(0), dV, P);
        causal_scores(n, P, T(1), dy, ldx, V, P, dPm, C);
        times_decay(dPm, dPm, D, n, C);
        gemm<T>(false, true, n, N, P, T(1), dy, ldx, S0, P, T(0), dQ, N);
        scale_rows(dQ, N, gamma, n, N);
        for (int64_t i = 0; i < n; ++i) read0[i] = dot(Q + i * ldbc, dQ + i * N, N);  // before the dP K part
        causal_times(n, N, T(1), dPm, C, K, ldbc, T(1), dQ, N);
        //   and P = (Q K^T) ⊙ D  =>  dK = dP^T Q
        causal_transposed_times(n, N, T(1), dPm, C, Q, ldbc, T(0), dK, N);
        // forward: S1 = gamma_n S0 + (diag(lambda) K)^T V
        //   =>  dV += diag(lambda) K dS1,  dK += diag(lambda) V dS1^T,  dS0 = gamma_n dS1 (+ below)
        gemm<T>(false, false, n, P, N, T(1), Kl, N, dS, P, T(1), dV, P);
        gemm<T>(false, true, n, N, P, T(1), V, P, dS, P, T(0), tmp, N);
        scale_rows(tmp, N, lambda, n, N);
        for (int64_t i = 0; i < n; ++i) {
          into1[i] = dot(K + i * ldbc, tmp + i * N, N);
#pragma omp simd
          for (int64_t j = 0; j < N; ++j) dK[i * N + j] += tmp[i * N + j];
        }
        const T gamma_n = gamma[n - 1];
        T passing = 0;  // <dS1, gamma_n S0>
        for (int64_t i = 0; i < N * P; ++i) {
          passing += dS[i] * S0[i];
          dS[i] *= gamma_n;
        }
        passing *= gamma_n;
        // forward: Y = diag(gamma) Q S0 + ...  =>  dS0 += (diag(gamma) Q)^T dY
        for (int64_t i = 0; i < n; ++i)
#pragma omp simd
          for (int64_t j = 0; j < N; ++j) Qg[i * N + j] = gamma[i] * Q[i * ldbc + j];
        gemm<T>(true, false, N, P, n, T(1), Qg, N, dy, ldx, T(1), dS, P);
        // The decay's gradient (mamba2.h), with the running sums inside the chunk:
        //   da_t = <dS1, gamma_n S0>                          S0 carried through the chunk into S1
        //        + Σ_{u >= t} C_u · (gamma_u S0 dy_u)         S0 read out at u     (read0)
        //        + Σ_{j < t} B_j · (lambda_j dS1 v_j)         token j written into S1 (into1)
        //        + Σ_{u >= t > j} dP_uj (C_u · B_j)           token j read out at u (crossing)
        // crossing_t = Σ_{j < t} Z_j(t), Z_j(t) = Σ_{u >= t} dP_uj QK_uj: column sums from the bottom.
        std::fill(crossing, crossing + n, T(0));
        std::fill(tmp, tmp + n, T(0));  // Z
        for (int64_t u = n - 1; u >= 1; --u) {
          T acc = 0;
          for (int64_t j = 0; j < u; ++j) {
            tmp[j] += dPm[u * C + j] * QK[u * C + j];
            acc += tmp[j];
          }
          crossing[u] = acc;
        }
        T from_end = passing;
        for (int64_t i = n - 1; i >= 0; --i) read0[i] = from_end += read0[i];  // now Σ_{u >= i} + passing
        T from_start = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T written = from_start;
          from_start += into1[i];
          into1[i] = written;  // now Σ_{j < i}
        }
        // Accumulate dB, dC, then the chain rule through v_t = dt_t x_t and a_t = dt_t A_h.
        T dA = 0;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t ti = tok + i * d.H;  // token t0 + i of (b, h)
          T* dBh = grads.dB + ti * N;
          T* dCh = grads.dC + ti * N;
#pragma omp simd
          for (int64_t j = 0; j < N; ++j) {
            dCh[j] += dQ[i * N + j];
            dBh[j] += dK[i * N + j];
          }
          const T da = read0[i] + into1[i] + crossing[i];
          const T dt = a.dt[ti];
          const T* xi = a.x + ti * P;
          const T* dVi = dV + i * P;
          T* dxi = a.dx + ti * P;
          T ddt = a.A[h] * da;
#pragma omp simd reduction(+ : ddt)
          for (int64_t j = 0; j < P; ++j) {
            dxi[j] += dt * dVi[j];
            ddt += xi[j] * dVi[j];
          }
          a.ddt[ti] += ddt;
          dA += dt * da;
        }
        grads.dA[b * d.H + h] += dA;
      }
    }
    for (int64_t h = h_begin; h < h_end; ++h)
      store_state(a.dh0, nullptr, dstates + h * N * P, b * d.H + h, N, P, P, true);
  });
  grads.finish();
}

LINATTN_INSTANTIATE_FLOAT_DOUBLE(mamba2_recurrent_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(mamba2_recurrent_backward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(mamba2_chunk_forward)
LINATTN_INSTANTIATE_FLOAT_DOUBLE(mamba2_chunk_backward)

}  // namespace linattn::cpu
