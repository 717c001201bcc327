// The backend table (kernels/backend.cpp) walked entry by entry, in the style of ggml's
// test-backend-ops: every entry has cases, and each case is one body written against `Side`, run
// once on the CUDA column (float32 device tensors) and once on the CPU column (float64 host tensors
// holding the same float32 values), after which every output is compared: the forward outputs and,
// for backward entries, every gradient. Gradients and other `+=` outputs start from the same random
// values on both sides, so the accumulation is checked; outputs an entry overwrites start as NaN, so
// an element it leaves unwritten fails.
//
// Sizes are small (the emulation build runs every GPU thread as a fiber) but off the tiles: T not a
// multiple of the chunk (16/32/64) or of attention's 32/64-row tiles, head sizes 32/64/128, grouped
// query heads, sliding windows, documents (one call with the offsets, as the ops make it), optional
// inputs and gradients absent and present, linear attention and GLA with their products in bf16
// and tf32 on the tensor cores, and Mamba2's groups of heads sharing B and C.
//
// CudaBackendOpsCoverage.EveryEntryHasACase fails naming any entry of the table with a CUDA kernel
// and without a case. A mixer's *_saved_size entry is covered by its cases, where each column runs
// with the `saved` buffer it asks for.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/op_support.h"
#include "autograd/segments.h"
#include "kernel_testing.h"
#include "kernels/backend.h"

namespace linattn {
namespace {

using backend::MixerArgs;

// Tolerances, relative to each output's largest reference entry (testing::compare). The reference is
// the CPU column in float64 on the same float32 values, so a tolerance bounds the CUDA column's
// float32 rounding (2^-24 ~ 6e-8 per operation); the bases are those of each entry's own test in
// tests/cuda/.
constexpr double kRounding = 4e-7;     // up to ~6 roundings: add, mul, scale, axpy, bias, adds (elementwise_test)
constexpr double kShortSums = 1e-6;    // expf/log1pf/sincos within 2 ulp plus a few roundings, or sums of a
                                       // few terms: activations, SwiGLU, RoPE, embedding rows, AdamW
constexpr double kSums = 1e-5;         // float32 sums of up to ~1000 terms in another order, within ~100 ulp:
                                       // gemm, bias, norms, conv, gdn_decay, cross-entropy, attention
constexpr double kScans = 1e-4;        // the mixers: a chunk's scores over Dk and the state over the chunks,
                                       // ~1e-6 typically (linear_attn_test, gla_test, deltanet_test)
constexpr double kBf16Mixers = 2e-2;   // linear attention, GLA and DeltaNet with bf16 (tf32) products on the
constexpr double kTf32Mixers = 3e-3;   // tensor cores: ~5u of bf16's u = 2^-8 (6u of tf32's 2^-11), measured
                                       // <= 1.2u (1.7u) (chunk_precision_test, deltanet_test)
constexpr double kFloat64Sum = 1e-12;  // sum_squares: float64 sums of the same float32 squares, in another order

constexpr int32_t kIgnore = -100;  // an ignore index for the cross-entropy cases

// A constant both columns see alike: the CUDA entries round their double arguments to float32.
double f32_exact(double x) { return double(float(x)); }

// One column of a case: the CUDA one on float32 device tensors, or the CPU one on float64 host
// tensors. Both draw their random values from the same seed in the same order, so they hold the
// same (float32-rounded) values.
class Side {
 public:
  Side(Device device, uint64_t seed) : device(device), rng_(seed) {}
  const Device device;

  // Uniform in [lo, hi].
  Tensor input(const Shape& shape, double lo = -1, double hi = 1) { return placed(random_f32(shape, lo, hi), device); }
  // The same, on the host on both sides (entries that take a host tensor too, such as dloss).
  Tensor host_input(const Shape& shape, double lo = -1, double hi = 1) {
    return placed(random_f32(shape, lo, hi), Device::cpu);
  }
  // Rows of the last dim of unit length (the delta rule's keys, as its layer normalizes them).
  Tensor unit_rows(const Shape& shape) {
    Tensor t = testing::random_tensor(shape, rng_);
    double* p = t.data<double>();
    const int64_t d = shape.last();
    for (int64_t r = 0; r < shape.rows(); ++r) {
      double n = 0;
      for (int64_t i = 0; i < d; ++i) n += p[r * d + i] * p[r * d + i];
      for (int64_t i = 0; i < d; ++i) p[r * d + i] /= std::sqrt(n);
    }
    return placed(t.to(DType::f32), device);
  }
  // Token ids uniform in [0, n), each replaced by `ignore` with probability 1/4 when given. On the
  // CUDA side they lie on `where` (its entries take ids on either), on the CPU side on the host.
  Tensor ids(const Shape& shape, int64_t n, Device where, std::optional<int32_t> ignore = {}) {
    Tensor t = Tensor::empty(shape, DType::i32);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const int32_t id = int32_t(rng_.below(uint64_t(n)));
      t.data<int32_t>()[i] = ignore && rng_.below(4) == 0 ? *ignore : id;
    }
    return device == Device::cuda && where == Device::cuda ? testing::on_device(t) : t;
  }
  // An output the entries overwrite: NaN until they do. Compared.
  Tensor output(const char* name, const Shape& shape) {
    Tensor t = Tensor::empty(shape, dtype(), device);
    t.fill_(NAN);
    return compared(name, t);
  }
  // An output the entries accumulate into (+=), from random values. Compared.
  Tensor accumulated(const char* name, const Shape& shape, double lo = -1, double hi = 1) {
    return compared(name, input(shape, lo, hi));
  }
  // Memory the entries need and nobody compares (the chunk forms' saved buffer): zeros.
  Tensor scratch(const Shape& shape) { return Tensor::zeros(shape, dtype(), device); }
  // Given float32 values as this side holds them (float64 on the CPU side), on its device.
  Tensor values(const std::vector<float>& v) {
    Tensor t = Tensor::empty({int64_t(v.size())}, DType::f32);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
    return placed(t, device);
  }
  // Float64 numbers both columns take as they are (the step's control numbers, AdamW's decay
  // ranges), on this side's device; `name`: compared after the entries wrote them.
  Tensor exact(const std::vector<double>& v, const char* name = nullptr) {
    Tensor t = Tensor::empty({int64_t(v.size())}, DType::f64);
    for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
    if (device == Device::cuda) t = testing::on_device(t);
    return name ? compared(name, t) : t;
  }
  // A number an entry returns (a count, a sum). Compared.
  void result(const char* name, double value) {
    Tensor t = Tensor::empty({1}, DType::f64);
    t.data<double>()[0] = value;
    outputs_.emplace_back(name, t);
  }

  // Every compared output, in the order the body named them, in float64 on the host.
  std::vector<std::pair<std::string, Tensor>> results() const {
    if (device == Device::cuda) testing::device_sync();
    std::vector<std::pair<std::string, Tensor>> r;
    for (const auto& [name, t] : outputs_)
      r.emplace_back(name, (t.device() == Device::cpu ? t : t.to(Device::cpu)).to(DType::f64));
    return r;
  }

 private:
  DType dtype() const { return device == Device::cuda ? DType::f32 : DType::f64; }
  Tensor random_f32(const Shape& shape, double lo, double hi) {
    return testing::random_tensor(shape, rng_, lo, hi, DType::f32);
  }
  // A float32 host tensor as this side holds it: float64 on the CPU side; on the CUDA side on `where`.
  Tensor placed(const Tensor& f32, Device where) const {
    if (device == Device::cpu) return f32.to(DType::f64);
    return where == Device::cuda ? testing::on_device(f32) : f32;
  }
  Tensor compared(const char* name, const Tensor& t) {
    outputs_.emplace_back(name, t);
    return t;
  }

  Rng rng_;
  std::vector<std::pair<std::string, Tensor>> outputs_;
};

struct Case {
  std::vector<std::string> entries;  // the table entries the body calls
  std::string what;                  // the sizes and options
  double tol;                        // relative to each output's largest reference entry
  std::function<void(Side&)> body;
};

std::string label(const Case& c) {
  std::string s;
  for (const std::string& e : c.entries) s += (s.empty() ? "" : " + ") + e;
  return s + ", case '" + c.what + "'";
}
void PrintTo(const Case& c, std::ostream* os) { *os << label(c); }

std::string str(int64_t x) { return std::to_string(x); }

// ---- documents -------------------------------------------------------------------------------------

// Documents at `starts` (fla's cu_seqlens: the start of every document in the B * T positions, then
// B * T; empty: the B rows).
std::string documents_str(const std::vector<int64_t>& starts) {
  if (starts.empty()) return "";
  std::string s = " documents at";
  for (int64_t x : starts) s.append(" ").append(str(x));
  return s;
}

// ---- pointwise, optimizer ----------------------------------------------------------------------------

void add_pointwise_cases(std::vector<Case>& cases) {
  // One element, and several thread blocks with a partial last one (and n % 4 != 0).
  for (int64_t n : {int64_t(1), int64_t(1031)}) {
    const Shape s{n};
    const std::string what = "n=" + str(n);
    cases.push_back({{"add"}, what, kRounding, [s](Side& x) {
                       Tensor a = x.input(s), b = x.input(s);
                       backend::add(x.device, x.output("y", s), a, b);
                     }});
    cases.push_back({{"add_inplace"}, what, kRounding, [s](Side& x) {
                       Tensor y = x.accumulated("y", s), a = x.input(s);
                       backend::add_inplace(x.device, y, a);
                     }});
    cases.push_back({{"scale_forward"}, what, kRounding, [s](Side& x) {
                       Tensor a = x.input(s);
                       backend::scale_forward(x.device, x.output("y", s), a, f32_exact(-0.37));
                     }});
    cases.push_back({{"axpy"}, what, kRounding, [s](Side& x) {
                       Tensor y = x.accumulated("y", s), a = x.input(s);
                       backend::axpy(x.device, y, f32_exact(1.7), a);
                     }});
    cases.push_back({{"scale_inplace"}, what, kRounding, [s](Side& x) {
                       backend::scale_inplace(x.device, x.accumulated("x", s), f32_exact(0.37));
                     }});
    cases.push_back({{"sum_squares"}, what, kFloat64Sum, [s](Side& x) {
                       Tensor a = x.input(s, -2, 2);
                       x.result("sum", backend::sum_squares(x.device, a));
                     }});
    // Both gradients, then each alone (the other one undefined: nobody needs it).
    for (int grads : {3, 1, 2})
      cases.push_back({{"mul_forward", "mul_backward"},
                       what + (grads & 1 ? " da" : "") + (grads & 2 ? " db" : ""),
                       kRounding,
                       [s, grads](Side& x) {
                         Tensor a = x.input(s), b = x.input(s);
                         backend::mul_forward(x.device, x.output("y", s), a, b);
                         Tensor da = grads & 1 ? x.accumulated("da", s) : Tensor();
                         Tensor db = grads & 2 ? x.accumulated("db", s) : Tensor();
                         Tensor dy = x.input(s);
                         backend::mul_backward(x.device, da, db, a, b, dy);
                       }});
    for (Activation f :
         {Activation::silu, Activation::sigmoid, Activation::logsigmoid, Activation::elu1, Activation::relu})
      cases.push_back({{"activation_forward", "activation_backward"},
                       what + " " + activation_name(f),
                       kShortSums,
                       [s, f](Side& x) {
                         // [-20, 20]: both branches of logsigmoid and elu1, the saturated ends of sigmoid
                         Tensor a = x.input(s, -20, 20);
                         backend::activation_forward(x.device, f, x.output("y", s), a, 1.0);
                         Tensor dx = x.accumulated("dx", s), dy = x.input(s);
                         backend::activation_backward(x.device, f, dx, a, dy, 1.0, false);
                         // written, the first writer: what was there (NaN) is not read; and scaled
                         // (GLA's gate normalizer, 1/16)
                         backend::activation_backward(x.device, f, x.output("dx written", s), a, dy, 1.0, true);
                         backend::activation_forward(x.device, f, x.output("y scaled", s), a, 0.0625);
                         backend::activation_backward(x.device, f, x.accumulated("dx scaled", s), a, dy, 0.0625,
                                                      false);
                       }});
    cases.push_back({{"swiglu_forward", "swiglu_backward"}, what, kShortSums, [s](Side& x) {
                       Tensor gate = x.input(s, -8, 8), up = x.input(s, -2, 2);
                       backend::swiglu_forward(x.device, x.output("y", s), gate, up);
                       Tensor dgate = x.accumulated("dgate", s), dup = x.accumulated("dup", s), dy = x.input(s);
                       backend::swiglu_backward(x.device, dgate, dup, gate, up, dy, false);
                       backend::swiglu_backward(x.device, x.output("dgate written", s), x.output("dup written", s),
                                                gate, up, dy, true);
                     }});
  }
  // SwiGLU over rows that hold gate and up side by side: one element, and a partial last block
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 150}}) {
    const Shape joined{rows, 2 * cols}, half{rows, cols};
    cases.push_back({{"swiglu_joined_forward", "swiglu_joined_backward"},
                     "rows=" + str(rows) + " cols=" + str(cols),
                     kShortSums,
                     [joined, half](Side& x) {
                       Tensor gate_up = x.input(joined, -8, 8), dy = x.input(half);
                       backend::swiglu_joined_forward(x.device, x.output("y", half), Tensor(), gate_up);
                       backend::swiglu_joined_backward(x.device, x.output("d[gate | up]", joined), gate_up, dy);
                     }});
  }
  // AdamW on a flat buffer in one call: step 2 at lr 0.05, the constants as AdamW::step makes them;
  // weight decay on none, on all, and on two ranges (one ending inside the buffer, one at its end);
  // the gradients clipped or not; the update skipped (every buffer as it was).
  namespace slot = step_control;
  struct AdamCase {
    std::vector<double> ranges;
    double clip;
    bool skip;
  };
  for (const AdamCase& a : {AdamCase{{}, 1.0, false}, AdamCase{{0, 1031}, 1.0, false},
                            AdamCase{{5, 300, 700, 1031}, f32_exact(0.37), false},
                            AdamCase{{5, 300, 700, 1031}, f32_exact(0.37), true}}) {
    const Shape s{1031};
    const backend::AdamWStep step{.beta1 = f32_exact(0.9),
                                  .beta2 = f32_exact(0.95),
                                  .eps = f32_exact(1e-8)};
    std::vector<double> control(slot::size, 0.0);
    control[slot::step_size] = f32_exact(0.05 / (1 - 0.9 * 0.9));
    control[slot::rbc2] = f32_exact(1 / (1 - 0.95 * 0.95));
    control[slot::decay] = f32_exact(0.05 * 1e-3);
    control[slot::clip] = a.clip;
    control[slot::skip] = a.skip;
    cases.push_back({{"adamw_step"},
                     "n=1031 decay ranges " + str(int64_t(a.ranges.size() / 2)) + " clip " + std::to_string(a.clip) +
                         (a.skip ? " skipped" : ""),
                     kShortSums, [s, step, a, control](Side& x) {
                       Tensor w = x.accumulated("w", s), g = x.input(s);
                       Tensor m = x.accumulated("m", s, -0.1, 0.1), v = x.accumulated("v", s, 0, 0.1);
                       backend::adamw_step(x.device, w, Tensor(), g, m, v, x.exact(a.ranges), x.exact(control), step);
                     }});
  }
  // The step's control numbers: the mean loss and its flag (finite, NaN, an infinity); the norm, the
  // clip factor (no clipping, clipping, a norm under the bound) and the skip flag (set by a bad loss).
  for (float bad_loss : {0.0f, NAN, -INFINITY})
    cases.push_back({{"step_loss"}, "losses 3, one of them " + std::to_string(bad_loss), kShortSums,
                     [bad_loss](Side& x) {
                       Tensor losses = x.values({2.5f, bad_loss == 0 ? 3.25f : bad_loss, 1.125f});
                       Tensor control = x.exact(std::vector<double>(slot::size, 0.0));
                       backend::step_loss(x.device, control, losses);
                       const Tensor c = control.device() == Device::cpu ? control : control.to(Device::cpu);
                       const double loss = c.data<double>()[slot::loss];
                       // a non-finite loss is compared by kind (NaN against NaN would count as an error)
                       x.result("loss", bad_loss == 0 ? loss : std::isnan(loss) ? 1.0 : std::isinf(loss) ? 2.0 : 3.0);
                       x.result("bad", c.data<double>()[slot::bad]);
                     }});
  for (double max_norm : {0.0, 1.0, 1e6})
    for (double bad : {0.0, 1.0}) {
      std::vector<double> control(slot::size, 0.0);
      control[slot::bad] = bad;
      cases.push_back({{"step_control"}, "n=1031 max_norm " + std::to_string(max_norm) + (bad ? " bad loss" : ""),
                       kFloat64Sum, [max_norm, control](Side& x) {
                         Tensor g = x.input({1031}, -2, 2);
                         backend::step_control(x.device, x.exact(control, "control"), g, max_norm);
                       }});
    }
}

// Gated DeltaNet's log-decay: x [rows, H]; grads bit 1 dx, bit 2 dA_log, bit 4 ddt_bias (absent ones
// undefined, as autograd passes gradients nobody needs).
void add_gdn_decay_cases(std::vector<Case>& cases) {
  struct Sizes {
    int64_t B, T, H;
    int grads;
  };
  // One token and one head; rows off the 16 lanes and the ~256-row chunks; more heads than a 32-head tile.
  for (Sizes z : {Sizes{1, 1, 1, 7}, Sizes{2, 7, 4, 7}, Sizes{2, 150, 33, 7}, Sizes{2, 7, 4, 2}, Sizes{2, 7, 4, 4},
                  Sizes{2, 7, 4, 1}}) {
    const std::string what = "B=" + str(z.B) + " T=" + str(z.T) + " H=" + str(z.H) + (z.grads & 1 ? " dx" : "") +
                             (z.grads & 2 ? " dA_log" : "") + (z.grads & 4 ? " ddt_bias" : "");
    cases.push_back({{"gdn_decay_forward", "gdn_decay_backward"}, what, kSums, [z](Side& x) {
                       const Shape s{z.B, z.T, z.H}, h{z.H};
                       // x across both branches of softplus; A_log as fla initializes it (log 1..16)
                       Tensor in = x.input(s, -8, 8), A_log = x.input(h, 0, 2.77), dt_bias = x.input(h, -4, 1);
                       backend::gdn_decay_forward(x.device, x.output("a", s), in, A_log, dt_bias);
                       Tensor dx = z.grads & 1 ? x.accumulated("dx", s) : Tensor();
                       Tensor dA = z.grads & 2 ? x.accumulated("dA_log", h) : Tensor();
                       Tensor ddt = z.grads & 4 ? x.accumulated("ddt_bias", h) : Tensor();
                       Tensor da = x.input(s);
                       backend::gdn_decay_backward(x.device, dx, dA, ddt, in, A_log, dt_bias, da);
                     }});
  }
}

// ---- matrix products, bias, norms -----------------------------------------------------------------------

void add_gemm_cases(std::vector<Case>& cases) {
  struct Sizes {
    bool ta, tb;
    int64_t M, N, K;
    double alpha, beta;
  };
  std::vector<Sizes> sizes;
  // Every transpose case on sizes off any tile, accumulating into C; one element; and beta = 0 (C is
  // then not read: it starts as NaN) at a Linear layer's shape.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) sizes.push_back({ta, tb, 33, 17, 70, 0.75, -0.5});
  sizes.push_back({false, false, 1, 1, 1, 1.0, 1.0});
  sizes.push_back({false, true, 65, 129, 40, 1.0, 0.0});
  for (Sizes z : sizes) {
    const std::string what = std::string(z.ta ? "A^T" : "A") + (z.tb ? " B^T" : " B") + " M=" + str(z.M) +
                             " N=" + str(z.N) + " K=" + str(z.K) + " alpha=" + std::to_string(z.alpha) +
                             " beta=" + std::to_string(z.beta);
    cases.push_back({{"gemm"}, what, kSums, [z](Side& x) {
                       backend::set_matmul_precision(MatmulPrecision::f32);  // TF32 and bf16 have their own tests
                       Tensor A = x.input(z.ta ? Shape{z.K, z.M} : Shape{z.M, z.K});
                       Tensor B = x.input(z.tb ? Shape{z.N, z.K} : Shape{z.K, z.N});
                       Tensor C = z.beta == 0 ? x.output("C", {z.M, z.N}) : x.accumulated("C", {z.M, z.N});
                       backend::gemm(x.device, z.ta, z.tb, z.M, z.N, z.K, z.alpha, A, B, z.beta, C);
                     }});
  }
  // bf16 products: the float32 inputs rounded to bf16 (CUDA: the convert entry, whose output comes
  // back through convert to be compared too; CPU: the same rounding of the float64 values), then the
  // gemm entry on bf16 operands against float64 on the rounded values: float32 accumulation, kSums.
  for (Sizes z : {sizes[0], sizes[3], sizes[5]}) {
    const std::string what = std::string(z.ta ? "A^T" : "A") + (z.tb ? " B^T" : " B") + " M=" + str(z.M) +
                             " N=" + str(z.N) + " K=" + str(z.K) + " bf16 operands";
    cases.push_back({{"convert", "gemm"}, what, kSums, [z](Side& x) {
                       auto as_bf16 = [&x](const Tensor& t, const char* name) {
                         const Tensor seen = x.output(name, t.shape());
                         if (x.device == Device::cpu) {  // float64 holding float32 values
                           for (int64_t i = 0; i < t.numel(); ++i)
                             seen.data<double>()[i] = to_float(from_float(float(t.data<double>()[i])));
                           return seen;
                         }
                         Tensor bits = Tensor::empty(t.shape(), DType::bf16, x.device);
                         backend::convert(x.device, bits, t);
                         backend::convert(x.device, seen, bits);
                         return bits;
                       };
                       const Tensor A = as_bf16(x.input(z.ta ? Shape{z.K, z.M} : Shape{z.M, z.K}), "A in bf16");
                       const Tensor B = as_bf16(x.input(z.tb ? Shape{z.N, z.K} : Shape{z.K, z.N}), "B in bf16");
                       Tensor C = z.beta == 0 ? x.output("C", {z.M, z.N}) : x.accumulated("C", {z.M, z.N});
                       backend::gemm(x.device, z.ta, z.tb, z.M, z.N, z.K, z.alpha, A, B, z.beta, C);
                     }});
  }
}

void add_bias_and_norm_cases(std::vector<Case>& cases) {
  // bias: one element; rows and columns off the blocks; more rows than one ~256-row chunk.
  for (Shape s : {Shape{1, 1}, Shape{37, 70}, Shape{2, 150, 37}})
    cases.push_back({{"bias_forward", "bias_backward"}, s.str(), kSums, [s](Side& x) {
                       const Shape b{s.last()};
                       Tensor y = x.accumulated("y", s), bias = x.input(b);
                       backend::bias_forward(x.device, y, bias);
                       Tensor dbias = x.accumulated("dbias", b), dy = x.input(s);
                       backend::bias_backward(x.device, dbias, dy);
                     }});
  // the bias and an activation in one pass (ops::linear_activation), scaled as GLA's gate; z is
  // written in place (the bias added); [-20, 20]: both branches of logsigmoid and elu1
  for (Shape s : {Shape{37, 70}, Shape{2, 150, 37}})
    for (Activation f :
         {Activation::silu, Activation::sigmoid, Activation::logsigmoid, Activation::elu1, Activation::relu})
      cases.push_back({{"bias_activation_forward", "bias_activation_backward"}, s.str() + " " + activation_name(f),
                       kSums, [s, f](Side& x) {
                         const Shape b{s.last()};
                         Tensor z = x.accumulated("z", s, -20, 20), bias = x.input(b);
                         backend::bias_activation_forward(x.device, f, x.output("y", s), Tensor(), z, bias, 0.0625);
                         Tensor dbias = x.accumulated("dbias", b), dy = x.input(s);
                         backend::bias_activation_backward(x.device, f, x.output("dz", s), dbias, z, dy, 0.0625);
                       }});
  // column blocks (ops::linears): one block, and several of odd widths over a batch of rows; split's
  // parts overwritten, join's whole overwritten (bf16 copies: tests/cuda/kept_bf16_test.cpp)
  for (std::vector<int64_t> widths : {std::vector<int64_t>{5}, std::vector<int64_t>{3, 17, 1, 40, 2}})
    cases.push_back({{"split_columns", "join_columns"}, std::to_string(widths.size()) + " blocks", kRounding,
                     [widths](Side& x) {
                       const Shape rows{2, 37};
                       int64_t C = 0;
                       for (int64_t w : widths) C += w;
                       const std::vector<const char*> names = {"part0", "part1", "part2", "part3", "part4"};
                       std::vector<Tensor> parts, grads;
                       for (size_t i = 0; i < widths.size(); ++i) {
                         parts.push_back(x.output(names[i], rows.appended(widths[i])));
                         grads.push_back(x.input(rows.appended(widths[i])));
                       }
                       backend::split_columns(x.device, parts, {}, x.input(rows.appended(C)));
                       backend::join_columns(x.device, x.output("joined", rows.appended(C)), grads);
                     }});
  // norms: D off 32 and the head sizes 64/128; rows past one chunk; rmsnorm's dw absent and present.
  const double eps = f32_exact(1e-6);
  struct Rms {
    Shape s;
    bool dw;
  };
  for (const Rms& z : {Rms{{2, 7, 37}, true}, Rms{{5, 128}, false}, Rms{{300, 64}, true}})
    cases.push_back({{"rmsnorm_forward", "rmsnorm_backward"},
                     z.s.str() + (z.dw ? " dw" : " no dw"),
                     kSums,
                     [s = z.s, dw = z.dw, eps](Side& x) {
                       const Shape rows{s.rows()}, d{s.last()};
                       Tensor in = x.input(s, -2, 2), w = x.input(d, 0.5, 1.5);
                       Tensor rstd = x.output("rstd", rows);
                       backend::rmsnorm_forward(x.device, x.output("y", s), {}, {}, rstd, in, w, eps);
                       Tensor dx = x.accumulated("dx", s), dwt = dw ? x.accumulated("dw", d) : Tensor();
                       Tensor dy = x.input(s);
                       backend::rmsnorm_backward(x.device, dx, Tensor(), dwt, in, w, rstd, dy, dx);
                     }});
  // the residual sum and its norm in one pass; the backward's dx written (no prior) and out of place
  for (const Rms& z : {Rms{{2, 7, 37}, true}, Rms{{300, 64}, false}})
    cases.push_back({{"add_rmsnorm_forward", "rmsnorm_backward"},
                     z.s.str() + (z.dw ? " dw" : " no dw"),
                     kSums,
                     [s = z.s, dw = z.dw, eps](Side& x) {
                       const Shape rows{s.rows()}, d{s.last()};
                       Tensor a = x.input(s, -2, 2), b = x.input(s, -1, 1), w = x.input(d, 0.5, 1.5);
                       Tensor sum = x.output("s", s), rstd = x.output("rstd", rows);
                       backend::add_rmsnorm_forward(x.device, sum, x.output("y", s), {}, {}, rstd, a, b, w, eps);
                       Tensor dwt = dw ? x.accumulated("dw", d) : Tensor(), dy = x.input(s), prior = x.input(s);
                       backend::rmsnorm_backward(x.device, x.output("dx written", s), Tensor(), dwt, sum, w, rstd, dy,
                                                 {});
                       backend::rmsnorm_backward(x.device, x.output("dx out of place", s), Tensor(), Tensor(), sum,
                                                 w, rstd, dy, prior);
                     }});
  // the swish-gated norm of a mixer's output: rows past one chunk and D off 32; the backward added
  // into (with dw) and written (without)
  for (Shape s : {Shape{2, 7, 37}, Shape{300, 64}})
    cases.push_back({{"rmsnorm_gate_forward", "rmsnorm_gate_backward"}, s.str(), kSums, [s, eps](Side& x) {
                       const Shape rows{s.rows()}, d{s.last()};
                       Tensor in = x.input(s, -2, 2), gate = x.input(s, -3, 3), w = x.input(d, 0.5, 1.5);
                       Tensor rstd = x.output("rstd", rows);
                       backend::rmsnorm_gate_forward(x.device, x.output("h", s), {}, rstd, in, gate, w, eps, false);
                       backend::rmsnorm_gate_forward(x.device, x.output("h again", s), {}, rstd, in, gate, w, eps,
                                                     true);
                       Tensor dh = x.input(s);
                       backend::rmsnorm_gate_backward(x.device, x.accumulated("dx", s), x.accumulated("dgate", s),
                                                      x.accumulated("dw", d), in, gate, w, rstd, dh, false);
                       backend::rmsnorm_gate_backward(x.device, x.output("dx written", s),
                                                      x.output("dgate written", s), Tensor(), in, gate, w, rstd, dh,
                                                      true);
                     }});
  for (Shape s : {Shape{2, 7, 37}, Shape{4, 64}, Shape{300, 32}})
    cases.push_back({{"l2norm_forward", "l2norm_backward"}, s.str(), kSums, [s, eps](Side& x) {
                       Tensor in = x.input(s), y = x.output("y", s), r = x.output("r", {s.rows()});
                       backend::l2norm_forward(x.device, y, r, in, eps);
                       Tensor dx = x.accumulated("dx", s), dy = x.input(s);
                       backend::l2norm_backward(x.device, dx, y, r, dy);
                     }});
}

// ---- embedding, convolution, loss -------------------------------------------------------------------

void add_embedding_conv_loss_cases(std::vector<Case>& cases) {
  // Ids on the host and on the device; fewer rows than tokens, so rows repeat in the backward.
  struct Emb {
    int64_t V, D;
    Shape ids;
    Device where;
  };
  for (Emb z : {Emb{13, 37, {2, 19}, Device::cpu}, Emb{50, 64, {3, 11}, Device::cuda}})
    cases.push_back({{"embedding_forward", "embedding_backward"},
                     "V=" + str(z.V) + " D=" + str(z.D) + " ids " + z.ids.str() + " on the " + device_name(z.where),
                     kShortSums,
                     [z](Side& x) {
                       const Shape ys{z.ids[0], z.ids[1], z.D};
                       Tensor ids = x.ids(z.ids, z.V, z.where), table = x.input({z.V, z.D});
                       backend::embedding_forward(x.device, x.output("y", ys), ids, table);
                       Tensor dtable = x.accumulated("dtable", {z.V, z.D}), dy = x.input(ys);
                       backend::embedding_backward(x.device, dtable, ids, dy);
                     }});

  // Short convolution: x [B, T, C], w [C, W]; bias absent and present; documents.
  struct Conv {
    int64_t B, T, C, W;
    bool bias;
    std::vector<int64_t> docs;
  };
  for (const Conv& z :
       {Conv{2, 13, 37, 4, true, {}}, Conv{1, 70, 64, 3, false, {}}, Conv{2, 11, 24, 4, true, {0, 4, 11, 15, 22}}})
    cases.push_back({{"short_conv_forward", "short_conv_backward"},
                     "B=" + str(z.B) + " T=" + str(z.T) + " C=" + str(z.C) + " W=" + str(z.W) +
                         (z.bias ? " bias" : " no bias") + documents_str(z.docs),
                     kSums,
                     [z](Side& x) {
                       const Shape s{z.B, z.T, z.C}, ws{z.C, z.W}, bs{z.C};
                       Tensor in = x.input(s), w = x.input(ws), bias = z.bias ? x.input(bs) : Tensor();
                       Tensor y = x.output("y", s), table;
                       const Sequences seqs = ops::Segments{z.docs}.sequences(x.device, table);
                       backend::short_conv_forward(x.device, y, in, w, bias, seqs);
                       Tensor dx = x.accumulated("dx", s), dw = x.accumulated("dw", ws);
                       Tensor dbias = z.bias ? x.accumulated("dbias", bs) : Tensor();
                       Tensor dy = x.input(s);
                       backend::short_conv_backward(x.device, dx, dw, dbias, in, w, dy, seqs);
                     }});

  // Cross-entropy: rows of [B, T] positions, some ignored; targets and dloss on the host and the device.
  struct Loss {
    Shape rows;
    int64_t V;
    Device where;
  };
  for (Loss z : {Loss{{9}, 37, Device::cpu}, Loss{{2, 10}, 300, Device::cuda}})
    cases.push_back({{"cross_entropy_forward", "cross_entropy_backward", "cross_entropy_forward_backward"},
                     "rows " + z.rows.str() + " V=" + str(z.V) + " targets and dloss on the " + device_name(z.where),
                     kSums,
                     [z](Side& x) {
                       Shape ls = z.rows.ndim() == 1 ? Shape{z.rows[0], z.V} : Shape{z.rows[0], z.rows[1], z.V};
                       Tensor logits = x.input(ls, -3, 3), targets = x.ids(z.rows, z.V, z.where, kIgnore);
                       Tensor loss = x.output("loss", {1}), lse = x.output("lse", {z.rows.numel()});
                       const int64_t count =
                           backend::cross_entropy_forward(x.device, loss, lse, logits, targets, kIgnore);
                       x.result("count", double(count));
                       // dlogits' increments are dloss / count * (softmax - onehot), ~0.01: start it as small
                       Tensor dlogits = x.accumulated("dlogits", ls, -0.01, 0.01);
                       Tensor dloss = z.where == Device::cuda ? x.input({1}, 0.5, 2) : x.host_input({1}, 0.5, 2);
                       backend::cross_entropy_backward(x.device, dlogits, logits, lse, targets, dloss, count, kIgnore,
                                                       false);
                       // written: the ignored rows too (to 0), nothing read of what was there (NaN)
                       backend::cross_entropy_backward(x.device, x.output("dlogits written", ls), logits, lse, targets,
                                                       dloss, count, kIgnore, true);
                       // both in one call, for the mean over count rows
                       Tensor loss2 = x.output("loss of both", {1}), lse2 = x.output("lse of both", {z.rows.numel()});
                       x.result("count of both",
                                double(backend::cross_entropy_forward_backward(
                                    x.device, loss2, lse2, x.output("dlogits of both", ls), logits, targets, dloss,
                                    count, kIgnore)));
                     }});
}

// ---- attention and positions --------------------------------------------------------------------------

void add_attention_cases(std::vector<Case>& cases) {
  struct Att {
    int64_t B, T, H, Hkv, dk, dv, window;
    std::vector<int64_t> docs;
  };
  // T off the 64-key and 32/64-query tiles; head sizes 32/64/128 and dk != dv; GQA ratios 1, 2, 4;
  // global and sliding windows; documents (whole rows sharing a call, one-token documents).
  const std::vector<Att> all = {
      {1, 70, 2, 2, 32, 32, 0, {}},
      {1, 70, 4, 2, 64, 64, 16, {}},
      {1, 67, 4, 1, 128, 128, 0, {}},
      {2, 40, 2, 1, 64, 32, 7, {}},
      {2, 37, 4, 2, 64, 64, 0, {0, 10, 11, 37, 60, 74}},
      {3, 20, 2, 1, 32, 32, 5, {0, 20, 40, 47, 60}},
  };
  for (const Att& z : all) {
    const std::string what = "B=" + str(z.B) + " T=" + str(z.T) + " H=" + str(z.H) + " Hkv=" + str(z.Hkv) +
                             " dk=" + str(z.dk) + " dv=" + str(z.dv) +
                             (z.window ? " window=" + str(z.window) : " global") + documents_str(z.docs);
    cases.push_back({{"attention_forward", "attention_backward"}, what, kSums, [z](Side& x) {
                       const Shape qs{z.B, z.T, z.H, z.dk}, ks{z.B, z.T, z.Hkv, z.dk}, vs{z.B, z.T, z.Hkv, z.dv},
                           os{z.B, z.T, z.H, z.dv};
                       const double scale = f32_exact(1 / std::sqrt(double(z.dk)));
                       Tensor q = x.input(qs), k = x.input(ks), v = x.input(vs);
                       Tensor o = x.output("o", os), lse = x.output("lse", {z.B, z.H, z.T}), table;
                       const Sequences seqs = ops::Segments{z.docs}.sequences(x.device, table);
                       backend::attention_forward(x.device, o, lse, q, k, v, z.window, scale, seqs);
                       Tensor dq = x.accumulated("dq", qs), dk = x.accumulated("dk", ks), dv = x.accumulated("dv", vs);
                       Tensor dO = x.input(os);
                       backend::attention_backward(x.device, dq, dk, dv, q, k, v, o, lse, dO, z.window, scale, seqs,
                                                   false);
                     }});
  }

  struct Rope {
    int64_t B, T, H, d, offset;
    std::vector<int64_t> docs;
  };
  // Head sizes 32/64/128, a decoding offset (which only each row's first document gets), documents.
  for (const Rope& z : {Rope{2, 13, 3, 32, 0, {}}, Rope{1, 9, 2, 64, 5, {}}, Rope{1, 5, 2, 128, 0, {}},
                        Rope{2, 11, 2, 32, 3, {0, 4, 11, 15, 22}}})
    cases.push_back(
        {{"rope_forward", "rope_backward"},
         "B=" + str(z.B) + " T=" + str(z.T) + " H=" + str(z.H) + " d=" + str(z.d) + " offset=" + str(z.offset) +
             documents_str(z.docs),
         kShortSums,
         [z](Side& x) {
           const Shape s{z.B, z.T, z.H, z.d};
           const double theta = 10000;
           Tensor in = x.input(s), y = x.output("y", s), table;
           const Sequences seqs = ops::Segments{z.docs}.sequences(x.device, table);
           backend::rope_forward(x.device, y, in, z.offset, theta, seqs);
           Tensor dx = x.accumulated("dx", s), dy = x.input(s);
           backend::rope_backward(x.device, dx, dy, z.offset, theta, seqs);
         }});
}

// ---- token mixers ---------------------------------------------------------------------------------------

enum class MixerKind { linear_attention, gla, deltanet, gated_deltanet };

struct MixerCase {
  MixerKind kind;
  int64_t B, T, H, Dk, Dv;
  int64_t chunk;    // 0: the recurrent form
  bool h0;          // initial state (and z0, normalized) and its gradient
  bool dht = true;  // an upstream gradient on the final state (and zt, normalized)
  std::vector<int64_t> docs = {};
  FeatureMap phi = FeatureMap::identity;  // linear attention only
  bool normalize = false;                 // linear attention only
  MatmulPrecision precision = MatmulPrecision::f32;  // of the CUDA column's products (the CPU's ignore it)

  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) +
           " Dk=" + std::to_string(Dk) + " Dv=" + std::to_string(Dv) +
           (chunk ? " chunk=" + std::to_string(chunk) : std::string(" recurrent")) + (h0 ? " h0" : " no h0") +
           (dht ? " dht" : " no dht") +
           (kind == MixerKind::linear_attention ? " phi=" + std::to_string(int(phi)) : "") +
           (normalize ? " normalized" : "") + documents_str(docs) +
           (precision == MatmulPrecision::f32 ? "" : std::string(" ") + matmul_precision_name(precision));
  }
};

void run_mixer(Side& x, const MixerCase& c) {
  using K = MixerKind;
  struct PrecisionScope {  // backend::matmul_precision() is process-wide: float32 again after the case
    explicit PrecisionScope(MatmulPrecision p) { backend::set_matmul_precision(p); }
    ~PrecisionScope() { backend::set_matmul_precision(MatmulPrecision::f32); }
  } precision(c.precision);
  const bool delta = c.kind == K::deltanet || c.kind == K::gated_deltanet;
  const auto& forward = c.kind == K::linear_attention ? backend::linear_attention_forward
                        : c.kind == K::gla            ? backend::gla_forward
                                                      : backend::delta_rule_forward;
  const auto& backward = c.kind == K::linear_attention ? backend::linear_attention_backward
                         : c.kind == K::gla            ? backend::gla_backward
                                                       : backend::delta_rule_backward;
  const auto& saved_size = c.kind == K::linear_attention ? backend::linear_attention_saved_size
                           : c.kind == K::gla            ? backend::gla_saved_size
                                                         : backend::delta_rule_saved_size;
  const Shape qk{c.B, c.T, c.H, c.Dk}, vo{c.B, c.T, c.H, c.Dv}, st{c.B, c.H, c.Dk, c.Dv}, z{c.B, c.H, c.Dk},
      bth{c.B, c.T, c.H};
  MixerArgs a;
  a.B = c.B, a.T = c.T, a.H = c.H, a.Dk = c.Dk, a.Dv = c.Dv;
  a.scale = f32_exact(1 / std::sqrt(double(c.Dk)));
  a.chunk = c.chunk > 0, a.chunk_size = c.chunk > 0 ? c.chunk : 64;
  a.phi = c.phi, a.normalize = c.normalize;
  a.q = x.input(qk);
  a.k = delta ? x.unit_rows(qk) : x.input(qk);
  a.v = x.input(vo);
  if (c.kind == K::gla) a.gate = x.input(qk, -3, 0);  // log-gates
  if (delta) a.gate = x.input(bth, 0.05, 0.95);       // beta
  if (c.kind == K::gated_deltanet) a.decay = x.input(bth, -1, -0.01);
  if (c.h0) a.h0 = x.input(st);
  if (c.h0 && c.normalize) a.z0 = x.input(z, 0.5, 1.5);
  a.o = x.output("o", vo);
  a.ht = x.output("ht", st);
  if (c.normalize) a.zt = x.output("zt", z);

  Tensor table;  // the documents, one call over the batch as autograd makes it
  a.seqs = ops::Segments{c.docs}.sequences(x.device, table);
  if (a.chunk) a.saved = x.scratch({saved_size(x.device, a)});  // each column's own size (CUDA's LA/GLA: 0)
  forward(x.device, a);

  a.dq = x.accumulated("dq", qk), a.dk = x.accumulated("dk", qk), a.dv = x.accumulated("dv", vo);
  if (a.gate.defined()) a.dgate = x.accumulated(delta ? "dbeta" : "dg", a.gate.shape());
  if (a.decay.defined()) a.ddecay = x.accumulated("da", bth);
  if (a.h0.defined()) a.dh0 = x.accumulated("dh0", st);
  if (a.z0.defined()) a.dz0 = x.accumulated("dz0", z);
  a.dO = x.input(vo);
  if (c.dht) a.dht = x.input(st);
  if (c.dht && c.normalize) a.dzt = x.input(z);
  backward(x.device, a);
}

void add_mixer_cases(std::vector<Case>& cases) {
  using K = MixerKind;
  const std::vector<int64_t> docs23 = {0, 9, 23, 24, 40, 46};  // B = 2, T = 23: a one-token document
  const std::vector<int64_t> rows20 = {0, 20, 40, 47, 60};     // B = 3, T = 20: two whole rows share a call
  // T off the chunk (16/32/64), head sizes 32/64/128 and Dk != Dv, the recurrent form, h0 and dht
  // absent and present, documents; per kind its options (feature maps, the normalized form, gates).
  const std::vector<MixerCase> all = {
      {K::linear_attention, 1, 37, 2, 32, 32, 16, true},
      {K::linear_attention, 2, 50, 1, 64, 32, 32, true, true, {}, FeatureMap::elu1, true},
      {K::linear_attention, 1, 70, 1, 128, 128, 64, false, false, {}, FeatureMap::relu},
      {K::linear_attention, 1, 20, 2, 32, 16, 0, true, true, {}, FeatureMap::elu1, true},
      {K::linear_attention, 2, 23, 2, 32, 32, 16, true, true, docs23},
      {K::linear_attention, 2, 23, 1, 32, 32, 16, false, true, docs23, FeatureMap::elu1, true},
      {K::gla, 1, 37, 2, 32, 32, 16, true},
      {K::gla, 2, 45, 2, 64, 32, 32, false, false},
      {K::gla, 1, 70, 1, 128, 128, 64, true},
      {K::gla, 1, 20, 2, 32, 32, 0, true},
      {K::gla, 2, 23, 2, 32, 32, 16, true, true, docs23},
      {K::gla, 3, 20, 1, 32, 32, 16, true, false, rows20},
      {K::gated_deltanet, 1, 37, 2, 32, 32, 16, true},
      {K::deltanet, 2, 45, 2, 64, 48, 32, false, false},
      {K::gated_deltanet, 1, 70, 1, 128, 128, 64, true},
      {K::gated_deltanet, 1, 20, 2, 32, 32, 0, true},
      {K::deltanet, 1, 20, 2, 32, 32, 0, false},
      {K::gated_deltanet, 2, 23, 2, 32, 32, 16, true, true, docs23},
      {K::deltanet, 3, 20, 1, 32, 32, 16, true, true, rows20},
      {K::deltanet, 2, 130, 2, 64, 64, 64, true},        // the backward's gradients kernel above 48 KiB of
      {K::gated_deltanet, 1, 100, 3, 64, 64, 64, true},  // shared memory; T off the chunk
      // the tensor-core paths of linear attention and GLA
      {K::linear_attention, 1, 37, 2, 32, 32, 16, true, true, {}, FeatureMap::identity, false, MatmulPrecision::bf16},
      {K::linear_attention, 2, 50, 1, 64, 32, 32, true, true, {}, FeatureMap::elu1, true, MatmulPrecision::bf16},
      {K::linear_attention, 1, 70, 1, 128, 128, 64, false, false, {}, FeatureMap::relu, false, MatmulPrecision::tf32},
      {K::gla, 1, 70, 1, 128, 128, 64, true, true, {}, FeatureMap::identity, false, MatmulPrecision::bf16},
      {K::gla, 2, 45, 2, 64, 32, 32, false, false, {}, FeatureMap::identity, false, MatmulPrecision::tf32},
      {K::gla, 2, 23, 2, 32, 32, 16, true, true, docs23, FeatureMap::identity, false, MatmulPrecision::bf16},
      // and of DeltaNet's chunk factors (K Kᵀ, Q Kᵀ)
      {K::gated_deltanet, 1, 70, 1, 128, 128, 64, true, true, {}, FeatureMap::identity, false, MatmulPrecision::bf16},
      {K::deltanet, 2, 45, 2, 64, 48, 32, false, false, {}, FeatureMap::identity, false, MatmulPrecision::tf32},
      {K::gated_deltanet, 2, 23, 2, 32, 32, 16, true, true, docs23, FeatureMap::identity, false,
       MatmulPrecision::bf16},
  };
  for (const MixerCase& c : all) {
    const char* fwd = c.kind == K::linear_attention ? "linear_attention_forward"
                      : c.kind == K::gla            ? "gla_forward"
                                                    : "delta_rule_forward";
    const char* bwd = c.kind == K::linear_attention ? "linear_attention_backward"
                      : c.kind == K::gla            ? "gla_backward"
                                                    : "delta_rule_backward";
    const char* saved = c.kind == K::linear_attention ? "linear_attention_saved_size"
                        : c.kind == K::gla            ? "gla_saved_size"
                                                      : "delta_rule_saved_size";
    const std::string what = (c.kind == K::gated_deltanet ? "gated " : "") + c.str();
    const double tol = c.precision == MatmulPrecision::bf16   ? kBf16Mixers
                       : c.precision == MatmulPrecision::tf32 ? kTf32Mixers
                                                              : kScans;
    cases.push_back({{fwd, bwd, saved}, what, tol, [c](Side& x) { run_mixer(x, c); }});
  }
}

// Mamba2 (kernels/cuda/mamba2.h: GLA's passes around its own kernels), in MixerArgs' terms: q = C,
// k = B [B, T, G, N], v = x [B, T, H, P], gate = the time step before its softplus, rate = A_log,
// skip = D. `write`: the gradients of x, the time step, B and C are written (outputs, NaN until then),
// else added into.
struct Mamba2Case {
  int64_t B, T, H, G, N, P;
  int64_t chunk;  // 0: the recurrent form
  bool h0, dht;
  std::vector<int64_t> docs = {};
  bool write = false;
  MatmulPrecision precision = MatmulPrecision::f32;

  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " H=" + std::to_string(H) + " G=" +
           std::to_string(G) + " N=" + std::to_string(N) + " P=" + std::to_string(P) +
           (chunk ? " chunk=" + std::to_string(chunk) : std::string(" recurrent")) + (h0 ? " h0" : " no h0") +
           (dht ? " dht" : " no dht") + documents_str(docs) + (write ? " written" : "") +
           (precision == MatmulPrecision::f32 ? "" : std::string(" ") + matmul_precision_name(precision));
  }
};

void run_mamba2(Side& x, const Mamba2Case& c) {
  struct PrecisionScope {
    explicit PrecisionScope(MatmulPrecision p) { backend::set_matmul_precision(p); }
    ~PrecisionScope() { backend::set_matmul_precision(MatmulPrecision::f32); }
  } precision(c.precision);
  const Shape bc{c.B, c.T, c.G, c.N}, xo{c.B, c.T, c.H, c.P}, st{c.B, c.H, c.N, c.P}, bth{c.B, c.T, c.H}, h{c.H};
  MixerArgs a;
  a.B = c.B, a.T = c.T, a.H = c.H, a.G = c.G, a.Dk = c.N, a.Dv = c.P;
  a.chunk = c.chunk > 0, a.chunk_size = c.chunk > 0 ? c.chunk : 64;
  a.q = x.input(bc), a.k = x.input(bc), a.v = x.input(xo);
  a.gate = x.input(bth, -3, 1);    // dt = softplus(gate) in (0.05, 1.3)
  a.rate = x.input(h, -1, 1);      // A = -exp(A_log) in (-2.7, -0.37)
  a.skip = x.input(h, 0.5, 1.5);  // D
  if (c.h0) a.h0 = x.input(st);
  a.o = x.output("o", xo);
  a.ht = x.output("ht", st);
  Tensor table;
  a.seqs = ops::Segments{c.docs}.sequences(x.device, table);
  if (a.chunk) a.saved = x.scratch({backend::mamba2_saved_size(x.device, a)});
  backend::mamba2_forward(x.device, a);

  auto gradient = [&](const char* name, const Shape& s) { return c.write ? x.output(name, s) : x.accumulated(name, s); };
  a.dq = gradient("dC", bc), a.dk = gradient("dB", bc), a.dv = gradient("dx", xo), a.dgate = gradient("dgate", bth);
  a.write = c.write;
  a.drate = x.accumulated("dA_log", h), a.dskip = x.accumulated("dD", h);
  if (c.h0) a.dh0 = x.accumulated("dh0", st);
  a.dO = x.input(xo);
  if (c.dht) a.dht = x.input(st);
  backend::mamba2_backward(x.device, a);
}

void add_mamba2_cases(std::vector<Case>& cases) {
  const std::vector<int64_t> docs23 = {0, 9, 23, 24, 40, 46};  // B = 2, T = 23: a one-token document
  // one group for all heads, a group per head, groups of two; T off the chunk, N 32/64/128 and P != N;
  // the recurrent form; h0 and dht absent and present; documents; written gradients; bf16 products
  const std::vector<Mamba2Case> all = {
      {1, 37, 2, 1, 32, 32, 16, true, true},
      {2, 45, 4, 2, 64, 32, 32, false, false},
      {1, 70, 2, 2, 128, 64, 64, true, true},
      {1, 20, 2, 1, 32, 16, 0, true, true},
      {2, 23, 2, 1, 32, 32, 16, true, true, docs23},
      {2, 45, 4, 2, 32, 32, 32, true, false, {}, true},
      {1, 70, 2, 1, 64, 64, 64, true, true, {}, false, MatmulPrecision::bf16},
  };
  for (const Mamba2Case& c : all)
    cases.push_back({{"mamba2_forward", "mamba2_backward", "mamba2_saved_size"},
                     c.str(),
                     c.precision == MatmulPrecision::bf16 ? kBf16Mixers : kScans,
                     [c](Side& x) { run_mamba2(x, c); }});
}

// ---- the table ---------------------------------------------------------------------------------------------

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    add_pointwise_cases(c);
    add_gdn_decay_cases(c);
    add_gemm_cases(c);
    add_bias_and_norm_cases(c);
    add_embedding_conv_loss_cases(c);
    add_attention_cases(c);
    add_mixer_cases(c);
    add_mamba2_cases(c);
    return c;
  }();
  return cases;
}

// The op a case tests: its entry, or for a forward + backward pair the name they share (gla_forward
// + gla_backward: gla).
std::string op_of(const Case& c) {
  const std::string& first = c.entries[0];
  const std::string suffix = "_forward";
  const bool pair = c.entries.size() > 1 && first.size() > suffix.size() && first.ends_with(suffix);
  return pair ? first.substr(0, first.size() - suffix.size()) : first;
}

// The test name of a case: its op and its number among the cases of that op.
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  int n = 0;
  for (size_t i = 0; i < info.index; ++i) n += op_of(all_cases()[i]) == op_of(info.param);
  return op_of(info.param) + "_" + std::to_string(n);
}

// The random values of a case follow from its label, whatever the order of the cases.
uint64_t seed_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

TEST(CudaBackendOpsCoverage, EveryEntryHasACase) {
  std::set<std::string> covered, table;
  for (const Case& c : all_cases()) covered.insert(c.entries.begin(), c.entries.end());
  for (const char* name : backend::entry_names(Device::cuda)) {
    table.insert(name);
    EXPECT_TRUE(covered.count(name)) << "backend entry '" << name
                                     << "' has no case in tests/cuda/backend_ops_test.cpp: "
                                     << "add one that compares its CUDA column with its CPU column";
  }
  for (const std::string& name : covered)
    EXPECT_TRUE(table.count(name)) << "a case names '" << name
                                   << "', which is no entry of kernels/backend.cpp with a CUDA kernel";
}

class CudaBackendOps : public ::testing::TestWithParam<Case> {};

// The case's body on both columns, then every output of the CUDA one against the CPU one.
TEST_P(CudaBackendOps, CudaColumnMatchesCpuColumn) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  Side cpu(Device::cpu, seed_of(label(c))), cuda(Device::cuda, seed_of(label(c)));
  std::vector<std::pair<std::string, Tensor>> want, got;
  try {
    c.body(cpu);
    want = cpu.results();
  } catch (const std::exception& e) {
    FAIL() << label(c) << ": the CPU column threw: " << e.what();
  }
  try {
    c.body(cuda);
    got = cuda.results();
  } catch (const std::exception& e) {
    // Let the work queued before the throw run while the tensors it uses are alive (the Side is).
    std::string then;
    try {
      testing::device_sync();
    } catch (const std::exception& sync) {
      then = std::string("; then the device: ") + sync.what();
    }
    FAIL() << label(c) << ": the CUDA column threw: " << e.what() << then;
  }
  ASSERT_EQ(got.size(), want.size()) << label(c);
  std::pair<double, std::string> worst{0.0, ""};
  for (size_t i = 0; i < got.size(); ++i) {
    const std::string& name = want[i].first;
    ASSERT_EQ(got[i].second.shape(), want[i].second.shape()) << label(c) << ", output " << name;
    const testing::Error e = testing::compare(got[i].second, want[i].second);
    EXPECT_LE(e.relative, c.tol) << label(c) << ", output " << name << ": " << e.str() << ", tolerance "
                                 << std::setprecision(2) << c.tol;
    worst = std::max(worst, {e.relative, name});
  }
  // the margin below the tolerance, visible in the log
  std::printf("  worst relative error %.2g (%s), tolerance %.2g\n", worst.first, worst.second.c_str(), c.tol);
}

INSTANTIATE_TEST_SUITE_P(, CudaBackendOps, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace linattn
