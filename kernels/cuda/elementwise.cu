#include "kernels/cuda/elementwise.h"

#include <string>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/common.cuh"

namespace linattn::cuda {

namespace {

// One thread per element: f(i) for i < n.
template <class F>
__global__ void pointwise_kernel(int64_t n, F f) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// functor: F's name, for the plan (launch_plan.h).
template <class F>
void launch(const std::string& functor, int64_t n, F f) {
  if (n == 0) return;
  LINATTN_LAUNCH_PLAN(elementwise_plan(functor, n), stream(), pointwise_kernel<F>)(n, f);
  LINATTN_CUDA_CHECK_LAUNCH();
}

using act::sigmoid;

struct Add {
  float* y; const float* a; const float* b;
  __device__ void operator()(int64_t i) const { y[i] = a[i] + b[i]; }
};
struct AddInplace {
  float* y; const float* x;
  __device__ void operator()(int64_t i) const { y[i] += x[i]; }
};
struct Mul {
  float* y; const float* a; const float* b;
  __device__ void operator()(int64_t i) const { y[i] = a[i] * b[i]; }
};
struct MulBackward {  // forward: y = a b  =>  da += dy b, db += dy a
  float* da; float* db; const float* a; const float* b; const float* dy;
  __device__ void operator()(int64_t i) const {
    if (da) da[i] += dy[i] * b[i];
    if (db) db[i] += dy[i] * a[i];
  }
};
struct Scale {
  float* y; const float* x; float c;
  __device__ void operator()(int64_t i) const { y[i] = c * x[i]; }
};
struct Axpy {
  float* y; float c; const float* x;
  __device__ void operator()(int64_t i) const { y[i] += c * x[i]; }
};

template <Activation F>
struct ActivationForward {  // y = c f(x)
  float* y; const float* x; float c;
  __device__ void operator()(int64_t i) const { y[i] = c * act::value<F>(x[i]); }
};

// dx += g, or dx = g when `write` (the first writer of dx).
__device__ inline void put(float& dx, float g, bool write) { dx = write ? g : dx + g; }

template <Activation F>
struct ActivationBackward {  // forward: y = c f(x)  =>  dx += (c dy) f'(x)
  float* dx; Floats x; const float* dy; float c; bool write;
  __device__ void operator()(int64_t i) const { put(dx[i], act::gradient<F>(x[i], c * dy[i]), write); }
};

struct SwigluForward {
  FloatsOut y; Floats gate; Floats up;
  __device__ void operator()(int64_t i) const {
    const float g = gate[i];
    y.set(i, g * sigmoid(g) * up[i]);
  }
};
struct SwigluBackward {  // forward: y = silu(g) u  =>  dg += dy u silu'(g), du += dy silu(g)
  float* dgate; float* dup; Floats gate; Floats up; const float* dy; bool write;
  __device__ void operator()(int64_t i) const {
    const float g = gate[i], s = sigmoid(g);
    put(dgate[i], dy[i] * up[i] * s * (1.0f + g * (1.0f - s)), write);
    put(dup[i], dy[i] * (g * s), write);
  }
};
// Over x [rows, 2 cols] = [gate | up], element i = (r, c) of y [rows, cols]: the same math, and the
// bf16 copy of both of x's elements it reads.
struct SwigluJoinedForward {
  FloatsOut y; uint16_t* copy; Floats x; int64_t cols;
  __device__ void operator()(int64_t i) const {
    const int64_t at = (i / cols) * 2 * cols + i % cols;
    const float g = x[at], u = x[at + cols];
    y.set(i, g * sigmoid(g) * u);
    if (copy) copy[at] = bf16_bits_from_float(g), copy[at + cols] = bf16_bits_from_float(u);
  }
};
struct SwigluJoinedBackward {  // dx = [dgate | dup], written
  FloatsOut dx; Floats x; const float* dy; int64_t cols;
  __device__ void operator()(int64_t i) const {
    const int64_t at = (i / cols) * 2 * cols + i % cols;
    const float g = x[at], u = x[at + cols], s = sigmoid(g);
    dx.set(at, dy[i] * u * s * (1.0f + g * (1.0f - s)));
    dx.set(at + cols, dy[i] * (g * s));
  }
};

// Calls launch(n, Functor<F>{args...}) for the activation chosen at run time.
template <template <Activation> class Functor, class... Args>
void launch_activation(const char* functor, Activation f, int64_t n, Args... args) {
  const std::string name = activation_functor(functor, f);
  switch (f) {
    case Activation::silu: return launch(name, n, Functor<Activation::silu>{args...});
    case Activation::sigmoid: return launch(name, n, Functor<Activation::sigmoid>{args...});
    case Activation::logsigmoid: return launch(name, n, Functor<Activation::logsigmoid>{args...});
    case Activation::elu1: return launch(name, n, Functor<Activation::elu1>{args...});
    case Activation::relu: return launch(name, n, Functor<Activation::relu>{args...});
  }
  LINATTN_FAIL("unknown activation ", int(f));
}

}  // namespace

void add_forward(float* y, const float* a, const float* b, int64_t n) { launch("Add", n, Add{y, a, b}); }
void add_inplace(float* y, const float* x, int64_t n) { launch("AddInplace", n, AddInplace{y, x}); }
void mul_forward(float* y, const float* a, const float* b, int64_t n) { launch("Mul", n, Mul{y, a, b}); }
void mul_backward(float* da, float* db, const float* a, const float* b, const float* dy, int64_t n) {
  launch("MulBackward", n, MulBackward{da, db, a, b, dy});
}
void scale_forward(float* y, const float* x, float c, int64_t n) { launch("Scale", n, Scale{y, x, c}); }
void axpy(float* y, float c, const float* x, int64_t n) { launch("Axpy", n, Axpy{y, c, x}); }

void activation_forward(Activation f, float* y, const float* x, int64_t n, float c) {
  launch_activation<ActivationForward>("ActivationForward", f, n, y, x, c);
}
void activation_backward(Activation f, float* dx, Floats x, const float* dy, int64_t n, float c, bool write) {
  launch_activation<ActivationBackward>("ActivationBackward", f, n, dx, x, dy, c, write);
}

void swiglu_forward(FloatsOut y, Floats gate, Floats up, int64_t n) {
  launch("SwigluForward", n, SwigluForward{y, gate, up});
}
void swiglu_backward(float* dgate, float* dup, Floats gate, Floats up, const float* dy, int64_t n, bool write) {
  launch("SwigluBackward", n, SwigluBackward{dgate, dup, gate, up, dy, write});
}
void swiglu_joined_forward(FloatsOut y, uint16_t* copy, Floats x, int64_t rows, int64_t cols) {
  launch("SwigluJoinedForward", rows * cols, SwigluJoinedForward{y, copy, x, cols});
}
void swiglu_joined_backward(FloatsOut dx, Floats x, const float* dy, int64_t rows, int64_t cols) {
  launch("SwigluJoinedBackward", rows * cols, SwigluJoinedBackward{dx, x, dy, cols});
}

}  // namespace linattn::cuda
