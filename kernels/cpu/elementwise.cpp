#include "kernels/cpu/elementwise.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/exp.h"
#include "kernels/cpu/stored.h"

namespace linattn::cpu {

// Pointwise loops are memory-bound: thread them only when there is enough work to amortize a fork.
constexpr int64_t kParallelMin = 1 << 15;

template <class T>
void add_forward(T* y, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <class T>
void add_inplace(T* y, const T* x, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

template <class T>
void mul_forward(T* y, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

template <class T>
void mul_backward(T* da, T* db, const T* a, const T* b, const T* dy, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    if (da) da[i] += dy[i] * b[i];
    if (db) db[i] += dy[i] * a[i];
  }
}

template <class T>
void scale_forward(T* y, const T* x, T c, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = c * x[i];
}

template <class T>
void axpy(T* y, T c, const T* x, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] += c * x[i];
}

// log(sigmoid(x)) = -log(1 + e^-x), written so that neither branch overflows.
template <class T>
static inline T logsigmoid(T x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

template <class T>
void activation_forward(Activation f, T* y, const T* x, int64_t n, T scale) {
  switch (f) {
    case Activation::silu:
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = scale * (x[i] * sigmoid(x[i]));
      break;
    case Activation::sigmoid:
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = scale * sigmoid(x[i]);
      break;
    case Activation::logsigmoid:
#pragma omp parallel for if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = scale * logsigmoid(x[i]);
      break;
    case Activation::elu1:  // elu(x) + 1: x + 1 for x > 0, e^x otherwise
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = scale * (x[i] > 0 ? x[i] + T(1) : exp_nonpos(-std::abs(x[i])));
      break;
    case Activation::relu:
#pragma omp parallel for simd if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = scale * (x[i] > 0 ? x[i] : T(0));
      break;
  }
}

// dx[i] = g(i) when `write`, else dx[i] += g(i), for i < n: the branch outside the loops, which GCC
// then vectorizes (a select between the stored and a new value inside them stops it).
template <class T, class G>
static inline void put_each(T* dx, int64_t n, bool write, G g) {
  if (write) {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) dx[i] = g(i);
  } else {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) dx[i] += g(i);
  }
}

// The same for two gradients that share their work: g(i, a, b) sets both of element i's.
template <class T, class G>
static inline void put_each2(T* da, T* db, int64_t n, bool write, G g) {
  if (write) {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) g(i, da[i], db[i]);
  } else {
#pragma omp parallel for simd if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      T a, b;
      g(i, a, b);
      da[i] += a;
      db[i] += b;
    }
  }
}

// d: the upstream gradient times the forward's scale (y = c f(x)  =>  dx += (c dy) f'(x)).
template <class T, class X>
void activation_backward(Activation f, T* dx, const X* x, const T* dy, int64_t n, T scale, bool write) {
  switch (f) {
    case Activation::silu:  // forward: y = x s(x)  =>  dx += dy (s + x s (1 - s))
      return put_each(dx, n, write, [&](int64_t i) {
        const T xi = load(x[i]), s = sigmoid(xi), d = scale * dy[i];
        return d * s * (T(1) + xi * (T(1) - s));
      });
    case Activation::sigmoid:  // forward: y = s(x)  =>  dx += dy s (1 - s)
      return put_each(dx, n, write, [&](int64_t i) {
        const T s = sigmoid(load(x[i]));
        return scale * dy[i] * s * (T(1) - s);
      });
    case Activation::logsigmoid:  // forward: y = log s(x)  =>  dx += dy (1 - s(x)) = dy s(-x)
      return put_each(dx, n, write, [&](int64_t i) { return scale * dy[i] * sigmoid(-load(x[i])); });
    case Activation::elu1:  // forward: y = x + 1 (x > 0), e^x (x <= 0)  =>  dx += dy (1 or e^x)
      return put_each(dx, n, write, [&](int64_t i) {
        const T xi = load(x[i]), d = scale * dy[i];
        return xi > 0 ? d : d * exp_nonpos(-std::abs(xi));
      });
    case Activation::relu:  // forward: y = max(x, 0)  =>  dx += dy [x > 0]
      return put_each(dx, n, write, [&](int64_t i) { return load(x[i]) > T(0) ? scale * dy[i] : T(0); });
  }
}

template <class Y, class X>
void swiglu_forward(Y* y, const X* gate, const X* up, int64_t n) {
  using T = decltype(load(X{}) + load(Y{}));  // float, or double for double
#pragma omp parallel for simd if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T g = load(gate[i]);
    store(y[i], g * sigmoid(g) * load(up[i]));
  }
}

template <class T, class X>
void swiglu_backward(T* dgate, T* dup, const X* gate, const X* up, const T* dy, int64_t n, bool write) {
  put_each2(dgate, dup, n, write, [&](int64_t i, T& dg, T& du) {
    const T g = load(gate[i]), s = sigmoid(g);
    dg = dy[i] * load(up[i]) * s * (T(1) + g * (T(1) - s));
    du = dy[i] * (g * s);
  });
}

template <class Y, class X>
void swiglu_joined_forward(Y* y, bfloat16* copy, const X* x, int64_t rows, int64_t cols) {
  using T = decltype(load(X{}) + load(Y{}));  // float, or double for double
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const X *gate = x + r * 2 * cols, *up = gate + cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const T g = load(gate[c]);
      store(y[r * cols + c], g * sigmoid(g) * load(up[c]));
    }
    if constexpr (!std::is_same_v<X, double>)
      if (copy)
        for (int64_t c = 0; c < 2 * cols; ++c) copy[r * 2 * cols + c] = from_float(load(gate[c]));
  }
}

template <class D, class X, class T>
void swiglu_joined_backward(D* dx, const X* x, const T* dy, int64_t rows, int64_t cols) {
#pragma omp parallel for if (rows * cols > kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const X *gate = x + r * 2 * cols, *up = gate + cols;
    D *dgate = dx + r * 2 * cols, *dup = dgate + cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const T g = load(gate[c]), u = load(up[c]), d = dy[r * cols + c];
      const T s = sigmoid(g), silu = g * s;
      store(dgate[c], d * u * s * (T(1) + g * (T(1) - s)));
      store(dup[c], d * silu);
    }
  }
}

// softplus(s) = log(1 + e^s), written so that neither branch overflows.
template <class T>
static inline T softplus(T s) {
  return std::max(s, T(0)) + std::log1p(std::exp(-std::abs(s)));
}

template <class T>
void gdn_decay_forward(T* a, const T* x, const T* A_log, const T* dt_bias, int64_t rows, int64_t H) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) a[r * H + h] = -std::exp(A_log[h]) * softplus(x[r * H + h] + dt_bias[h]);
}

template <class T>
void gdn_decay_backward(T* dx, T* dA_log, T* ddt_bias, const T* x, const T* A_log, const T* dt_bias, const T* da,
                        int64_t rows, int64_t H) {
  // rows x H is small (one scalar per head and token): one pass, serial sums over rows.
  for (int64_t h = 0; h < H; ++h) {
    const T e = std::exp(A_log[h]);
    T sum_dA = 0, sum_ddt = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const T s = x[r * H + h] + dt_bias[h], g = da[r * H + h];
      const T ds = -g * e * sigmoid(s);  // d/ds of -e sp(s) is -e sigmoid(s)
      if (dx) dx[r * H + h] += ds;
      sum_ddt += ds;
      sum_dA += g * (-e * softplus(s));  // d/dA_log of -exp(A_log) sp(s) is the value itself
    }
    if (dA_log) dA_log[h] += sum_dA;
    if (ddt_bias) ddt_bias[h] += sum_ddt;
  }
}

#define INSTANTIATE(T)                                                                      \
  template void add_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void add_inplace<T>(T*, const T*, int64_t);                                     \
  template void mul_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void scale_forward<T>(T*, const T*, T, int64_t);                                \
  template void axpy<T>(T*, T, const T*, int64_t);                                         \
  template void mul_backward<T>(T*, T*, const T*, const T*, const T*, int64_t);            \
  template void activation_forward<T>(Activation, T*, const T*, int64_t, T);               \
  template void activation_backward<T, T>(Activation, T*, const T*, const T*, int64_t, T, bool); \
  template void swiglu_forward<T, T>(T*, const T*, const T*, int64_t);                     \
  template void swiglu_backward<T, T>(T*, T*, const T*, const T*, const T*, int64_t, bool); \
  template void gdn_decay_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t);  \
  template void gdn_decay_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, int64_t, int64_t);
INSTANTIATE(float)
INSTANTIATE(double)

// float32 ops on bf16 copies (stored.h)
template void activation_backward<float, bfloat16>(Activation, float*, const bfloat16*, const float*, int64_t, float,
                                                   bool);
template void swiglu_forward<bfloat16, float>(bfloat16*, const float*, const float*, int64_t);
template void swiglu_forward<float, bfloat16>(float*, const bfloat16*, const bfloat16*, int64_t);
template void swiglu_forward<bfloat16, bfloat16>(bfloat16*, const bfloat16*, const bfloat16*, int64_t);
template void swiglu_backward<float, bfloat16>(float*, float*, const bfloat16*, const bfloat16*, const float*, int64_t,
                                               bool);
// ops::swiglu_mlp: float64; float32 products; bf16 products (the copy kept, the operands bf16)
template void swiglu_joined_forward<double, double>(double*, bfloat16*, const double*, int64_t, int64_t);
template void swiglu_joined_forward<float, float>(float*, bfloat16*, const float*, int64_t, int64_t);
template void swiglu_joined_forward<bfloat16, float>(bfloat16*, bfloat16*, const float*, int64_t, int64_t);
template void swiglu_joined_forward<bfloat16, bfloat16>(bfloat16*, bfloat16*, const bfloat16*, int64_t, int64_t);
template void swiglu_joined_forward<float, bfloat16>(float*, bfloat16*, const bfloat16*, int64_t, int64_t);
template void swiglu_joined_backward<double, double, double>(double*, const double*, const double*, int64_t, int64_t);
template void swiglu_joined_backward<float, float, float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_joined_backward<bfloat16, bfloat16, float>(bfloat16*, const bfloat16*, const float*, int64_t,
                                                                int64_t);
template void swiglu_joined_backward<bfloat16, float, float>(bfloat16*, const float*, const float*, int64_t, int64_t);
template void swiglu_joined_backward<float, bfloat16, float>(float*, const bfloat16*, const float*, int64_t, int64_t);

}  // namespace linattn::cpu
